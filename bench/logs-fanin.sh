#!/usr/bin/env bash
# bench/logs-fanin.sh: many nodes writing lines as fast as they can, all at
# once: does barge's relay keep every line of every node, and what
# aggregate rate does it reach?
#
#   bench/logs-fanin.sh [HOSTS] [NODES_PER_HOST] [LINES] [RUNS]
#                       (default 16 4 100000 1; needs root)
#
# A job of HOSTS bed hosts (tests/bed/bed.sh, h1..hN) with NODES_PER_HOST
# containers on each: HOSTS x NODES_PER_HOST nodes. Every node prints LINES
# numbered lines of 100 bytes ("RRRR NNNNNNNN xxx...", its rank, the line's
# number, padding) as fast as busybox awk can, then marks itself done in a
# directory all bed hosts share (/var/tmp, bind-mounted); the head (rank 0)
# exits once every node is done, so the job ends only after the last line
# was written.
# Checked after each run, for every node's kept log: exactly LINES stdout
# lines, numbered 1..LINES in order, and the MD5 of its stdout text equal to
# that of the same generator run here (nothing lost, repeated or altered).
# Prints barge's wall time, the aggregate rate over the whole job
# (bytes / wall) and over the span the kept stamps cover (first line to
# last line, any node), and the reference: the same containers run attached
# by pdsh over ssh (`docker run --rm` per node, output to /dev/null), with
# barge's wall time relative to it.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
HOSTS=${1:-16}
PER=${2:-4}
LINES=${3:-100000}
RUNS=${4:-1}
NODES=$((HOSTS * PER))
BARGE=${BARGE:-$ROOT/build/runner/barge}
[[ -x "$BARGE" ]] || { echo "bench: build barge first ($BARGE)" >&2; exit 1; }
command -v pdsh >/dev/null || { echo "bench: apt-get install pdsh" >&2; exit 1; }

export BARGE_BED_HOSTS=$HOSTS
"$ROOT/tests/bed/bed.sh" up >&2
# shellcheck disable=SC1091
. "${BARGE_BED_DIR:-/tmp/barge-bed}/bed.env"
WORK=$(mktemp -d)
DONE=$(mktemp -d /var/tmp/barge-fanin.XXXXXX)
trap 'rm -rf "$WORK" "$DONE"' EXIT
export BARGE_HOME=$WORK/home
addr() { local v="BED_HOST_h$1_ADDR"; echo "${!v}"; }

# 100 bytes a line: 4 digits of rank, a space, 8 digits, a space, 85 letters,
# a newline. $R is the node's rank.
GEN="awk -v r=\$R 'BEGIN { p = sprintf(\"%85s\", \"\"); gsub(/ /, \"x\", p); for (i = 1; i <= $LINES; i++) printf \"%04d %08d %s\\n\", r, i, p }'"
# Every node: its lines, then its mark; the head then waits for all marks
# (10 minutes at most, then exit 3: the bench reports the failure).
NODE_CMD="R=\$BARGE_NODE_RANK; $GEN; touch /done/\$R; [ \$R = 0 ] || exit 0; i=0; while [ \$(ls /done | wc -l) -lt $NODES ]; do i=\$((i+1)); [ \$i -lt 6000 ] || exit 3; sleep 0.1; done"

cat >"$WORK/job.yaml" <<EOF
name: fanin
image: $BED_IMAGE
hosts:
$(for i in $(seq 1 "$HOSTS"); do echo "  - {address: $(addr "$i"), nodes: $PER}"; done)
ssh: {user: $BED_SSH_USER, identity_file: $BED_SSH_KEY, known_hosts: $BED_KNOWN_HOSTS}
container: {volumes: ["$DONE:/done"]}
stop_grace: 2s
timeout: 15m
command: ["sh", "-c", $(printf '%s' "$NODE_CMD" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read()))')]
EOF

now() { date +%s.%N; }
since() { awk -v a="$(now)" -v b="$1" 'BEGIN {printf "%.3f\n", a - b}'; }

