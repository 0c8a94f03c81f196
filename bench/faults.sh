#!/usr/bin/env bash
# bench/faults.sh: the fault table. Runs the fault-injection bed tests
# (tests/e2e/faults_bed_test.cc: link cut, docker kill, OOM kill, frozen dockerd,
# killed sshd, head crash, preemption notice, cut during start-up) and prints,
# for each fault, how long barge took to notice it (from the injection to
# the fault's event in the job store) and what became of the job.
#
#   bench/faults.sh            (needs root; brings the bed up, takes it down)
#
# The bounds are correctness bounds the tests assert (jobs there use
# ssh.dead_after: 3s), not performance targets; times vary by a few hundred
# ms between runs.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${BARGE_FAULT_TESTS:-$ROOT/build/runner/runner_faults_bed_tests}
[[ -x "$BIN" ]] || { echo "bench: build first ($BIN)" >&2; exit 1; }
"$ROOT/tests/bed/bed.sh" up >&2
trap '"$ROOT/tests/bed/bed.sh" down >&2 || true; rm -f "$TABLE"' EXIT
TABLE=$(mktemp)
BARGE_FAULT_TABLE=$TABLE "$BIN" >&2
echo
echo "| fault | detected after (bound) | outcome |"
echo "|---|---|---|"
sed -e 's/^fault-table: /| /' -e 's/$/ |/' "$TABLE"
