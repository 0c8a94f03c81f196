#!/usr/bin/env bash
# `barge rerun JOB` runs a recorded job again from what was recorded — the
# job file's text, the overrides, the hosts — not from the file as it is
# now; `barge show` says how the job was run. Runs on the local Docker
# engine with the demo image (samples/build-demo-image.sh, offline).
# Usage: rerun_test.sh PATH_TO_BARGE   (needs a Docker engine: fails without)
. "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
if ! timeout 20 docker version >/dev/null 2>&1; then
  echo "FAIL: no Docker engine answers (scripts/ensure-docker.sh starts one)" >&2
  exit 1
fi
"$SRC/samples/build-demo-image.sh" barge/demo:local >/dev/null || { echo "FAIL: cannot build barge/demo:local" >&2; exit 1; }

cat >"$SCRATCH/job.yaml" <<'YAML'
name: rr
image: barge/demo:local
container:
  env:
    FROM_FILE: first
command: echo "value=$V from_file=$FROM_FILE name=$BARGE_JOB_NAME"
YAML
out=$(cd "$SCRATCH" && "$BARGE" run job.yaml --env V=42 --name rr-exp 2>&1)
rc=$?
check "the first run succeeds (rc $rc)" test "$rc" = 0
check "the first run sees the overrides" contains "$out" "value=42 from_file=first name=rr-exp"
first=$("$BARGE" ls --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')

out=$("$BARGE" show "$first" 2>&1)
check "show says how the job was run" contains "$out" "run as:     barge run $SCRATCH/job.yaml --env V=42 --name rr-exp"
json=$("$BARGE" show --json "$first")
check "show --json carries the run request" /usr/bin/python3 -c '
import json, sys
r = json.loads(sys.argv[1])["job"]["run_request"]
assert r["overrides"] == [{"flag": "--env", "argument": "V=42"}, {"flag": "--name", "argument": "rr-exp"}], r
assert "FROM_FILE: first" in r["text"], r' "$json"

# The file changes after the run; rerun runs what was recorded.
sed -i 's/FROM_FILE: first/FROM_FILE: edited/' "$SCRATCH/job.yaml"
out=$(cd / && "$BARGE" rerun rr-exp 2>&1)
rc=$?
check "rerun succeeds (rc $rc)" test "$rc" = 0
check "rerun runs the recorded text and overrides" contains "$out" "value=42 from_file=first name=rr-exp"
second=$("$BARGE" ls --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')
check "rerun is a new job ($first -> $second)" test "$first" != "$second"
out=$("$BARGE" show "$second" 2>&1)
check "the rerun records the same request" contains "$out" "--env V=42 --name rr-exp"
finish