# Every node's kept log: count, order, checksum; prints "SPAN_SECONDS" (first
# stamp to last stamp over all nodes).
check_logs() {
  python3 - "$1" "$NODES" "$LINES" <<'PY'
import datetime, glob, hashlib, os, sys
run, nodes, lines = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
pad = "x" * 85
def stamp(s):
    # RFC 3339 with up to 9 fraction digits: seconds since the epoch.
    head, _, frac = s.rstrip("Z").partition(".")
    t = datetime.datetime.strptime(head, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.timezone.utc)
    return t.timestamp() + (float("0." + frac) if frac else 0.0)
first = last = None
bad = 0
for rank in range(nodes):
    files = glob.glob(os.path.join(run, f"{rank}-*.log"))
    if len(files) != 1:
        print(f"bench: node {rank}: {len(files)} kept log files", file=sys.stderr); bad += 1; continue
    got, want = hashlib.md5(), hashlib.md5()
    for i in range(1, lines + 1):
        want.update(f"{rank:04d} {i:08d} {pad}\n".encode())
    k = 0
    with open(files[0], encoding="utf-8", errors="replace") as f:
        for line in f:
            s, _, rest = line.partition(" ")
            stream, _, text = rest.partition(" ")
            if stream != "stdout":
                continue
            k += 1
            if k == 1 or k == lines:
                t = stamp(s)
                first = t if first is None or t < first else first
                last = t if last is None or t > last else last
            fields = text.split(" ")
            if len(fields) != 3 or fields[0] != f"{rank:04d}" or int(fields[1]) != k:
                if bad < 5:
                    print(f"bench: node {rank}: stdout line {k} is {text[:30]!r}", file=sys.stderr)
                bad += 1
                break
            got.update(text.encode())
    if k != lines:
        print(f"bench: node {rank}: {k} stdout lines, not {lines}", file=sys.stderr); bad += 1
    elif got.hexdigest() != want.hexdigest():
        print(f"bench: node {rank}: MD5 {got.hexdigest()}, not {want.hexdigest()}", file=sys.stderr); bad += 1
if bad:
    sys.exit(1)
print(f"{last - first:.3f}")
PY
}

run_barge() {  # prints "WALL SPAN"
  rm -f "$DONE"/*
  local t0 wall; t0=$(now)
  "$BARGE" run "$WORK/job.yaml" >/dev/null 2>"$WORK/barge.err" || { tail -n 20 "$WORK/barge.err" >&2; return 1; }
  wall=$(since "$t0")
  local run; run=$(ls -td "$BARGE_HOME"/runs/*/ | head -1)
  echo "$wall $(check_logs "$run")"
  rm -rf "$BARGE_HOME/runs"
}

run_pdsh() {  # prints WALL: every node's container attached over ssh, output dropped
  local all="" t0
  for i in $(seq 1 "$HOSTS"); do all+="${all:+,}$(addr "$i")"; done
  export PDSH_RCMD_TYPE=ssh PDSH_SSH_ARGS_APPEND="-i $BED_SSH_KEY -o UserKnownHostsFile=$BED_KNOWN_HOSTS -o StrictHostKeyChecking=yes -o BatchMode=yes"
  # A bed host's hostname is hN: node k of host N gets rank (N-1)*PER+k.
  local gen; gen=$(printf '%q' "$GEN")
  t0=$(now)
  pdsh -f "$HOSTS" -l "$BED_SSH_USER" -w "$all" \
    "n=\$(hostname | tr -dc 0-9); for k in \$(seq 0 $((PER - 1))); do docker run --rm -e R=\$(((n - 1) * $PER + k)) $BED_IMAGE sh -c $gen & done; wait" >/dev/null
  since "$t0"
}

median() { sort -n | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.2f", m}'; }

: >"$WORK/b"; : >"$WORK/s"
for _ in $(seq 1 "$RUNS"); do  # interleaved, so drift hits both alike
  run_barge >>"$WORK/b"
  run_pdsh >>"$WORK/s"
done
bw=$(cut -d' ' -f1 "$WORK/b" | median); bs=$(cut -d' ' -f2 "$WORK/b" | median); sw=$(median <"$WORK/s")
mb=$(awk -v n="$LINES" -v k="$NODES" 'BEGIN {printf "%.1f", n * k * 100 / 1e6}')
echo "# $(date -u +%Y-%m-%d) $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg) after; $RUNS run(s) each, medians"
echo "# $NODES nodes ($HOSTS bed hosts x $PER), each $LINES lines of 100 bytes: $mb MB in all"
echo "# every node's kept log checked: $LINES stdout lines in order, MD5 as generated (all passed)"
printf "%-40s %8s %8s\n" "" "s" "MB/s"
printf "%-40s %8s %8s\n" "pdsh + attached docker run (reference)" "$sw" "$(awk -v m="$mb" -v t="$sw" 'BEGIN {printf "%.1f", m / t}')"
printf "%-40s %8s %8s\n" "barge job, wall (launch to teardown)" "$bw" "$(awk -v m="$mb" -v t="$bw" 'BEGIN {printf "%.1f", m / t}')"
printf "%-40s %8s %8s\n" "barge, first to last kept line" "$bs" "$(awk -v m="$mb" -v t="$bs" 'BEGIN {printf "%.1f", m / t}')"
echo "barge wall / reference: $(awk -v a="$bw" -v b="$sw" 'BEGIN {printf "%.2f", a / b}')"
