#!/usr/bin/env bash
# bench/queue-fairness.sh: does a 3-host job that waits for its hosts get
# them while a stream of 1-host jobs keeps arriving on two of them?
#
#   bench/queue-fairness.sh [BARGE_BINARY] [SECONDS]
#
# On the bed (brought up if it is not, taken down after only if this script
# brought it up): a holder job takes bed host 1 for 8 s; then the big job
# (hosts 1-3, `wait:` SECONDS+30) starts waiting; then, for SECONDS (default
# 90) or until the big job starts, two loops per host keep running one-host
# jobs (`sleep 3`, `wait:`) on hosts 2 and 3, so that one of them is always
# waiting for the host when the other ends. Prints when the big job started
# (seconds after it began waiting) or that it had not started when the
# stream stopped, and how many stream jobs ran meanwhile.
#
# Run it with a barge built from before the fair queue (cdeb3be^) to see the
# starvation the rule prevents, and with the current one to see it does not
# happen; tests/e2e/reservation_bed_test.cc quotes both figures.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BARGE=$(readlink -f "${1:-$ROOT/build/runner/barge}")
LIMIT=${2:-90}
[[ -x "$BARGE" ]] || { echo "queue-fairness: no barge at $BARGE" >&2; exit 1; }
BED_DIR=${BARGE_BED_DIR:-/tmp/barge-bed}
ours=0
if ! "$ROOT/tests/bed/bed.sh" status >/dev/null 2>&1; then
  "$ROOT/tests/bed/bed.sh" up >&2
  ours=1
fi
# shellcheck disable=SC1091
source "$BED_DIR/bed.env"
WORK=$(mktemp -d /tmp/barge-queue-fairness.XXXXXX)
cleanup() {
  # The loops stop once the stream file goes; every job ends on its own
  # (no kill by pid: a pid that ended may be another process's by now).
  rm -f "$WORK/stream"
  wait 2>/dev/null || true
  rm -rf "$WORK"
  ((ours == 0)) || "$ROOT/tests/bed/bed.sh" down >&2 || true
}
trap cleanup EXIT

addr() { local v="BED_HOST_h$1_ADDR"; echo "${!v}"; }
job() { # NAME COMMAND EXTRA HOST_INDICES...
  local name=$1 cmd=$2 extra=$3 i
  shift 3
  printf 'name: %s\nimage: %s\ncommand: %s\nstop_grace: 1s\ntimeout: 120s\n%shosts:\n' \
    "$name" "$BED_IMAGE" "$cmd" "$extra"
  for i in "$@"; do printf '  - address: %s\n' "$(addr "$i")"; done
  printf 'ssh:\n  user: %s\n  identity_file: %s\n  known_hosts: %s\n  connect_timeout: 10s\n' \
    "$BED_SSH_USER" "$BED_SSH_KEY" "$BED_KNOWN_HOSTS"
}
export BARGE_HOME=$WORK/home
job fair-holder '["sleep", "8"]' '' 1 >"$WORK/holder.yaml"
job fair-big '["sleep", "2"]' "wait: $((LIMIT + 30))s
" 1 2 3 >"$WORK/big.yaml"
for h in 2 3; do job "fair-small-h$h" '["sleep", "3"]' "wait: $((LIMIT + 60))s
" "$h" >"$WORK/small-$h.yaml"; done

cd "$WORK"
"$BARGE" run holder.yaml >holder.out 2>holder.err &
until grep -q 'node(s); logs in' holder.err 2>/dev/null; do sleep 0.2; done
"$BARGE" run big.yaml >big.out 2>big.err &
big=$!
until grep -q 'waiting for' big.err 2>/dev/null; do sleep 0.2; done
t0=$(date +%s.%N)
touch "$WORK/stream"
loops=""
for h in 2 3; do
  for k in 1 2; do
    (n=0
     while [[ -e "$WORK/stream" ]]; do
       n=$((n + 1))
       "$BARGE" run "small-$h.yaml" >"small-$h-$k-$n.out" 2>"small-$h-$k-$n.err" || true
     done) &
    loops+=" $!"
    sleep 1.5
  done
done
started=""
while :; do
  now=$(date +%s.%N)
  if grep -q 'node(s); logs in' big.err; then
    started=$(awk -v a="$t0" -v b="$now" 'BEGIN { printf "%.1f", b - a }')
    break
  fi
  awk -v a="$t0" -v b="$now" -v l="$LIMIT" 'BEGIN { exit !(b - a >= l) }' && break
  sleep 0.2
done
rm -f "$WORK/stream"
ran=$(grep -l 'node(s); logs in' small-*.err 2>/dev/null | wc -l)
commit=$(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown)
echo "queue-fairness $(date -Is) barge=$BARGE ($("$BARGE" --version 2>/dev/null | head -n1)) tree=$commit"
if [[ -n "$started" ]]; then
  echo "big 3-host job started ${started} s after it began waiting; stream jobs started meanwhile: $ran"
else
  echo "big 3-host job had NOT started ${LIMIT} s after it began waiting; stream jobs started meanwhile: $ran"
fi
# Let everything end on its own (each job tears itself down).
wait $loops 2>/dev/null || true
wait "$big" 2>/dev/null || true
wait 2>/dev/null || true
