#!/usr/bin/env bash
# bench/scale.sh: barge's controller at 16 to 1,000 hosts, on EMULATED hosts
# and an EMULATED engine (bench/emu: one sshd, the hosts are loopback
# addresses 127.1.x.y with a /tmp each, and bench/emu/fake-docker stands in
# for Docker). It measures the controller, not Docker and not real networks.
#
#   bench/scale.sh [N...]        (default: 250 1000; e.g. 16 64 250 1000; root)
#   BENCH_ENGINE=api bench/scale.sh [N...]
#
# BENCH_ENGINE=cli (the default): barge's job names fake-docker as its
# docker_command:, so barge drives every host through the Docker CLI (a
# process per engine call on the host). BENCH_ENGINE=api: the emulation is
# up with --api (bench/emu/fake-engine.py serves an emulated Engine API on
# a socket per host) and barge's job has plain `docker`, so barge takes its
# main path, the Engine API over its SSH session; the pdsh script still
# calls fake-docker (that is what a script does). Engine calls per host
# then count the API's requests too ("api:create", ...), and the hosts'
# CPU includes the API server's own (not its containers' `sleep`s).
#
# The job: a head (rank 0) and N-1 workers, one per host, no readiness probe;
# the head (a fake `emu-barrier`) ends once all N nodes run, so the job ends
# as soon as every node is up; barge then stops and removes everything. The
# reference is a pdsh script doing the same steps through the same fake
# engine (run the head; run the workers; wait for the head; stop and rm
# everywhere; each step a pdsh -R ssh -f 32 call, i.e. a login per host per
# step).
#
# Per size: wall time of the whole job; time from start until all nodes run;
# p50/p99 of the per-host start latency (start -> that host's `run -d`, or
# its API start, from the fake engine's own timestamps); teardown (head ended -> barge exited);
# barge's CPU seconds (user+system, /usr/bin/time) and per host; peak RSS;
# the most open file descriptors and threads seen (/proc, every 0.2 s; the
# threads also as last seen, after the connects' pool has ended); the
# pdsh script's wall and CPU. Per size also, for barge and the script: the
# engine calls per host (fake-docker counts each, by subcommand) and the
# hosts' CPU per host for the job's sessions. Then the cost of barge's
# watchdog per host (CPU of the hosts' watchdog loops over 20 s of a
# running job).
# Writes bench/results/scale-DATE.txt (scale-api-DATE.txt with
# BENCH_ENGINE=api; BENCH_OUT=DIR writes there instead) and .png (gnuplot);
# a failed run is a row too. `bench/scale.sh --plot TABLE.txt OUT.png` redraws a plot.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# Plots a table written by this script (its rows; FAILED rows as gaps).
plot() {  # $1 = table .txt, $2 = .png
  local data
  data=$(mktemp)
  awk '/^[0-9]/ && NF >= 13 {  # rows of the main table, not of the calls table
         if ($2 == "FAILED") print $1, "NaN", $12, "NaN", $13, "NaN";
         else print $1, $2, $12, $7, $13, $9 }' "$1" >"$data"
  gnuplot <<GP
set terminal pngcairo size 1100,420 font ",10"
set output "$2"
set multiplot layout 1,3 title "barge$(grep -q '^# Engine: barge through the EMULATED Engine API' "$1" && echo ' (Engine API)') and a pdsh script on EMULATED hosts and engine (bench/scale.sh): $(sed -n 's/^# bench.* -- //p' "$1" | head -1), $(nproc) shared cores"
set logscale x 2
set xtics (16, 64, 250, 1000)
set xlabel "hosts"
set key top left
set grid
set datafile missing "NaN"
set title "wall time of the whole job (s)"
plot "$data" u 1:2 w lp pt 7 t "barge", "$data" u 1:3 w lp pt 5 t "pdsh script"
set title "controller CPU, user+system (s)"
plot "$data" u 1:4 w lp pt 7 t "barge", "$data" u 1:5 w lp pt 5 t "pdsh script (pdsh + ssh)"
set title "barge peak RSS (MB)"
plot "$data" u 1:6 w lp pt 7 t "barge"
unset multiplot
GP
  rm -f "$data"
}

