#!/usr/bin/env python3
"""The docs check's own test (ctest docs_check_self_test): check_docs.py on a
scratch tree whose README.md holds wrong values in job files and fragments
must fail naming each one's file and line, and pass the right ones.

Usage: check_docs_test.py --barge BARGE
"""

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

CHECK = Path(__file__).resolve().parent / "check_docs.py"

# (block, the README line each problem must name: None = no problem in it,
# a text each problem's message must hold)
JOB_HEAD = "name: t\nimage: busybox\nhosts: [192.0.2.10]\n"
BLOCKS = [
    # Wrong values in complete job files: barge plan refuses them.
    ("yaml job", "name: t\nimage: busybox\nhosts:\n  - address: 192.0.2.10\n    nodes: -1\n", 5, "nodes"),
    # Wrong values in fragments: the schema refuses them, at their line
    # (sizes and durations as the validator reads them, too).
    ("yaml container", "shm_size: lots\n", 1, "container.shm_size: 'lots' is not valid"),
    ("yaml .", "stop_grace: 10\n", 1, "stop_grace: 10 is not of type 'string'"),
    ("yaml .", "timeout: 1h\nrestart: maybe\n", 2, "restart: 'maybe' is not of type"),
    ("yaml container", "shm_size: 1g\nulimits: [memlock]\n", 2, "container.ulimits:"),
    ("yaml .", "network:\n  rdma: sometimes\n", 2, "network.rdma: 'sometimes' is not one of"),
    ("yaml hosts.0", "address: 192.0.2.1\nport: many\n", 2, "hosts.0.port: 'many' does not match"),
    # An unknown key is named once, by the key check.
    ("yaml container", "shm_sise: 1g\n", 1, "container.shm_sise: unknown key"),
    # Right ones pass: a block's required keys may be missing from a
    # fragment; `off` and `on` are text (YAML 1.2), as barge reads them.
    ("yaml .", "network: {rdma: off}\nrestart: {on: [host_lost], max_restarts: 2}\n", None, ""),
    ("yaml slurm", "partition: gpu\n", None, ""),
    ("yaml job", JOB_HEAD + "container: {shm_size: 1g}\n", None, ""),
]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--barge", required=True)
    args = parser.parse_args()
    failures = []
    with tempfile.TemporaryDirectory(prefix="barge-docs-check-test-") as root:
        text, wanted, clean = "", [], []
        for info, body, line, message in BLOCKS:
            text += "Text.\n\n"
            fence = text.count("\n") + 1
            text += f"```{info}\n{body}```\n\n"
            end = text.count("\n")
            if line is None:
                clean.append((fence, end))
            else:
                wanted.append((f"README.md:{fence + line}:", message))
        Path(root, "README.md").write_text(text, encoding="utf-8")
        run = subprocess.run([sys.executable, str(CHECK), "--root", root, "--barge", args.barge],
                             capture_output=True, text=True, timeout=300)
    out = run.stdout.splitlines()
    if run.returncode != 1:
        failures.append(f"exit code {run.returncode}, wanted 1")
    readme = [line for line in out if line.startswith("README.md:")]
    for where, message in wanted:
        hits = [line for line in readme if line.startswith(where + " ")]
        if not any(message in line for line in hits):
            failures.append(f"no problem at {where} holding {message!r}")
        if len(hits) != 1:
            failures.append(f"{len(hits)} problems at {where}, wanted 1")
    for first, last in clean:
        for line in readme:
            number = int(line.split(":")[1])
            if first <= number <= last:
                failures.append(f"a right block (lines {first}-{last}) was refused: {line}")
    if len(readme) != len(wanted):
        failures.append(f"{len(readme)} problems in README.md, wanted {len(wanted)}")
    if failures:
        print("\n".join(failures))
        print("--- the check printed:\n" + run.stdout + run.stderr)
        return 1
    print(f"docs check self-test: {len(wanted)} wrong blocks named at their lines, {len(clean)} right ones passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
