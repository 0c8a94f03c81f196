#!/usr/bin/env bash
# bench/image-push.sh: image_pull: push to many hosts, relayed from host to
# host (the image leaves this machine once) against push-direct (this
# machine sends it to every host, as barge did before the relay).
#
#   bench/image-push.sh [HOSTS] [RUNS] [IMAGE_MIB]   (default 16 3 100; needs root)
#
# An image of IMAGE_MIB MiB of random bytes (incompressible) on the bed's
# busybox image, in this machine's engine only. Each run removes it from
# the first HOSTS bed hosts, then runs a job of `true` on those hosts with
# image_pull: push-direct, then the same with image_pull: push (the
# reference and the relay alternate, so a change in the machine's load hits
# both). Per run it prints the job's wall time, the push's own time (barge's
# "pushed ... in T s" line), the bytes barge says it sent of the image, and
# the bytes that left this machine for the bed's hosts as the bed bridge's
# own counter saw them (tx_bytes of the bridge: what this machine's network
# stack sent into it, not what the hosts pass each other), and the machine's
# busy CPU seconds (/proc/stat: the hosts' sshd and dockerd included); then
# the medians and the relay's ratios to push-direct.
# Uses a bed that is up with at least HOSTS namespace hosts as it is (their
# sshds are made to read ~/.ssh/authorized_keys: bed.sh _home_keys);
# otherwise brings one up with HOSTS hosts.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
HOSTS=${1:-16}
RUNS=${2:-3}
MIB=${3:-100}
BARGE=${BARGE:-$ROOT/build/runner/barge}
[[ -x "$BARGE" ]] || { echo "bench: build barge first ($BARGE)" >&2; exit 1; }

ENV=${BARGE_BED_DIR:-/tmp/barge-bed}/bed.env
have=0
if [[ -e "$ENV" ]] && grep -q '^BED_DOCKERD=1$' "$ENV"; then
  have=$(sed -n 's/^BED_HOSTS="\(.*\)"$/\1/p' "$ENV" | wc -w)
fi
if ((have < HOSTS)); then
  BARGE_BED_HOSTS=$HOSTS "$ROOT/tests/bed/bed.sh" up >&2
fi
"$ROOT/tests/bed/bed.sh" _home_keys >&2
# shellcheck disable=SC1090
. "$ENV"
WORK=$(mktemp -d)
TAG=barge/push-bench:local
cleanup() {
  for i in $(seq 1 "$HOSTS"); do dh="BED_HOST_h${i}_DOCKER_HOST"; DOCKER_HOST=${!dh} docker rmi -f "$TAG" >/dev/null 2>&1 & done
  wait
  docker rmi -f "$TAG" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
export BARGE_HOME=$WORK/home

head -c "${MIB}M" /dev/urandom >"$WORK/blob"
cid=$(docker create "$BED_IMAGE" true)
docker cp "$WORK/blob" "$cid:/blob"
docker commit "$cid" "$TAG" >/dev/null
docker rm "$cid" >/dev/null
rm -f "$WORK/blob"
SIZE=$(docker save "$TAG" | wc -c)

job() {
  cat >"$WORK/$1.yaml" <<EOF
name: push-bench
image: $TAG
image_pull: $1
hosts:
$(for i in $(seq 1 "$HOSTS"); do v="BED_HOST_h${i}_ADDR"; echo "  - address: ${!v}"; done)
ssh: {user: $BED_SSH_USER, identity_file: $BED_SSH_KEY, known_hosts: $BED_KNOWN_HOSTS, connect_timeout: 30s}
stop_grace: 2s
command: ["true"]
EOF
}
job push
job push-direct

now() { date +%s.%N; }
busy() { awk '/^cpu / {print ($2 + $3 + $4 + $7 + $8) / 100; exit}' /proc/stat; }
tx() { cat "/sys/class/net/$BED_BRIDGE/statistics/tx_bytes"; }
unload() {
  for i in $(seq 1 "$HOSTS"); do dh="BED_HOST_h${i}_DOCKER_HOST"; DOCKER_HOST=${!dh} docker rmi -f "$TAG" >/dev/null 2>&1 & done
  wait
}

echo "# bench/image-push.sh $HOSTS $RUNS $MIB; commit $(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet HEAD -- . 2>/dev/null || echo '+changes'); $(date -u +%FT%TZ); $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "image $TAG: $SIZE bytes (docker save); $HOSTS bed hosts; bridge $BED_BRIDGE"
printf '%-4s %-12s %8s %8s %14s %14s %8s %8s\n' run mode job_s push_s barge_sent bridge_tx images cpu_s
declare -A JOB PUSH SENT TX CPU
for run in $(seq 1 "$RUNS"); do
  for mode in push-direct push; do
    unload
    b0=$(busy); x0=$(tx); t0=$(now)
    if ! "$BARGE" run "$WORK/$mode.yaml" >"$WORK/out" 2>"$WORK/err" </dev/null; then
      echo "run $run $mode: barge failed" >&2; tail -n 20 "$WORK/err" >&2; exit 1
    fi
    t1=$(now); x1=$(tx); b1=$(busy)
    line=$(grep -o 'pushed .* directly' "$WORK/err" | tail -n 1)
    [[ -n "$line" ]] || { echo "run $run $mode: no 'pushed' line" >&2; cat "$WORK/err" >&2; exit 1; }
    push_s=$(sed -n 's/.* in \([0-9.]*\) s;.*/\1/p' <<<"$line")
    sent=$(sed -n 's/.*this machine sent \([0-9]*\) bytes.*/\1/p' <<<"$line")
    job_s=$(awk -v a="$t1" -v b="$t0" 'BEGIN {printf "%.2f", a - b}')
    cpu_s=$(awk -v a="$b1" -v b="$b0" 'BEGIN {printf "%.1f", a - b}')
    bridge=$((x1 - x0))
    images=$(awk -v a="$bridge" -v s="$SIZE" 'BEGIN {printf "%.2f", a / s}')
    printf '%-4s %-12s %8s %8s %14s %14s %8s %8s\n' "$run" "$mode" "$job_s" "$push_s" "$sent" "$bridge" "$images" "$cpu_s"
    grep -q "$((HOSTS)) host(s) by relay, 0 directly\|0 host(s) by relay, $HOSTS directly" <<<"$line" ||
      echo "  note: $line"
    grep 'relay did not deliver' "$WORK/err" | sed 's/^/  /' || true
    JOB[$mode]+="$job_s "; PUSH[$mode]+="$push_s "; SENT[$mode]+="$sent "; TX[$mode]+="$bridge "; CPU[$mode]+="$cpu_s "
  done
done
median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
echo "medians:"
for mode in push-direct push; do
  echo "  $mode: job $(median "${JOB[$mode]}") s, push $(median "${PUSH[$mode]}") s, barge sent $(median "${SENT[$mode]}") B, bridge tx $(median "${TX[$mode]}") B, cpu $(median "${CPU[$mode]}") s"
done
ratio() { awk -v a="$(median "$1")" -v b="$(median "$2")" 'BEGIN {printf "%.2f", (b > 0) ? a / b : 0}'; }
echo "relay / push-direct: push time $(ratio "${PUSH[push]}" "${PUSH[push-direct]}"), job time $(ratio "${JOB[push]}" "${JOB[push-direct]}"), bytes leaving this machine (bridge) $(ratio "${TX[push]}" "${TX[push-direct]}"), machine CPU $(ratio "${CPU[push]}" "${CPU[push-direct]}")"