# bench/scale.sh --plot TABLE.txt OUT.png: redraws the plot of a table.
if [[ ${1:-} == --plot ]]; then plot "$2" "$3"; exit 0; fi
SIZES=${*:-250 1000}
BARGE=${BARGE:-$ROOT/build/runner/barge}
WATCH_HOSTS=${BENCH_WATCHDOG_HOSTS:-64}
OUT=${BENCH_OUT:-$ROOT/bench/results}
ENGINE=${BENCH_ENGINE:-cli}
case $ENGINE in cli) API= ;; api) API=--api ;; *) echo "bench: BENCH_ENGINE is cli or api, not '$ENGINE'" >&2; exit 2 ;; esac
[[ -x "$BARGE" ]] || { echo "bench: build barge first ($BARGE)" >&2; exit 1; }
# bench only: /usr/bin/time, gnuplot, pdsh
"$ROOT/scripts/install-deps.sh" time gnuplot-nox pdsh >&2
MAX=$WATCH_HOSTS; for n in $SIZES; do (( n > MAX )) && MAX=$n; done

EMU=$ROOT/bench/emu/emu.sh
WORK=$(mktemp -d)
trap '"$EMU" down >&2 || true; rm -rf "$WORK"' EXIT
"$EMU" up "$MAX" $API >&2
# shellcheck disable=SC1091
. "${BARGE_EMU_DIR:-/var/tmp/barge-emu}/emu.env"
export BARGE_HOME=$WORK/home

now() { date +%s.%N; }

