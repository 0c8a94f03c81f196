#!/usr/bin/env bash
# bench/logs.sh: how fast barge relays one node's output, against the same
# container run attached over plain ssh with its output thrown away.
#
#   bench/logs.sh [RUNS] [LINES]   (default 3 runs, 1000000 lines; needs root)
#
# The container prints LINES numbered lines of 100 bytes (an 8-digit number,
# padding, newline) as fast as busybox awk can, then exits. barge runs it as
# a one-host job: its relay streams every line to the terminal (here
# /dev/null) and to the node's kept log file. The reference is
# `ssh HOST docker run --rm IMAGE ... >/dev/null`, an attached docker run,
# the fastest way to see a container's output from another machine.
# After each barge run the kept log is checked: exactly LINES stdout lines,
# numbered 1..LINES in order, none lost or repeated.
# Prints the median wall time of each, the relay's throughput relative to the
# reference (reference time / barge time), and MB/s of each.
# Uses bed host h1 (tests/bed/bed.sh up with one host; it reuses a bed that
# is up when BARGE_BED_REUSE=1) and leaves the bed as it found it.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RUNS=${1:-3}
LINES=${2:-1000000}
BARGE=${BARGE:-$ROOT/build/runner/barge}
[[ -x "$BARGE" ]] || { echo "bench: build barge first ($BARGE)" >&2; exit 1; }

"$ROOT/tests/bed/bed.sh" up >&2
# shellcheck disable=SC1091
. "${BARGE_BED_DIR:-/tmp/barge-bed}/bed.env"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export BARGE_HOME=$WORK/home
H=$BED_HOST_h1_ADDR

# 100 bytes a line: 8 digits, a space, 90 letters, a newline.
GEN="awk 'BEGIN { p = sprintf(\"%90s\", \"\"); gsub(/ /, \"x\", p); for (i = 1; i <= $LINES; i++) printf \"%08d %s\\n\", i, p }'"

cat >"$WORK/job.yaml" <<EOF
name: logbench
image: $BED_IMAGE
hosts: [{address: $H}]
ssh: {user: $BED_SSH_USER, identity_file: $BED_SSH_KEY, known_hosts: $BED_KNOWN_HOSTS}
timeout: 10m
command: ["sh", "-c", $(printf '%s' "$GEN" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()))')]
EOF

now() { date +%s.%N; }
since() { awk -v a="$(now)" -v b="$1" 'BEGIN {printf "%.3f\n", a - b}'; }

run_barge() {
  local t0; t0=$(now)
  "$BARGE" run "$WORK/job.yaml" >/dev/null 2>"$WORK/barge.err" || { cat "$WORK/barge.err" >&2; return 1; }
  since "$t0"
  # The kept log of the job just run: every line, in order, once.
  local log; log=$(ls -t "$BARGE_HOME"/runs/*/0-*.log | head -1)
  awk -v n="$LINES" '
    $1 == "stdout" || $2 == "stdout" { k++; v = ($1 == "stdout") ? $2 : $3
      if (v + 0 != k) { printf "bench: line %d of the kept log is number %s\n", k, v > "/dev/stderr"; bad = 1; exit 1 } }
    END { if (!bad && k != n) { printf "bench: the kept log has %d stdout lines, not %d\n", k, n > "/dev/stderr"; exit 1 } }' "$log"
  rm -rf "$BARGE_HOME/runs"
}

run_ssh() {
  local t0; t0=$(now)
  ssh -i "$BED_SSH_KEY" -o UserKnownHostsFile="$BED_KNOWN_HOSTS" -o StrictHostKeyChecking=yes -o BatchMode=yes \
    "$BED_SSH_USER@$H" "docker run --rm $BED_IMAGE sh -c $(printf '%q' "$GEN")" >/dev/null
  since "$t0"
}

median() { sort -n | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.2f", m}'; }

: >"$WORK/b"; : >"$WORK/s"
run_ssh >/dev/null  # warm-up
for _ in $(seq 1 "$RUNS"); do  # interleaved, so drift hits both alike
  run_barge >>"$WORK/b"
  run_ssh >>"$WORK/s"
done
bw=$(median <"$WORK/b"); sw=$(median <"$WORK/s")
mb=$(awk -v n="$LINES" 'BEGIN {printf "%.1f", n * 100 / 1e6}')
echo "# $(date -u +%Y-%m-%d) $(nproc) cores, $RUNS runs each, medians; $LINES lines of 100 bytes ($mb MB) from one node"
printf "%-28s %8s %8s\n" "" "wall s" "MB/s"
printf "%-28s %8s %8s\n" "ssh + attached docker run" "$sw" "$(awk -v m="$mb" -v t="$sw" 'BEGIN {printf "%.1f", m / t}')"
printf "%-28s %8s %8s\n" "barge (terminal + kept log)" "$bw" "$(awk -v m="$mb" -v t="$bw" 'BEGIN {printf "%.1f", m / t}')"
echo "barge relay throughput / reference: $(awk -v a="$sw" -v b="$bw" 'BEGIN {printf "%.2f", a / b}')"
