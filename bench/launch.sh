#!/usr/bin/env bash
# bench/launch.sh: how long a whole head/worker job takes with barge, against
# a pdsh script doing the same docker runs, waits and removals, on 1, 4 and
# 16 test-bed hosts (each a network namespace with its own sshd and dockerd).
#
#   bench/launch.sh [RUNS]      (default 5 runs per tool and size; needs root)
#
# The job: the head (rank 0) listens on a port and exits once every worker
# has connected to it; each worker connects, then waits to be stopped. So the
# job ends as soon as all workers are up. barge does its usual work besides:
# preflight (docker version, image inspect), log streaming, stop and rm.
# The pdsh script, as one would write it: run the head; run the workers;
# wait for the head; stop and remove everything; each step a new pdsh call,
# i.e. a new SSH login per host per step.
#
# Prints the median wall time of each and the ratio barge / pdsh per size.
# Brings the bed up with 16 hosts (tests/bed/bed.sh; it replaces a bed that
# is up) and takes it down at the end.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RUNS=${1:-5}
SIZES=${BENCH_SIZES:-"1 4 16"}
BARGE=${BARGE:-$ROOT/build/runner/barge}
MAX=0; for n in $SIZES; do (( n > MAX )) && MAX=$n; done
[[ -x "$BARGE" ]] || { echo "bench: build barge first ($BARGE)" >&2; exit 1; }
command -v pdsh >/dev/null || { echo "bench: pdsh is missing (apt-get install pdsh)" >&2; exit 1; }

export BARGE_BED_HOSTS=$MAX
"$ROOT/tests/bed/bed.sh" up >&2
trap '"$ROOT/tests/bed/bed.sh" down >&2 || true' EXIT
# shellcheck disable=SC1091
. "${BARGE_BED_DIR:-/tmp/barge-bed}/bed.env"
WORK=$(mktemp -d)
trap '"$ROOT/tests/bed/bed.sh" down >&2 || true; rm -rf "$WORK"' EXIT
export BARGE_HOME=$WORK/home
PORT=29500

addr() { local v="BED_HOST_h$1_ADDR"; echo "${!v}"; }

# The head connects once to every worker's port (each worker listens for one
# connection); so it exits once all workers are up. (The other way round,
# one listener on the head accepting N connections in turn, loses a
# connection that lands between two accepts.)
head_cmd() {  # $1 = comma-separated worker addresses
  echo "L=$1; IFS=,; for ip in \$L; do until nc \$ip $PORT </dev/null >/dev/null 2>&1; do sleep 0.05; done; done"
}
worker_cmd() {
  echo "nc -l -p $PORT </dev/null >/dev/null; trap 'exit 0' TERM; sleep 600 & wait"
}
workers_of() {  # $1 = hosts: the worker addresses, comma-separated
  local w=""
  for i in $(seq 2 "$1"); do w+="${w:+,}$(addr "$i")"; done
  echo "$w"
}

job_file() {  # $1 = hosts
  local n=$1 f=$WORK/job-$1.yaml
  {
    echo "name: bench$n"
    echo "image: $BED_IMAGE"
    echo "hosts:"
    for i in $(seq 1 "$n"); do echo "  - address: $(addr "$i")"; done
    echo "ssh: {user: $BED_SSH_USER, identity_file: $BED_SSH_KEY, known_hosts: $BED_KNOWN_HOSTS}"
    echo "container: {network: host}"
    echo "stop_grace: 2s"
    echo "roles:"
    echo "  head: {command: [sh, -c, \"$(head_cmd "$(workers_of "$n")")\"]}"
    echo "  worker: {command: [sh, -c, \"$(worker_cmd)\"]}"
  } >"$f"
  echo "$f"
}

now() { date +%s.%N; }

run_barge() {  # $1 = hosts
  local f; f=$(job_file "$1")
  local t0; t0=$(now)
  "$BARGE" run "$f" >/dev/null 2>"$WORK/barge.err" || { cat "$WORK/barge.err" >&2; return 1; }
  awk -v a="$(now)" -v b="$t0" 'BEGIN {printf "%.3f\n", a - b}'
}

run_pdsh() {  # $1 = hosts
  local n=$1 head workers="" all id
  head=$(addr 1)
  for i in $(seq 2 "$n"); do workers+="${workers:+,}$(addr "$i")"; done
  all=$head${workers:+,$workers}
  id=$RANDOM$RANDOM
  export PDSH_RCMD_TYPE=ssh PDSH_SSH_ARGS_APPEND="-i $BED_SSH_KEY -o UserKnownHostsFile=$BED_KNOWN_HOSTS -o StrictHostKeyChecking=yes -o BatchMode=yes"
  local t0; t0=$(now)
  pdsh -l "$BED_SSH_USER" -w "$head" "docker run -d --name pdsh-$id --label barge.job=pdsh-$id --network host $BED_IMAGE sh -c '$(head_cmd "$workers")'" >/dev/null
  if [[ -n "$workers" ]]; then
    pdsh -l "$BED_SSH_USER" -w "$workers" "docker run -d --name pdsh-$id --label barge.job=pdsh-$id --network host $BED_IMAGE sh -c \"$(worker_cmd)\"" >/dev/null
  fi
  pdsh -l "$BED_SSH_USER" -w "$head" "docker wait pdsh-$id" >/dev/null
  pdsh -l "$BED_SSH_USER" -w "$all" "docker stop -t 2 pdsh-$id >/dev/null; docker rm -f pdsh-$id" >/dev/null
  awk -v a="$(now)" -v b="$t0" 'BEGIN {printf "%.3f\n", a - b}'
}

median() { sort -n | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.2f", m}'; }

printf "%-6s %-14s %-14s %s\n" hosts "barge (s)" "pdsh (s)" "barge/pdsh"
for n in $SIZES; do
  : >"$WORK/b" ; : >"$WORK/p"
  run_barge "$n" >/dev/null; run_pdsh "$n" >/dev/null  # warm-up
  for _ in $(seq 1 "$RUNS"); do  # interleaved, so drift hits both alike
    run_barge "$n" >>"$WORK/b"
    run_pdsh "$n" >>"$WORK/p"
  done
  b=$(median <"$WORK/b"); p=$(median <"$WORK/p")
  printf "%-6s %-14s %-14s %.2f\n" "$n" "$b" "$p" "$(awk -v a="$b" -v b="$p" 'BEGIN {print a / b}')"
done
