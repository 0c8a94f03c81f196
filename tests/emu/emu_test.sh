#!/usr/bin/env bash
# tests/emu/emu_test.sh BARGE: barge runs a head/worker job on 100 EMULATED
# hosts (bench/emu: one sshd of the test's own, the hosts are loopback
# addresses with a /tmp each, bench/emu/fake-docker stands in for Docker) and
# must exit 0 with every node started and ended, and leave nothing: no
# per-host job directory, no fake container, no watchdog of the job, no
# process of the emulation but the sshd itself.
#
# Needs root (sshd, mount namespaces). BARGE_EMU_TEST_HOSTS (default 100)
# and BARGE_EMU_TEST_PORT (default 2201) change the size and the port.
set -euo pipefail
BARGE=${1:?usage: emu_test.sh PATH_TO_BARGE}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
N=${BARGE_EMU_TEST_HOSTS:-100}
fail() { echo "emu_test: FAIL: $*" >&2; exit 1; }
((EUID == 0)) || fail "needs root (an sshd of its own, mount namespaces)"
BARGE_EMU_DIR=$(mktemp -d /var/tmp/barge-emu-test.XXXXXX)
export BARGE_EMU_DIR BARGE_EMU_PORT=${BARGE_EMU_TEST_PORT:-2201}
WORK=$(mktemp -d)
export BARGE_HOME=$WORK/home
EMU=$ROOT/bench/emu/emu.sh
trap '"$EMU" down >&2 || true; rm -rf "$WORK"' EXIT

t0=$(date +%s.%N)
"$EMU" up "$N"
"$EMU" job "$N" "$WORK/job.yaml"
rc=0
timeout 100 "$BARGE" run "$WORK/job.yaml" >"$WORK/out" 2>"$WORK/err" || rc=$?
t1=$(date +%s.%N)
grep -E "done in" "$WORK/err" || true
if ((rc != 0)); then
  tail -40 "$WORK/err" >&2
  fail "barge exited $rc on $N emulated hosts"
fi
id=$(sed -n 's/^barge: job \([0-9a-f]*\) .*/\1/p' "$WORK/err" | head -1)
[[ -n $id ]] || fail "no job id in barge's output"

# Every node started (a container id) and ended (an exit code): the head
# with 0, the workers stopped (143) or, when the stop outlasted barge's
# drain bound on a loaded machine, killed by the removal (137).
"$BARGE" show --json "$id" >"$WORK/show.json"
grep -q '"status": "succeeded"' "$WORK/show.json" || fail "job $id is not 'succeeded'"
started=$(grep -c '"container_id": "e0' "$WORK/show.json" || true)
head_ok=$(grep -A8 '"rank": 0,' "$WORK/show.json" | grep -c '"exit_code": 0' || true)
stopped=$(grep -c '"exit_code": 143' "$WORK/show.json" || true)
killed=$(grep -c '"exit_code": 137' "$WORK/show.json" || true)
echo "emu_test: workers stopped: $stopped, killed at removal: $killed"
((started == N)) || fail "$started of $N nodes have a container id"
((head_ok == 1)) || fail "the head's exit code is not 0"
((stopped + killed == N - 1)) || { grep -B2 -A6 '"exit_code": null' "$WORK/show.json" | head -20 >&2; fail "$((N - 1 - stopped - killed)) of $((N - 1)) workers have no exit code"; }
runs=$(find "$BARGE_EMU_DIR/started/$id" -type f | wc -l)
((runs == N)) || fail "the fake engine saw $runs 'run -d' for $N nodes"

# Nothing left on any emulated host.
dirs=$(find "$BARGE_EMU_DIR/hosts" -mindepth 2 -maxdepth 2 -name "barge-$id.*" | wc -l)
((dirs == 0)) || fail "$dirs per-host job directories /tmp/barge-$id.* are left"
ctrs=$(find "$BARGE_EMU_DIR/hosts" -mindepth 3 -maxdepth 3 -path '*/fake-docker/*' | wc -l)
((ctrs == 0)) || fail "$ctrs fake containers are left"
# A watchdog's argv holds barge-watchdog-ID ([b] keeps grep from finding itself).
dogs=$(grep -l "[b]arge-watchdog-$id" /proc/[0-9]*/cmdline 2>/dev/null | wc -l || true)
((dogs == 0)) || fail "$dogs watchdog processes of job $id are left"
# Every process on the hosts' side carries BARGE_EMU_SIDE in its environment:
# only the sessions' sshd processes may remain, and only until barge has
# closed them (it has exited); give sshd a moment to reap.
for _ in $(seq 50); do
  left=$("$EMU" pids | xargs -r ps -o comm= -p 2>/dev/null | grep -vc '^sshd$' || true)
  ((left == 0)) && break
  sleep 0.1
done
if ((left != 0)); then
  "$EMU" pids | xargs -r ps -o pid=,args= -p >&2 || true
  fail "$left processes of the emulated hosts are left"
fi
awk -v a="$t1" -v b="$t0" -v n="$N" 'BEGIN {printf "emu_test: ok: %d emulated hosts, up and job in %.1f s\n", n, a - b}'
