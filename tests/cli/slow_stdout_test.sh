#!/usr/bin/env bash
# A reader of barge's stdout that stalls (as CI log collectors do) never
# stalls the job: a head printing 300,000 lines (30 MB) runs, ends and is
# torn down while nobody reads barge's stdout at all (the reader waits for
# the job's end in the --events-file before reading a byte; if the loop
# blocked on stdout that end would never come); then the reader gets every
# line once, in order, from the kept file's catch-up; barge's peak RSS stays
# within 12 MB of the same job printing 10 lines (its queue holds 4 MB). Runs on the local Docker
# engine with the demo image.
# Usage: slow_stdout_test.sh PATH_TO_BARGE   (needs a Docker engine: fails without)
. "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
if ! timeout 20 docker version >/dev/null 2>&1; then
  echo "FAIL: no Docker engine answers (scripts/ensure-docker.sh starts one)" >&2
  exit 1
fi
[[ -x /usr/bin/time ]] || { echo "FAIL: /usr/bin/time is missing (apt-get install time)" >&2; exit 1; }
"$SRC/samples/build-demo-image.sh" barge/demo:local >/dev/null || { echo "FAIL: cannot build barge/demo:local" >&2; exit 1; }

job() {  # $1 = lines
  cat <<YAML
name: slow-stdout
image: barge/demo:local
hosts: [{address: local}]
timeout: 5m
command: ["sh", "-c", "awk 'BEGIN { p = sprintf(\"%80s\", \"\"); gsub(/ /, \"x\", p); for (i = 1; i <= $1; i++) printf \"%08d %s\\\\n\", i, p }'"]
YAML
}
job 300000 >"$SCRATCH/big.yaml"
job 10 >"$SCRATCH/small.yaml"

# The reader: nothing until the job's end is in the events file (at most
# 120 s), then everything.
: >"$SCRATCH/events"
reader() {
  for _ in $(seq 1 600); do
    grep -q '"kind":"succeeded"' "$SCRATCH/events" && { touch "$SCRATCH/saw-end"; break; }
    sleep 0.2
  done
  cat >"$SCRATCH/out"
}
(cd "$SCRATCH" && /usr/bin/time -f %M -o "$SCRATCH/rss-big" "$BARGE" run big.yaml --events-file "$SCRATCH/events" 2>"$SCRATCH/err") | reader
rc=${PIPESTATUS[0]}
check "the job succeeds (rc $rc)" test "$rc" = 0 || cat "$SCRATCH/err" >&2
check "the job ended and was torn down before its stdout was read at all" \
  test -e "$SCRATCH/saw-end"
check "the reader got every line once, in order" /usr/bin/python3 - "$SCRATCH/out" <<'PY'
import sys
n = 0
for line in open(sys.argv[1]):
    if not line.startswith("[0 "):
        continue
    n += 1
    num = int(line.split("] ", 1)[1][:8])
    assert num == n, f"line {n} is number {num}"
assert n == 300000, f"{n} lines"
PY
if ((failed > 0)); then  # where the lines went missing: the kept file or the terminal copy
  for f in "$SCRATCH"/state/runs/*/*.log; do echo "kept file $(basename "$f"): $(grep -c ' stdout ' "$f") stdout lines" >&2; done
  tail -5 "$SCRATCH/err" >&2
fi
(cd "$SCRATCH" && /usr/bin/time -f %M -o "$SCRATCH/rss-small" "$BARGE" run small.yaml >/dev/null 2>&1)
big=$(tail -1 "$SCRATCH/rss-big"); small=$(tail -1 "$SCRATCH/rss-small")
echo "peak RSS: ${big} KB with 30 MB unread on stdout, ${small} KB for 10 lines"
check "peak RSS within 12 MB of a 10-line job (${big} KB vs ${small} KB)" test $((big - small)) -le $((12 * 1024))
finish
