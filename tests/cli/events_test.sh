#!/usr/bin/env bash
# `barge run --events json`: one JSON object per line, per-host phase edges
# and job events, in the job's order, the job's end (succeeded) last; on stdout (container output then only
# in the kept logs) or into --events-file (output echoed as usual). Runs a
# head and two workers on the local Docker engine with the demo image.
# Usage: events_test.sh PATH_TO_BARGE   (needs a Docker engine: fails without)
. "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
if ! timeout 20 docker version >/dev/null 2>&1; then
  echo "FAIL: no Docker engine answers (scripts/ensure-docker.sh starts one)" >&2
  exit 1
fi
"$SRC/samples/build-demo-image.sh" barge/demo:local >/dev/null || { echo "FAIL: cannot build barge/demo:local" >&2; exit 1; }

cat >"$SCRATCH/job.yaml" <<'YAML'
name: ev
image: barge/demo:local
hosts:
  - address: local
    nodes: 3
stop_grace: 1s
roles:
  head: {command: "sleep 1; echo head-line"}
  worker: {command: "echo worker-line; sleep 30"}
YAML
out=$(cd "$SCRATCH" && "$BARGE" run job.yaml --events json 2>"$SCRATCH/err")
rc=$?
check "the job succeeds (rc $rc)" test "$rc" = 0 || cat "$SCRATCH/err" >&2
check "container output is not on stdout" test "${out//head-line/}" = "$out"
printf '%s\n' "$out" >"$SCRATCH/events"
check "every line is a JSON object, in the job's order" /usr/bin/python3 - "$SCRATCH/events" <<'PY'
import json, sys
lines = [l for l in open(sys.argv[1]).read().split("\n") if l]
ev = [json.loads(l) for l in lines]
assert len(ev) >= 10, ev
ats = [e["at"] for e in ev]
assert ats == sorted(ats), "timestamps go backwards"
def first(pred):
    return next(i for i, e in enumerate(ev) if pred(e))
def phase(p, state, rank=None):
    return first(lambda e: e["type"] == "phase" and e["phase"] == p and e["state"] == state
                 and (rank is None or e.get("rank") == rank))
# preflight, then the head starts and is running before any worker starts,
# every phase that began ended, and the job's end comes last.
assert phase("preflight", "began") < phase("preflight", "ended") < phase("start", "began", 0)
assert phase("start", "ended", 0) < phase("start", "began", 1)
assert phase("start", "ended", 0) < phase("start", "began", 2)
began = [(e["phase"], e.get("host_id"), e.get("rank")) for e in ev if e["type"] == "phase" and e["state"] == "began"]
ended = [(e["phase"], e.get("host_id"), e.get("rank")) for e in ev if e["type"] == "phase" and e["state"] == "ended"]
assert sorted(began) == sorted(ended), (began, ended)
kinds = [e["kind"] for e in ev if e["type"] == "event"]
assert "running" in kinds and "torn_down" in kinds, kinds
exited = first(lambda e: e["type"] == "event" and e["kind"] == "node_exited")
assert phase("running", "began", 0) < phase("running", "ended", 0) < exited
assert kinds.index("torn_down") < kinds.index("succeeded"), kinds
assert ev[-1]["type"] == "event" and ev[-1]["kind"] == "succeeded", ev[-1]
PY
job=$("$BARGE" ls --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')
check "the output went to the kept logs" contains "$("$BARGE" logs "$job" 2>&1)" "head-line"

out=$(cd "$SCRATCH" && "$BARGE" run job.yaml --events-file "$SCRATCH/events2" 2>/dev/null)
check "with --events-file the output is echoed" contains "$out" "head-line"
check "and the file holds the events" /usr/bin/python3 -c '
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
assert ev[-1]["kind"] == "succeeded", ev[-1]' "$SCRATCH/events2"
out=$(cd "$SCRATCH" && "$BARGE" run job.yaml --events yaml 2>&1)
check "an unknown format is refused" contains "$out" "--events"
finish
