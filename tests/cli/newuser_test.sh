#!/usr/bin/env bash
# What a new user meets first, on the local Docker engine: an image that
# cannot be pulled is reported with what to do and where the job file names
# it; `barge --help` lists every command a user runs (manpage included); the
# node verbs on the local engine (exec, top, hosts, reap) print no
# "connecting" step, which cannot be slow there.
# Usage: newuser_test.sh PATH_TO_BARGE   (needs a Docker engine: fails without)
. "$(dirname "$0")/lib.sh"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
if ! timeout 20 docker version >/dev/null 2>&1; then
  echo "FAIL: no Docker engine answers (scripts/ensure-docker.sh starts one)" >&2
  exit 1
fi
"$SRC/samples/build-demo-image.sh" barge/demo:local >/dev/null || { echo "FAIL: cannot build barge/demo:local" >&2; exit 1; }

# An image no registry gives (none is reachable here; the name does not
# exist anywhere either).
cat >"$SCRATCH/missing.yaml" <<'YAML'
name: missing-image
image: barge-test/no-such-image:1
hosts: [local]
YAML
err=$(cd "$SCRATCH" && "$BARGE" run missing.yaml 2>&1 >/dev/null)
rc=$?
check "a job whose image cannot be pulled fails before anything starts (rc $rc)" test "$rc" = 125
check "the error says the image cannot be pulled" contains "$err" "image barge-test/no-such-image:1 is missing and cannot be pulled"
check "the error names the job file's line and key" contains "$err" "(missing.yaml:2: image)"
check "the error says what to do" contains "$err" "load it there (docker load) or set image_pull: push"
check "nothing of the job is left" test -z "$(docker ps -aq --filter label=barge.job 2>/dev/null | xargs -r docker inspect --format '{{index .Config.Labels "barge.job"}} {{.Name}}' | grep missing-image)"

help=$("$BARGE" --help 2>&1)
for verb in plan run rerun ls show logs attach down exec forward top hosts reap rm prune ui schema completion manpage version; do
  check "barge --help lists $verb" contains "$help" "  $verb "
done

# A running job on the local engine, then the node verbs.
cat >"$SCRATCH/job.yaml" <<'YAML'
name: newuser
image: barge/demo:local
hosts: [local]
stop_grace: 1s
command: "sleep 60"
YAML
id=$(cd "$SCRATCH" && "$BARGE" run -d job.yaml 2>"$SCRATCH/run.err")
check "a detached job starts (id '$id')" test -n "$id"
out=$("$BARGE" exec "$id" -- echo inside 2>&1)
check "exec runs in the container" contains "$out" "inside"
for cmd in "exec $id -- true" "hosts $SCRATCH/job.yaml" "reap $SCRATCH/job.yaml"; do
  # shellcheck disable=SC2086
  out=$("$BARGE" $cmd 2>&1)
  check "barge ${cmd%% *} on the local engine prints no connecting step" test "${out//connecting/}" = "$out" ||
    printf '%s\n' "$out" >&2
done
out=$(timeout 5 "$BARGE" top "$id" --once 2>&1 || true)
check "barge top on the local engine prints no connecting step" test "${out//connecting/}" = "$out" ||
  printf '%s\n' "$out" >&2
"$BARGE" down "$id" >/dev/null 2>&1
check "down ends the job's containers" test -z "$(docker ps -q --filter "label=barge.job=$id")"
finish
