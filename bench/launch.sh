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
# Prints, per size, the median wall time of each and the ratio barge / pdsh,
# and the median machine CPU seconds of each (busy time of all CPUs from
# /proc/stat over the run: the controller, every host's sshd, dockerd and
# containers; all bed hosts share this machine's cores) and their ratio,
# and barge's peak RSS (the largest of the runs, /usr/bin/time); then the
# teardown of each: barge's from its first stop to its last removal (job
# store), the script's stop-and-rm step (median seconds).
# Then barge's per-phase profile for the last run at each size: each phase's
# span from its first host's start to its last host's end, from the job
# store (sqlite3 CLI).
# Brings the bed up with the largest size's hosts (tests/bed/bed.sh; it
# replaces a bed that is up) and takes it down at the end. Run it on a quiet
# machine: other work counts in the CPU seconds.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RUNS=${1:-5}
SIZES=${BENCH_SIZES:-"1 4 16"}
BARGE=${BARGE:-$ROOT/build/runner/barge}
MAX=0; for n in $SIZES; do (( n > MAX )) && MAX=$n; done
[[ -x "$BARGE" ]] || { echo "bench: build barge first ($BARGE)" >&2; exit 1; }
command -v pdsh >/dev/null || { echo "bench: pdsh is missing (apt-get install pdsh)" >&2; exit 1; }
command -v sqlite3 >/dev/null || { echo "bench: sqlite3 is missing (apt-get install sqlite3)" >&2; exit 1; }
[[ -x /usr/bin/time ]] || { echo "bench: /usr/bin/time is missing (apt-get install time)" >&2; exit 1; }

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
# Busy jiffies of all CPUs (user nice system irq softirq steal).
busy() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8 + $9; exit}' /proc/stat; }
HZ=$(getconf CLK_TCK)
# "WALL CPU" of the run that began at wall $1, busy $2.
spent() { awk -v a="$(now)" -v b="$1" -v c="$(busy)" -v d="$2" -v hz="$HZ" 'BEGIN {printf "%.3f %.2f\n", a - b, (c - d) / hz}'; }

run_barge() {  # $1 = hosts; prints "WALL CPU RSS_MB"
  local f; f=$(job_file "$1")
  local t0 c0; t0=$(now); c0=$(busy)
  /usr/bin/time -f %M -o "$WORK/rss" "$BARGE" run "$f" >/dev/null 2>"$WORK/barge.err" ||
    { cat "$WORK/barge.err" >&2; return 1; }
  echo "$(spent "$t0" "$c0") $(awk '{printf "%.1f", $1 / 1024}' "$WORK/rss") $(teardown)"
}

# barge's teardown in its last job: from the first stop (or removal) to the
# last removal, i.e. from the head's exit to every container gone.
teardown() {
  sqlite3 "$BARGE_HOME/barge.db" "
    WITH j AS (SELECT id FROM jobs ORDER BY created_ms DESC LIMIT 1)
    SELECT printf('%.2f', (MAX(CASE WHEN p.phase = 'remove' THEN p.ended_ms END) -
                           MIN(CASE WHEN p.phase IN ('stop', 'remove') THEN p.began_ms END)) / 1000.0)
    FROM phases p JOIN j ON p.job_id = j.id"
}

# The phases of barge's last job: "phase first-start..last-end span".
profile() {
  sqlite3 -separator ' ' "$BARGE_HOME/barge.db" "
    WITH j AS (SELECT id, created_ms FROM jobs ORDER BY created_ms DESC LIMIT 1)
    SELECT p.phase, printf('%.2f', (MIN(p.began_ms) - j.created_ms) / 1000.0),
           printf('%.2f', (MAX(p.ended_ms) - MIN(p.began_ms)) / 1000.0)
    FROM phases p JOIN j ON p.job_id = j.id GROUP BY p.phase ORDER BY MIN(p.began_ms)" |
    awk '{printf "  %-10s starts at %5.2f s, spans %5.2f s\n", $1, $2, $3}'
}

run_pdsh() {  # $1 = hosts
  local n=$1 head workers="" all id
  head=$(addr 1)
  for i in $(seq 2 "$n"); do workers+="${workers:+,}$(addr "$i")"; done
  all=$head${workers:+,$workers}
  id=$RANDOM$RANDOM
  export PDSH_RCMD_TYPE=ssh PDSH_SSH_ARGS_APPEND="-i $BED_SSH_KEY -o UserKnownHostsFile=$BED_KNOWN_HOSTS -o StrictHostKeyChecking=yes -o BatchMode=yes"
  local t0 c0; t0=$(now); c0=$(busy)
  pdsh -l "$BED_SSH_USER" -w "$head" "docker run -d --name pdsh-$id --label barge.job=pdsh-$id --network host $BED_IMAGE sh -c '$(head_cmd "$workers")'" >/dev/null
  if [[ -n "$workers" ]]; then
    pdsh -l "$BED_SSH_USER" -w "$workers" "docker run -d --name pdsh-$id --label barge.job=pdsh-$id --network host $BED_IMAGE sh -c \"$(worker_cmd)\"" >/dev/null
  fi
  pdsh -l "$BED_SSH_USER" -w "$head" "docker wait pdsh-$id" >/dev/null
  local t1; t1=$(now)
  pdsh -l "$BED_SSH_USER" -w "$all" "docker stop -t 2 pdsh-$id >/dev/null; docker rm -f pdsh-$id" >/dev/null
  echo "$(spent "$t0" "$c0") $(awk -v a="$(now)" -v b="$t1" 'BEGIN {printf "%.2f", a - b}')"
}

median() { sort -n | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.2f", m}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }

echo "# $(date -u +%Y-%m-%d) $(nproc) cores, $RUNS runs per tool and size, medians"
printf "%-6s %-10s %-10s %-11s %-10s %-10s %-10s %-13s %-16s %s\n" hosts "barge s" "pdsh s" "wall ratio" "barge cpu" "pdsh cpu" "cpu ratio" "barge rss MB" "barge teardown" "pdsh stop+rm s"
profiles=""
for n in $SIZES; do
  : >"$WORK/b" ; : >"$WORK/p"
  run_barge "$n" >/dev/null; run_pdsh "$n" >/dev/null  # warm-up
  for _ in $(seq 1 "$RUNS"); do  # interleaved, so drift hits both alike
    run_barge "$n" >>"$WORK/b"
    run_pdsh "$n" >>"$WORK/p"
  done
  profiles+="barge's phases, last run on $n host(s):"$'\n'"$(profile)"$'\n'
  bw=$(cut -d' ' -f1 "$WORK/b" | median); pw=$(cut -d' ' -f1 "$WORK/p" | median)
  bc=$(cut -d' ' -f2 "$WORK/b" | median); pc=$(cut -d' ' -f2 "$WORK/p" | median)
  br=$(cut -d' ' -f3 "$WORK/b" | sort -n | tail -1)
  bt=$(cut -d' ' -f4 "$WORK/b" | median); pt=$(cut -d' ' -f3 "$WORK/p" | median)
  printf "%-6s %-10s %-10s %-11s %-10s %-10s %-10s %-13s %-16s %s\n" "$n" "$bw" "$pw" "$(ratio "$bw" "$pw")" "$bc" "$pc" "$(ratio "$bc" "$pc")" "$br" "$bt" "$pt"
done
printf "%s" "$profiles"
