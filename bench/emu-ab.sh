#!/usr/bin/env bash
# bench/emu-ab.sh: two barge binaries, A and B, run the same job on the same
# EMULATED hosts (bench/emu), in alternating rounds, so that a change of
# barge's own work shows apart from a change of the machine or the
# emulation. Prints, per run, the wall time and the emulated hosts' CPU per
# host (what the emulation's sshd reaped: sshd, shells, engine calls), then
# the medians.
#
#   bench/emu-ab.sh BARGE_A BARGE_B [HOSTS] [ROUNDS]    (default 16 3; root)
#
# Its own emulation (BARGE_EMU_DIR /var/tmp/barge-emu-ab, port 2300), taken
# down at the end. The job is bench/emu/emu.sh's; a binary that predates a
# key the job file has (ssh.engine_timeout) gets the file without it
# (BARGE_A_DROP / BARGE_B_DROP: a sed expression, e.g. 's/, engine_timeout: 60s//').
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
A=${1:?barge binary A}
B=${2:?barge binary B}
N=${3:-16}
ROUNDS=${4:-3}
export BARGE_EMU_DIR=${BARGE_EMU_DIR:-/var/tmp/barge-emu-ab} BARGE_EMU_PORT=${BARGE_EMU_PORT:-2300}
WORK=$(mktemp -d)
trap '"$ROOT/bench/emu/emu.sh" down >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
"$ROOT/bench/emu/emu.sh" up "$N" >"$WORK/up.log" 2>&1 || { cat "$WORK/up.log" >&2; exit 1; }
# shellcheck disable=SC1091
. "$BARGE_EMU_DIR/emu.env"
"$ROOT/bench/emu/emu.sh" job "$N" "$WORK/job.yaml" >/dev/null
sed -e "${BARGE_A_DROP:-}" "$WORK/job.yaml" >"$WORK/a.yaml"
sed -e "${BARGE_B_DROP:-}" "$WORK/job.yaml" >"$WORK/b.yaml"
SSHD=$(cat "$BARGE_EMU_DIR/sshd.pid")
HZ=$(getconf CLK_TCK)
reaped() { awk '{print $16 + $17}' "/proc/$SSHD/stat"; }  # children's CPU, in clock ticks

echo "# bench/emu-ab.sh $N hosts, $ROUNDS rounds -- $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# A: $A ($("$A" --version 2>&1 | head -n 1))"
echo "# B: $B ($("$B" --version 2>&1 | head -n 1))"
printf '%-4s %-6s %-4s %-9s %s\n' run round rc wall_s hostCPU_ms_per_host
for ((r = 1; r <= ROUNDS; r++)); do
  for v in A B; do
    bin=$A; file=$WORK/a.yaml
    [[ $v == B ]] && { bin=$B; file=$WORK/b.yaml; }
    c0=$(reaped); t0=$(date +%s.%N)
    rc=0; BARGE_HOME=$WORK/home-$v "$bin" run "$file" >"$WORK/$v.out" 2>&1 || rc=$?
    t1=$(date +%s.%N); c1=$(reaped)
    printf '%-4s %-6s %-4s %-9.2f %d\n' "$v" "$r" "$rc" "$(echo "$t1 - $t0" | bc)" \
      "$(( (c1 - c0) * 1000 / HZ / N ))" | tee -a "$WORK/rows"
    [[ $rc -eq 0 ]] || tail -n 5 "$WORK/$v.out" >&2
    sleep 2
  done
done
median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
for v in A B; do
  echo "median $v: wall $(awk -v v="$v" '$1 == v {print $4}' "$WORK/rows" | median) s," \
    "hosts' CPU $(awk -v v="$v" '$1 == v {print $5}' "$WORK/rows" | median) ms per host"
done