# Samples /proc/$1 until it ends: prints "max_fds max_threads max_hwm_kb
# last_threads" (the last sample is after the connects' thread pool ended).
sample() {
  local pid=$1 fds=0 thr=0 hwm=0 f t h last=0
  while [[ -d /proc/$pid ]]; do
    f=$(find "/proc/$pid/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)
    t=$(awk '/^Threads:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
    h=$(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
    (( f > fds )) && fds=$f; (( ${t:-0} > thr )) && thr=$t; (( ${h:-0} > hwm )) && hwm=$h
    [[ -n $t && $t != 0 ]] && last=$t
    sleep 0.2
  done
  echo "$fds $thr $hwm $last"
}

# p-th percentile (nearest rank) of the numbers on stdin.
pct() { sort -n | awk -v p="$1" '{a[NR]=$1} END {i=int((p/100)*NR+0.999999); if (i<1) i=1; printf "%.2f", a[i]}'; }

# Checks that the emulation holds nothing of job $1: no per-host job
# directory, no fake container, no watchdog.
leftovers() {
  local n
  n=$(find "$EMU_DIR/hosts" -mindepth 1 -maxdepth 1 -name 'barge-*' 2>/dev/null | wc -l)
  n=$((n + $(find "$EMU_DIR/hosts" -mindepth 2 -maxdepth 2 -path '*/fake-docker/*' | wc -l)))
  n=$((n + $(grep -l "[b]arge-watchdog-$1" /proc/[0-9]*/cmdline 2>/dev/null | wc -l)))
  echo "$n"
}

run_barge() {  # $1 = hosts; prints one row of numbers
  local n=$1 f=$WORK/job-$1.yaml t0 t1 pid bpid s id
  "$EMU" job "$n" "$f"
  t0=$(now)
  /usr/bin/time -f "%e %U %S %M" -o "$WORK/time" "$BARGE" run "$f" >"$WORK/out" 2>"$WORK/err" &
  pid=$!
  bpid=
  for _ in $(seq 100); do bpid=$(pgrep -P "$pid" || true); [[ -n $bpid ]] && break; sleep 0.01; done
  s=$(sample "$bpid")
  local rc=0
  wait "$pid" || rc=$?
  t1=$(now)
  id=$(sed -n 's/^barge: job \([0-9a-f]*\) .*/\1/p' "$WORK/err" | head -1)
  if ((rc != 0)); then
    # A failure is a result too: the row says so, with barge's last words.
    echo "bench: barge failed (exit $rc) at $n hosts:" >&2
    grep -v '^\[' "$WORK/err" | tail -8 >&2
    # (time's first line says "Command terminated by signal N" after a crash)
    read -r e u sy m < <(tail -1 "$WORK/time") || true
    grep -q "terminated by signal" "$WORK/time" && echo "# $n hosts, barge: $(head -1 "$WORK/time")" >>"$WORK/why.sig"
    read -r fds thr hwm lastthr <<<"$s"
    echo "$n FAILED $(awk -v a="$t1" -v b="$t0" 'BEGIN {printf "%.2f", a - b}') $(awk -v a="$u" -v b="$sy" 'BEGIN {print a + b}') $(( (m > hwm ? m : hwm) / 1024 )) $fds $thr/$lastthr $(leftovers "${id:-none}")"
    grep -v '^\[' "$WORK/err" | tail -3 | sed "s/^/# $n hosts, barge: /" >"$WORK/why"
    [[ ! -f $WORK/why.sig ]] || cat "$WORK/why.sig" >>"$WORK/why"
    return 0
  fi
  local starts=$EMU_DIR/started/$id
  [[ $(find "$starts" -type f | wc -l) -eq $n ]] || { echo "bench: not all $n nodes started" >&2; return 1; }
  local lat; lat=$(cat "$starts"/* | awk -v t0="$t0" '{printf "%.3f\n", $1 - t0}')
  local ended; ended=$(cat "$EMU_DIR/ended/$id")
  local left; left=$(leftovers "$id")
  [[ $left -eq 0 ]] || echo "bench: $left things of job $id left on the emulated hosts" >&2
  read -r e u sy m < <(tail -1 "$WORK/time")
  read -r fds thr hwm lastthr <<<"$s"
  awk -v n="$n" -v w="$(awk -v a="$t1" -v b="$t0" 'BEGIN {print a - b}')" \
      -v all="$(printf '%s\n' "$lat" | sort -n | tail -1)" -v p50="$(printf '%s\n' "$lat" | pct 50)" \
      -v p99="$(printf '%s\n' "$lat" | pct 99)" -v td="$(awk -v a="$t1" -v b="$ended" 'BEGIN {print a - b}')" \
      -v cpu="$(awk -v a="$u" -v b="$sy" 'BEGIN {print a + b}')" -v rss="$m" -v hwm="$hwm" -v fds="$fds" -v thr="$thr" -v lt="$lastthr" \
      -v left="$left" \
      'BEGIN {printf "%d %.2f %.2f %.2f %.2f %.2f %.2f %.0f %.1f %d %d/%d %d\n", n, w, all, p50, p99, td, cpu,
              1000 * cpu / n, (rss > hwm ? rss : hwm) / 1024, fds, thr, lt, left}'
}

run_pdsh() {  # $1 = hosts; prints "wall cpu peak_rss_mb"
  local n=$1 id=pdsh$RANDOM$RANDOM head workers all
  head=$(sed -n 1p "$EMU_ADDRS")
  workers=$(sed -n "2,${n}p" "$EMU_ADDRS" | paste -sd, -)
  all=$head${workers:+,$workers}
  cat >"$WORK/pdsh.sh" <<SCRIPT
set -e
export PDSH_RCMD_TYPE=ssh
export PDSH_SSH_ARGS_APPEND="-p $EMU_PORT -i $EMU_KEY -o UserKnownHostsFile=$EMU_KNOWN_HOSTS -o StrictHostKeyChecking=yes -o BatchMode=yes"
D=$EMU_DOCKER
pdsh -f 32 -l root -w "$head" "\$D run -d --name $id --label barge.job=$id emu/none:latest emu-barrier $n" >/dev/null
[ -z "$workers" ] || pdsh -f 32 -l root -w "$workers" "\$D run -d --name $id --label barge.job=$id emu/none:latest sleep 100000" >/dev/null
pdsh -f 32 -l root -w "$head" "\$D wait $id" >/dev/null
pdsh -f 32 -l root -w "$all" "\$D stop -t 2 $id >/dev/null; \$D rm -f $id" >/dev/null
SCRIPT
  local t0 t1
  t0=$(now)
  /usr/bin/time -f "%e %U %S %M" -o "$WORK/ptime" bash "$WORK/pdsh.sh" 2>"$WORK/perr" ||
    { echo "bench: the pdsh script failed at $n hosts:" >&2; tail -5 "$WORK/perr" >&2; return 1; }
  t1=$(now)
  read -r e u sy m <"$WORK/ptime"
  [[ $(find "$EMU_DIR/started/$id" -type f | wc -l) -eq $n ]] || echo "bench: pdsh did not start all $n nodes" >&2
  awk -v w="$(awk -v a="$t1" -v b="$t0" 'BEGIN {print a - b}')" -v u="$u" -v s="$sy" \
      'BEGIN {printf "%.2f %.2f\n", w, u + s}'
}

# The engine calls of one job: forgets those counted so far.
calls_reset() { find "$EMU_DIR/hosts" -mindepth 1 -maxdepth 2 -name fake-docker.calls -delete; }
# The engine calls counted since calls_reset, per host of $1: "TOTAL
# sub1 n1, sub2 n2, ..." (means per host, by subcommand, most first).
calls_per_host() {
  cat "$EMU_DIR"/hosts/*/fake-docker.calls 2>/dev/null | sort | uniq -c | sort -rn |
    awk -v n="$1" '{t += $1; s = s sprintf("%s%s %.2f", NR > 1 ? ", " : "", $2, $1 / n)} END {printf "%.2f %s\n", t / n, s}'
}
# CPU the emulated hosts spent on the sessions that ended (sshd's reaped
# children: the sessions, their shells, the engine's calls; not a detached
# watchdog), in ms, once no session is left (at most 20 s).
# With the Engine API, plus the API server's own CPU (utime+stime: not its
# reaped containers' processes, which fake-docker's `sleep`s are not either).
host_cpu_ms() {
  local sshd engine=0; sshd=$(cat "$EMU_DIR/sshd.pid")
  for _ in $(seq 200); do [[ -z $(pgrep -P "$sshd") ]] && break; sleep 0.1; done
  if [[ -n $API ]]; then
    engine=$(sed 's/.*) //' "/proc/$(cat "$EMU_DIR/engine.ready")/stat" | awk '{print $12 + $13}')
  fi
  sed 's/.*) //' "/proc/$sshd/stat" | awk -v hz="$(getconf CLK_TCK)" -v e="$engine" '{printf "%.0f\n", 1000 * ($14 + $15 + e) / hz}'
}

# CPU of the watchdog loops on $1 hosts over 20 s of a running job, per host.
watchdog_cost() {
  local n=$1 f=$WORK/job-wd.yaml pid id pids a b
  "$EMU" job "$n" "$f" 100000
  sed -i 's/emu-barrier, "[0-9]*"/sleep, "60"/' "$f"
  "$BARGE" run "$f" >/dev/null 2>"$WORK/wderr" &
  pid=$!
  for _ in $(seq 600); do
    id=$(sed -n 's/^barge: job \([0-9a-f]*\) .*/\1/p' "$WORK/wderr" | head -1)
    [[ -n $id && -d $EMU_DIR/started/$id && $(find "$EMU_DIR/started/$id" -type f | wc -l) -eq $n ]] && break
    sleep 0.1
  done
  jiffies() {  # utime+stime+cutime+cstime of every watchdog of job $id
    grep -l "[b]arge-watchdog-$id" /proc/[0-9]*/cmdline 2>/dev/null | sed 's|/cmdline$|/stat|' |
      xargs -r cat 2>/dev/null | sed 's/.*) //' | awk '{s += $12 + $13 + $14 + $15} END {print s + 0}'
  }
  pids=$(grep -l "[b]arge-watchdog-$id" /proc/[0-9]*/cmdline 2>/dev/null | wc -l)
  a=$(jiffies); sleep 20; b=$(jiffies)
  kill -INT "$pid"; wait "$pid" || true
  # ms of CPU per second per host (= thousandths of a core)
  awk -v a="$a" -v b="$b" -v n="$n" -v hz="$(getconf CLK_TCK)" -v w="$pids" \
      'BEGIN {printf "%d watchdogs on %d hosts: %.2f ms of CPU per second per host (%.3f%% of a core)\n", w, n, 1000 * (b - a) / hz / 20 / n, 100 * (b - a) / hz / 20 / n}'
}

mkdir -p "$OUT"
stamp=$(date -u +%Y-%m-%d)
txt=$OUT/scale${API:+-api}-$stamp.txt
{
  echo "# bench/scale.sh $SIZES -- $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "# EMULATED hosts and engine (bench/emu): one sshd, hosts = loopback addresses, fake-docker as the engine."
  if [[ -n $API ]]; then
    echo "# Engine: barge through the EMULATED Engine API (bench/emu/fake-engine.py, one socket per host, over its SSH session); the pdsh script through fake-docker."
  fi
  echo "# It measures barge's controller, not Docker. Machine: $(nproc) cores ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(. /etc/os-release; echo "$PRETTY_NAME"), kernel $(uname -r); shared with other work."
  echo "# barge: $($BARGE version), ssh.parallel_connects default; pdsh -R ssh -f 32; times in s, CPU = user+system, RSS = peak."
} | tee "$txt"
printf "%-6s %-8s %-9s %-7s %-7s %-9s %-8s %-9s %-8s %-5s %-7s %-9s %-8s %s\n" hosts "wall" "all-run" "p50" "p99" \
  "teardown" "CPU" "CPU/host" "RSS(MB)" "fds" "thr:max/end" "pdsh" "pdshCPU" "barge/pdsh" | tee -a "$txt"
calls_txt=$WORK/calls.txt
for n in $SIZES; do
  calls_reset; c0=$(host_cpu_ms)
  b=$(run_barge "$n")
  c1=$(host_cpu_ms); bcalls=$(calls_per_host "$n"); calls_reset
  p=$(run_pdsh "$n")
  c2=$(host_cpu_ms); pcalls=$(calls_per_host "$n")
  printf "%-6s %-12s %-12s %-14s %-14s\n" "$n" "${bcalls%% *}" "${pcalls%% *}" \
    "$(( (c1 - c0) / n ))ms" "$(( (c2 - c1) / n ))ms" >>"$calls_txt"
  echo "#   $n hosts, barge: ${bcalls#* }" >>"$calls_txt"
  echo "#   $n hosts, pdsh:  ${pcalls#* }" >>"$calls_txt"
  read -r pw pc <<<"$p"
  if [[ $b == *FAILED* ]]; then
    read -r _ _ w cpu rss fds thr left <<<"$b"
    printf "%-6s %-8s %-9s %-7s %-7s %-9s %-8s %-9s %-8s %-5s %-7s %-9s %-8s %s\n" "$n" "FAILED" "after" "${w}s" "-" "-" "$cpu" "-" "$rss" \
      "$fds" "$thr" "$pw" "$pc" "-" | tee -a "$txt"
    tee -a "$txt" <"$WORK/why"
    [[ $left -eq 0 ]] || echo "# $n hosts: $left leftovers on the emulated hosts" | tee -a "$txt"
    continue
  fi
  read -r _ w all p50 p99 td cpu cph rss fds thr left <<<"$b"
  printf "%-6s %-8s %-9s %-7s %-7s %-9s %-8s %-9s %-8s %-5s %-7s %-9s %-8s %.2f\n" "$n" "$w" "$all" "$p50" "$p99" \
    "$td" "$cpu" "${cph}ms" "$rss" "$fds" "$thr" "$pw" "$pc" "$(awk -v a="$w" -v b="$pw" 'BEGIN {print a / b}')" | tee -a "$txt"
  [[ $left -eq 0 ]] || echo "# $n hosts: $left leftovers on the emulated hosts" | tee -a "$txt"
done
{
  echo "# Per host per job: engine calls (fake-docker invocations; barge's preflight, holds, lease, tickets, run,"
  echo "# logs, wait, stop, rm; a detached watchdog's renewals included) and the hosts' CPU for the job's sessions"
  echo "# (sshd, shells, engine calls; not a detached watchdog's loop, measured below)."
  [[ -z $API ]] || echo "# Engine API requests count as calls too (api:WHAT), and the API server's CPU as the hosts'."
  printf "%-6s %-12s %-12s %-14s %-14s\n" hosts "calls:barge" "calls:pdsh" "hostCPU:barge" "hostCPU:pdsh"
  cat "$calls_txt"
} | tee -a "$txt"
echo "# watchdog: $(watchdog_cost "$WATCH_HOSTS")" | tee -a "$txt"

plot "$txt" "${txt%.txt}.png"
echo "bench: wrote $txt and ${txt%.txt}.png" >&2
