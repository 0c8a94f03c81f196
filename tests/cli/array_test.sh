#!/usr/bin/env bash
# Job arrays from the command line, on the local Docker engine with the demo
# image: `--events json` (the array controller's own events: every line a
# JSON object, timestamps in order, each member that started ended, the
# array's outcome last) and `--events-file`; `ls --json` and `show --json`
# of an array; `rerun ARRAY` (every member again, as a new array); `rm
# ARRAY` and `prune` removing arrays with their member jobs.
# Usage: array_test.sh PATH_TO_BARGE   (needs a Docker engine: fails without)
. "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
if ! timeout 20 docker version >/dev/null 2>&1; then
  echo "FAIL: no Docker engine answers (scripts/ensure-docker.sh starts one)" >&2
  exit 1
fi
"$SRC/samples/build-demo-image.sh" barge/demo:local >/dev/null || { echo "FAIL: cannot build barge/demo:local" >&2; exit 1; }

# Member 1 fails (exit 3), is retried once and fails again; member 0 succeeds.
cat >"$SCRATCH/job.yaml" <<'YAML'
name: evarr
image: barge/demo:local
stop_grace: 1s
timeout: 60s
array:
  matrix: {n: [0, 1]}
array_retries: 1
command: echo "member-line $n"; [ "$n" = 1 ] && exit 3; exit 0
YAML
out=$(cd "$SCRATCH" && timeout 240 "$BARGE" run job.yaml --events json 2>"$SCRATCH/err")
rc=$?
check "the array fails as member 1 does (rc $rc)" test "$rc" = 125 || cat "$SCRATCH/err" >&2
check "member output is not on stdout" test "${out//member-line/}" = "$out"
check "the summary table went to stderr" contains "$(cat "$SCRATCH/err")" "INDEX | PARAMS"
printf '%s\n' "$out" >"$SCRATCH/events"
check "every line is a JSON event, in order; each member that started ended; the outcome is last" \
  /usr/bin/python3 - "$SCRATCH/events" <<'PY'
import json, sys
lines = [l for l in open(sys.argv[1]).read().split("\n") if l]
ev = [json.loads(l) for l in lines]
assert all(e["type"] == "event" and isinstance(e["detail"], str) for e in ev), ev
ats = [e["at"] for e in ev]
assert ats == sorted(ats), "timestamps go backwards"
array = ev[0]["array"]
assert all(e["array"] == array for e in ev), ev
assert ev[0]["kind"] == "array_started" and ev[0]["size"] == 2, ev[0]
started = [(i, e["job"]) for i, e in enumerate(ev) if e["kind"] == "member_started"]
ended = {e["job"]: i for i, e in enumerate(ev) if e["kind"] == "member_ended"}
assert len(started) == 3, started  # member 0 once, member 1 twice
for i, job in started:
    assert job in ended and ended[job] > i, (job, ev)
m1 = [e for e in ev if e["kind"] == "member_ended" and e["index"] == 1]
assert [e["status"] for e in m1] == ["retrying", "failed"], m1
assert [e["retries"] for e in m1] == [0, 1] and all(e["exit_code"] == 3 for e in m1), m1
m0 = [e for e in ev if e["kind"] == "member_ended" and e["index"] == 0]
assert [e["status"] for e in m0] == ["succeeded"] and m0[0]["exit_code"] == 0, m0
assert ev[-1]["kind"] == "failed" and ev[-1]["exit_code"] == 125, ev[-1]
print(array, file=open(sys.argv[1] + ".id", "w"))
PY
first=$(cat "$SCRATCH/events.id")

json=$("$BARGE" ls --json)
check "ls --json lists the array with its source, counts and member job ids" /usr/bin/python3 -c '
import json, sys
ls = json.loads(sys.argv[1]); first = sys.argv[2]
arrays = [e for e in ls if e.get("kind") == "array"]
assert [a["id"] for a in arrays] == [first], ls
a = arrays[0]
assert a["source"] == "array.matrix" and a["status"] == "failed", a
assert a["counts"]["succeeded"] == 1 and a["counts"]["failed"] == 1, a["counts"]
assert len(a["members"][1]["job_ids"]) == 2, a["members"]
assert all(e.get("kind") == "array" for e in ls), "member jobs are listed one by one"' "$json" "$first"
json=$("$BARGE" show --json "$first")
check "show --json ARRAY prints the array object" /usr/bin/python3 -c '
import json, sys
a = json.loads(sys.argv[1])
assert a["id"] == sys.argv[2] and a["members"][0]["status"] == "succeeded", a' "$json" "$first"

out=$(cd "$SCRATCH" && timeout 240 "$BARGE" run job.yaml --events-file "$SCRATCH/events2" 2>/dev/null)
check "with --events-file the member output is echoed" contains "$out" "member-line 0"
check "and the file holds the array's events, its outcome last" /usr/bin/python3 -c '
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
assert ev[0]["kind"] == "array_started" and ev[-1]["kind"] == "failed", ev' "$SCRATCH/events2"

# rerun ARRAY (no --failed): every member again, as a new array.
err=$(timeout 240 "$BARGE" rerun "$first" 2>&1 >/dev/null)
rc=$?
check "rerun ARRAY runs the array again and fails the same way (rc $rc)" test "$rc" = 125
check "rerun ARRAY says it runs every member as a new array" contains "$err" "running every member (2) of array $first again as array"
json=$("$BARGE" ls --json)
check "the rerun is a third array; the first keeps its record and job ids" /usr/bin/python3 -c '
import json, sys
ls = json.loads(sys.argv[1]); first = sys.argv[2]
arrays = [e for e in ls if e.get("kind") == "array"]
assert len(arrays) == 3, ls
newest, old = arrays[0], [a for a in arrays if a["id"] == first][0]
assert newest["id"] != first and newest["counts"]["succeeded"] == 1 and newest["counts"]["failed"] == 1, newest
new_jobs = {j for m in newest["members"] for j in m["job_ids"]}
old_jobs = {j for m in old["members"] for j in m["job_ids"]}
assert len(new_jobs) == 3 and not (new_jobs & old_jobs), (new_jobs, old_jobs)
assert old["counts"]["failed"] == 1 and old["status"] == "failed", old' "$json" "$first"
member=$(printf '%s' "$json" | /usr/bin/python3 -c '
import json, sys
print([e for e in json.load(sys.stdin) if e["id"] == sys.argv[1]][0]["members"][0]["job"])' "$first")

all_jobs=$(printf '%s' "$json" | /usr/bin/python3 -c '
import json, sys
print(" ".join(j for a in json.load(sys.stdin) for m in a.get("members", []) for j in m["job_ids"]))')
left=""
for j in $all_jobs; do left+=$(docker ps -aq --filter "label=barge.job=$j"); done
check "no container of the arrays' $(wc -w <<<"$all_jobs") member jobs is left" test -z "$left"

out=$("$BARGE" rm "$first" 2>&1)
check "rm ARRAY removes the array and its 3 member jobs" contains "$out" "removed array $first (evarr, failed) and its 3 member job(s)"
check "the member job is gone" test "$("$BARGE" show "$member" >/dev/null 2>&1; echo $?)" = 125
check "so are its logs" test ! -e "$BARGE_HOME/runs/$member"
out=$("$BARGE" prune --older-than 0s 2>&1)
check "prune removes the finished arrays" contains "$out" "removed array"
check "and nothing is listed afterwards" test "$("$BARGE" ls --json | tr -d ' \n')" = "[]"
finish
