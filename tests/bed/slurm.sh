#!/usr/bin/env bash
# A real Slurm cluster (Debian's Slurm 22.05 and munge) on the test bed
# (tests/bed/bed.sh), which must be up.
#
#   tests/bed/slurm.sh up       clear anything stale, then bring the cluster up
#   tests/bed/slurm.sh down     stop it and remove what it made (safe to repeat,
#                               also after `bed.sh down` removed the bed)
#   tests/bed/slurm.sh status   print what is up; exit 0 only if all of it is
#   tests/bed/slurm.sh rebind   make each bed host's own dockerd the default
#                               engine inside that host again (after a test
#                               restarted a host's dockerd)
#
# The cluster is
#  - one munged in the root namespaces with a key of its own; socket, key,
#    pid, log and seed under /run/barge-bed/slurm/munge. Slurm finds it
#    through AuthInfo=socket=... (auth/munge and cred/munge both read it, so
#    slurmctld, slurmd, slurmstepd and every client command use it); the
#    socket is a path, so the hosts (other network namespaces, same /run)
#    reach it too;
#  - slurmctld in the root namespaces, SlurmctldHost=<short hostname>(<bed
#    gateway>), port $CTLD_PORT (a real Slurm uses 6817/6818: no clash);
#  - one slurmd in each bed host hN (its network, UTS and mount namespaces:
#    NodeName = hostname = hN, NodeAddr = its bed address), port $SLURMD_PORT,
#    each node with the CPU layout `slurmd -C` reports there and 2 GPUs
#    (GRES) backed by stand-in character devices under
#    /run/barge-bed/slurm/dev (no driver behind them: nothing opens them);
#  - one partition "gpu" (default) with every node; a jobcomp/filetxt file
#    (end states, also through `sacct --completion`); ended jobs stay in
#    `scontrol show job` for MinJobAge (600 s);
#  - inside every bed host, /run/docker.sock (the default engine of anything
#    started there: Slurm's job steps get the submitter's environment, not
#    sshd's DOCKER_HOST) bind-mounted to that host's own dockerd's socket;
#  - the bed's loopback sshd ("lo") already gives SLURM_CONF by SetEnv (bed.sh
#    writes it when it makes lo), so a client command run through ssh to lo
#    finds the cluster; this script never reloads that sshd.
# Configuration, state, spools, logs and the jobcomp file live under
# $BARGE_BED_DIR/slurm (every host sees it at the same path), munge, pid files
# and the stand-in devices under /run/barge-bed/slurm. `up` writes
# $BARGE_BED_DIR/slurm/slurm.env (KEY=VALUE, sourceable; SLURM_CONF=... is
# the one line a client needs), last: it exists only when the cluster is up.
#
# Clean-up touches only what this script made: processes named by its pid
# files or whose command line names its paths (munged, slurmctld, slurmd),
# the slurmstepds serving its slurmds and their job processes, its
# directories and its bind mounts in the bed hosts. Needs root.
set -euo pipefail

BED_LOG_NAME=slurm
# shellcheck source=tests/bed/lib.sh
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib.sh"
close_inherited_fds

BED=${BARGE_BED_DIR:-/tmp/barge-bed}
BED=${BED%/}
RUN=/run/barge-bed
SDIR=$BED/slurm               # conf, state, spools, logs, jobcomp, slurm.env
SRUN=$RUN/slurm               # munge, pid files, stand-in devices
MUNGE_DIR=$SRUN/munge
MUNGE_SOCKET=$MUNGE_DIR/munge.socket
CONF=$SDIR/slurm.conf
JOBCOMP=$SDIR/jobcomp.txt
CLUSTER=barge-bed
PARTITION=gpu
GPUS_PER_NODE=2
CTLD_PORT=${BARGE_SLURM_CTLD_PORT:-6917}
SLURMD_PORT=${BARGE_SLURM_SLURMD_PORT:-6918}
WAIT_S=${BARGE_SLURM_WAIT_SECONDS:-60}
# Not the bed's lock: bed.sh down calls `slurm.sh down` while holding that.
LOCK=/run/lock/barge-bed-slurm.lock
SELF=$(readlink -f "${BASH_SOURCE[0]}")
HERE=$(dirname "$SELF")
BEDSH=$HERE/bed.sh
# The client commands below (scontrol, sinfo) must talk to this cluster only.
export SLURM_CONF=$CONF
unset SLURM_JOB_ID SLURM_JOBID SLURM_CLUSTERS


need_root() {
  ((EUID == 0)) || die "the bed's Slurm cluster needs root (daemons as root, mounts in the bed hosts)"
}

take_lock() {
  mkdir -p "$(dirname "$LOCK")"
  exec 9>"$LOCK"
  flock -w 300 9 || die "another slurm.sh holds $LOCK"
}

env_get() { sed -n "s/^$1=//p" "$BED/bed.env" 2>/dev/null | head -n1 | tr -d '"'; }

# ---------------------------------------------------------------------------
# Clean-up

# The slurm.conf paths of clusters this script made: this bed's, and the one
# recorded by the last `up` (a bed with another BARGE_BED_DIR).
conf_paths() {
  echo "$CONF"
  local prev
  prev=$(cat "$SRUN/conf-path" 2>/dev/null || true)
  [[ -z "$prev" || "$prev" == "$CONF" ]] || echo "$prev"
}

# PIDs of this script's daemons: munged with a path under $SRUN on its
# command line, slurmctld/slurmd with one of conf_paths after -f, and pids in
# its pid files that are still such daemons; then the slurmstepds (and
# slurmctld's helper slurmscriptd) that keep one of its log files open (their
# command lines, "slurmstepd: [J.S]", name no path) and every descendant of
# those (the job processes).
own_pids() {
  local f p comm line conf
  local -a args confs
  local -A stepd=() # slurmstepds and slurmctld's slurmscriptd
  mapfile -t confs < <(conf_paths)
  local -a dirs=("$SRUN")
  for conf in "${confs[@]}"; do dirs+=("${conf%/*}"); done
  for f in /proc/[0-9]*/comm; do
    { read -r comm <"$f"; } 2>/dev/null || continue
    p=${f#/proc/}
    p=${p%/comm}
    case $comm in
      munged)
        { mapfile -d '' -t args <"/proc/$p/cmdline"; } 2>/dev/null || continue
        [[ "${args[*]}" == *"$SRUN/"* ]] && echo "$p"
        ;;
      slurmctld | slurmd)
        { mapfile -d '' -t args <"/proc/$p/cmdline"; } 2>/dev/null || continue
        for conf in "${confs[@]}"; do
          [[ " ${args[*]} " == *" -f $conf "* ]] && { echo "$p"; break; }
        done
        ;;
      slurmstepd | slurmscriptd)
        for line in /proc/"$p"/fd/*; do
          line=$(readlink "$line" 2>/dev/null) || continue
          for conf in "${dirs[@]}"; do
            [[ "$line" == "$conf/"* ]] && { stepd[$p]=1; break 2; }
          done
        done
        ;;
    esac
  done
  # Descendants of the slurmstepds, through the parent pids in /proc/*/stat.
  if ((${#stepd[@]})); then
    local -A kids=()
    local pp rest
    for f in /proc/[0-9]*/stat; do
      { read -r line <"$f"; } 2>/dev/null || continue
      p=${line%% *}
      rest=${line##*) }          # after "(comm) ": state ppid ...
      pp=$(cut -d' ' -f2 <<<"$rest")
      kids[$pp]+=" $p"
    done
    local -a todo=("${!stepd[@]}")
    while ((${#todo[@]})); do
      p=${todo[-1]}
      unset 'todo[-1]'
      echo "$p"
      for pp in ${kids[$p]:-}; do todo+=("$pp"); done
    done
  fi
  for f in "$SRUN"/*.pid "$MUNGE_DIR"/munged.pid; do
    p=$(cat "$f" 2>/dev/null || true)
    [[ "$p" =~ ^[0-9]+$ ]] || continue
    { read -r comm <"/proc/$p/comm"; } 2>/dev/null || continue
    case $comm in munged | slurmctld | slurmd) echo "$p" ;; esac
  done
}

# Stops them: munged and slurmd with SIGTERM (SIGKILL after 5 s), everything
# else at once with SIGKILL: job steps and jobs, and slurmctld, whose state
# goes with its directory anyway (on SIGTERM it takes 5 s and more to stop,
# retrying the slurmds that go down beside it).
kill_own_processes() {
  local pids p left round
  for round in TERM KILL KILL; do
    pids=$(own_pids | sort -un | grep -vx -e "$$" -e "$BASHPID" -e 1 || true)
    [[ -z "$pids" ]] && return 0
    local -a term=() now=()
    for p in $pids; do
      case $(cat "/proc/$p/comm" 2>/dev/null) in
        munged | slurmd) [[ $round == TERM ]] && term+=("$p") || now+=("$p") ;;
        *) now+=("$p") ;;
      esac
    done
    ((${#now[@]} == 0)) || kill -KILL "${now[@]}" 2>/dev/null || true
    ((${#term[@]} == 0)) || kill -TERM "${term[@]}" 2>/dev/null || true
    for _ in $(seq 50); do
      left=0
      for p in $pids; do alive "$p" && { left=1; break; }; done
      ((left)) || break
      sleep 0.1
    done
  done
  left=""
  for p in $(own_pids | sort -un); do alive "$p" && left+=" $p"; done
  [[ -z "$left" ]] || log "WARNING: processes survive SIGKILL:$left"
}

# docker_sock_in HOST TARGET: mounts TARGET (a socket, or the bed's empty
# no-docker.sock) over the default Docker socket inside bed host HOST, after
# unmounting whatever is mounted there (bed.sh's no-docker.sock, an earlier
# bind). Idempotent: nothing changes when TARGET's file is what is there
# already (same device and inode; a restarted dockerd's new socket is not).
# The default socket is `readlink -f /var/run/docker.sock` there: the
# machine's own (/run is shared), so it must exist as a file.
docker_sock_in() {
  local h=$1 target=$2
  # shellcheck disable=SC2016  # expanded by the inner bash, inside the host
  "$BEDSH" exec "$h" bash -c '
    set -eu
    s=$(readlink -f /var/run/docker.sock)
    if [[ -n "$1" && -e "$s" ]] &&
       [[ "$(stat -c %d:%i "$s")" == "$(stat -c %d:%i "$1")" ]]; then
      exit 0
    fi
    n=0
    while awk -v p="$s" '\''$5 == p {f = 1} END {exit !f}'\'' /proc/self/mountinfo; do
      umount "$s"
      n=$((n + 1))
      ((n < 20)) || { echo "cannot unmount $s" >&2; exit 1; }
    done
    [[ -n "$1" ]] || exit 0
    [[ -e "$s" ]] || { echo "no $s to mount over (the machine has no default Docker socket: scripts/ensure-docker.sh)" >&2; exit 1; }
    mount --bind "$1" "$s"' bash "$target" 9>&-
}

rebind_all() {
  local h sock out
  for h in $(env_get BED_HOSTS); do
    sock="$RUN/$h.sock"
    [[ -S "$sock" ]] || die "$h has no dockerd socket $sock (a BARGE_BED_SSHD_ONLY=1 bed?)"
    docker_sock_in "$h" "$sock" || die "cannot bind $sock over the default Docker socket in $h"
    out=$("$BEDSH" exec "$h" env -u DOCKER_HOST -u DOCKER_CONTEXT docker info --format '{{.Name}}' 2>&1) || true
    [[ "$out" == "$h" ]] || die "$h: the default engine there is '$out', not $h's dockerd"
  done
}

# Gives each host back bed.sh's empty no-docker.sock (hides the machine's
# engine). Quiet when the hosts are gone.
unbind_all() {
  local h
  for h in $(env_get BED_HOSTS); do
    [[ -e "/run/netns/bb-$h" ]] || continue
    if [[ -e "$BED/no-docker.sock" ]]; then
      docker_sock_in "$h" "$BED/no-docker.sock" || log "WARNING: cannot restore no-docker.sock in $h"
    else
      docker_sock_in "$h" "" || log "WARNING: cannot unmount the Docker socket bind in $h"
    fi
  done
}

# Only ever removes these two directories, both this script's.
remove_dirs() {
  rm -rf "$SRUN" "$SDIR"
}

clean() {
  rm -f "$SDIR/slurm.env"
  kill_own_processes
  unbind_all
  remove_dirs
}

leftovers() {
  local p out=""
  for p in $(own_pids | sort -un); do
    alive "$p" && out+=$'\n'"process $p $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-100)"
  done
  [[ -e "$SRUN" ]] && out+=$'\n'"dir $SRUN"
  [[ -e "$SDIR" ]] && out+=$'\n'"dir $SDIR"
  sed '/^$/d' <<<"$out"
}

cmd_down() {
  need_root
  take_lock
  clean
  local left
  left=$(leftovers)
  [[ -z "$left" ]] || die "left after down:"$'\n'"$left"
  log "down"
}

# ---------------------------------------------------------------------------
# up

log_tails() {
  local f
  for f in "$MUNGE_DIR/munged.log" "$SDIR/log/slurmctld.log" "$SDIR"/log/slurmd-*.log "$SDIR"/log/*.out; do
    [[ -s "$f" ]] || continue
    echo "--- last lines of $f" >&2
    tail -n 15 "$f" | sed 's/^/    /' >&2
  done
}

UP_OK=0
on_up_exit() {
  local rc=$?
  ((UP_OK)) && return 0
  log "up FAILED (exit $rc)"
  log_tails
  if [[ "${BARGE_SLURM_KEEP_ON_FAIL:-0}" == 1 ]]; then
    log "BARGE_SLURM_KEEP_ON_FAIL=1: leaving the half-made cluster for inspection in $SDIR"
  else
    log "removing the half-made cluster"
    clean || true
  fi
  exit "$rc"
}

write_conf() { # GATEWAY HOSTS...
  local gw=$1 h layout
  shift
  local nodes
  nodes=$(tr ' ' ',' <<<"$*")
  cat >"$CONF" <<EOF
# The test bed's Slurm cluster, written by tests/bed/slurm.sh up at $(date -Is).
ClusterName=$CLUSTER
SlurmctldHost=$(hostname -s)($gw)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MUNGE_SOCKET
StateSaveLocation=$SDIR/state
SlurmdSpoolDir=$SDIR/spool/%n
SlurmctldPidFile=$SRUN/slurmctld.pid
SlurmdPidFile=$SRUN/slurmd-%n.pid
SlurmctldLogFile=$SDIR/log/slurmctld.log
SlurmdLogFile=$SDIR/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
# No cgroup hierarchy of Slurm's own (the bed hosts share the machine's).
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$JOBCOMP
SelectType=select/cons_tres
# Cores and memory are shared out (a job with exclusive: false gets a share:
# scontrol -d shows its CPU_IDs and Mem); 512 MiB a CPU when a job names none.
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=512
GresTypes=gpu
MpiDefault=none
SwitchType=switch/none
# Not the machine's /etc/slurm/plugstack.conf: an empty one of its own.
PlugStackConfig=$SDIR/plugstack.conf
MailProg=/bin/true
# barge's sample epilog (samples/slurm/epilog.sh, copied where every bed host
# sees it, behind a switch): removes the ending job's barge containers.
Epilog=$SDIR/epilog.sh
ReturnToService=2
# Ended jobs stay in \`scontrol show job\` for 10 minutes.
MinJobAge=600
# Fast tests: a cancelled step gets SIGKILL 5 s after SIGTERM; a dead slurmd
# makes its node DOWN after 20 s.
KillWait=5
SlurmdTimeout=20
SlurmctldTimeout=20
MessageTimeout=10
InactiveLimit=0
Waittime=0
EOF
  for h in "$@"; do
    # slurmd -C: "NodeName=hN CPUs=.. Boards=.. ... RealMemory=.." (and UpTime).
    layout=$("$BEDSH" exec "$h" slurmd -C 2>/dev/null 9>&- | sed -n 's/^NodeName=[^ ]* //p' | head -n1)
    [[ "$layout" == *CPUs=* && "$layout" == *RealMemory=* ]] || die "slurmd -C in $h printed no node layout"
    echo "NodeName=$h NodeAddr=$(env_get "BED_HOST_${h}_ADDR") $layout Gres=gpu:$GPUS_PER_NODE State=UNKNOWN" >>"$CONF"
  done
  echo "PartitionName=$PARTITION Nodes=$nodes Default=YES MaxTime=INFINITE State=UP" >>"$CONF"
  # AutoDetect=off: no NVML here; the files only need to be character devices.
  {
    echo "# GPUs of the test bed's Slurm nodes: stand-in devices (tests/bed/slurm.sh)."
    echo "AutoDetect=off"
    echo "NodeName=$nodes Name=gpu File=$SRUN/dev/nvidia[0-$((GPUS_PER_NODE - 1))]"
  } >"$SDIR/gres.conf"
  : >"$SDIR/plugstack.conf"
}

wait_idle() { # HOSTS...
  local out want got i
  want=$(printf '%s idle\n' "$@" | sort)
  for ((i = 0; i < WAIT_S * 2; i++)); do
    out=$(timeout 10 sinfo -N -h -o '%N %T' 2>&1) || true
    got=$(sort <<<"$out")
    [[ "$got" == "$want" ]] && return 0
    sleep 0.5
  done
  log "nodes not idle after $WAIT_S s; sinfo says:"
  sed 's/^/    /' <<<"$out" >&2
  timeout 10 sinfo -N -h -o '%N %T %E' 2>/dev/null | sed 's/^/    /' >&2 || true
  return 1
}

cmd_up() {
  need_root
  local t
  for t in munged mungekey slurmctld slurmd sinfo scontrol mknod nsenter; do
    command -v "$t" >/dev/null 2>&1 || die "missing '$t'; install munge slurmctld slurmd slurm-client (scripts/test.sh lists them)"
  done
  [[ -e "$BED/bed.env" ]] || die "the bed is down (no $BED/bed.env); tests/bed/bed.sh up first"
  local hosts gw
  hosts=$(env_get BED_HOSTS)
  gw=$(env_get BED_GATEWAY)
  [[ -n "$hosts" && -n "$gw" ]] || die "the bed has no namespace hosts (BARGE_BED_HOSTS=0?): no nodes for Slurm"
  [[ "$(env_get BED_DOCKERD)" == 1 ]] || die "the bed has no dockerds (BARGE_BED_SSHD_ONLY=1): Slurm's steps need them"
  grep -q "^SetEnv .*SLURM_CONF=$CONF\b" "$BED/lo/sshd_config" 2>/dev/null ||
    die "lo's sshd does not set SLURM_CONF=$CONF (a bed made before bed.sh wrote it): tests/bed/bed.sh down, then up"
  take_lock
  local t0=$SECONDS
  trap on_up_exit EXIT

  log "clearing stale state"
  clean
  local left
  left=$(leftovers)
  [[ -z "$left" ]] || die "cannot clear stale Slurm state:"$'\n'"$left"
  if (exec 3<>"/dev/tcp/$gw/$CTLD_PORT") 2>/dev/null; then
    die "$gw:$CTLD_PORT is taken by something that is not this cluster; set BARGE_SLURM_CTLD_PORT"
  fi

  # Root-owned, 0755 (munged checks its directories' permissions).
  install -d -m 0755 "$SRUN" "$MUNGE_DIR" "$SRUN/dev"
  mkdir -p "$SDIR/state" "$SDIR/log"
  local h
  for h in $hosts; do mkdir -p "$SDIR/spool/$h"; done # else slurmd logs an error
  echo "$CONF" >"$SRUN/conf-path"

  log "munged ($MUNGE_SOCKET)"
  mungekey -c -k "$MUNGE_DIR/munge.key" >/dev/null || die "mungekey failed"
  chmod 0400 "$MUNGE_DIR/munge.key"
  munged --socket="$MUNGE_SOCKET" --key-file="$MUNGE_DIR/munge.key" \
    --pid-file="$MUNGE_DIR/munged.pid" --log-file="$MUNGE_DIR/munged.log" \
    --seed-file="$MUNGE_DIR/munged.seed" --force </dev/null >>"$MUNGE_DIR/munged.out" 2>&1 9>&- ||
    die "munged did not start"
  munge -S "$MUNGE_SOCKET" -n </dev/null | unmunge -S "$MUNGE_SOCKET" >/dev/null ||
    die "munge credentials do not round-trip through $MUNGE_SOCKET"

  # Stand-in GPUs: character devices with NVIDIA's major number (195), no driver.
  local i
  for ((i = 0; i < GPUS_PER_NODE; i++)); do
    mknod -m 0666 "$SRUN/dev/nvidia$i" c 195 "$i"
  done

  # shellcheck disable=SC2086
  write_conf "$gw" $hosts
  # barge's sample epilog, behind a switch a test can turn it off with
  # (touch $SDIR/epilog.off: to see barge's own watch of the allocation).
  install -m 0755 "$HERE/../../samples/slurm/epilog.sh" "$SDIR/barge-epilog.sh"
  printf '#!/bin/sh\n[ -e %s/epilog.off ] && exit 0\nexec %s/barge-epilog.sh\n' "$SDIR" "$SDIR" >"$SDIR/epilog.sh"
  chmod 0755 "$SDIR/epilog.sh"
  slurmctld -V >/dev/null

  log "slurmctld on $gw:$CTLD_PORT"
  env -u DOCKER_HOST -u DOCKER_CONTEXT slurmctld -f "$CONF" </dev/null >>"$SDIR/log/slurmctld.out" 2>&1 9>&- ||
    die "slurmctld did not start"
  for ((i = 0; i < WAIT_S * 5; i++)); do
    timeout 10 scontrol ping 2>/dev/null | grep -q 'is UP' && break
    sleep 0.2
  done
  ((i < WAIT_S * 5)) || die "slurmctld does not answer scontrol ping"

  log "each host's own dockerd as its default engine"
  rebind_all

  log "slurmd in $hosts"
  for h in $hosts; do
    # Started inside the host: hostname hN (= NodeName), its address, its
    # /run/docker.sock. Steps inherit the submitter's environment, but the
    # daemon's own should not name another engine either.
    env -u DOCKER_HOST -u DOCKER_CONTEXT "$BEDSH" exec "$h" slurmd -f "$CONF" \
      </dev/null >>"$SDIR/log/slurmd-$h.out" 2>&1 9>&- || die "slurmd did not start in $h"
  done


  log "waiting until every node is idle (up to $WAIT_S s)"
  # shellcheck disable=SC2086
  wait_idle $hosts || die "the nodes did not all become idle"

  local tmp="$SDIR/slurm.env.tmp"
  {
    echo "# The test bed's Slurm cluster, written by tests/bed/slurm.sh up at $(date -Is)."
    echo "# KEY=VALUE lines, sourceable by sh; export SLURM_CONF for the client commands."
    echo "SLURM_CONF=$CONF"
    echo "BED_SLURM_CONF=$CONF"
    echo "BED_SLURM_CLUSTER=$CLUSTER"
    echo "BED_SLURM_NODES=\"$hosts\""
    echo "BED_SLURM_PARTITION=$PARTITION"
    echo "BED_SLURM_GPUS_PER_NODE=$GPUS_PER_NODE"
    echo "BED_SLURM_MUNGE_SOCKET=$MUNGE_SOCKET"
    echo "BED_SLURM_JOBCOMP=$JOBCOMP"
    echo "BED_SLURM_CONTROLLER_HOST=$(hostname -s)"
    echo "BED_SLURM_CONTROLLER_ADDR=$gw"
    echo "BED_SLURM_CONTROLLER_PORT=$CTLD_PORT"
    echo "BED_SLURM_SLURMD_PORT=$SLURMD_PORT"
    echo "BED_SLURM_LOG_DIR=$SDIR/log"
    echo "BED_SLURM_SCRIPT=$SELF"
  } >"$tmp"
  mv "$tmp" "$SDIR/slurm.env"
  UP_OK=1
  trap - EXIT
  log "up in $((SECONDS - t0))s: partition $PARTITION = $hosts; $SDIR/slurm.env"
}

cmd_rebind() {
  need_root
  [[ -e "$BED/bed.env" ]] || die "the bed is down (no $BED/bed.env)"
  take_lock
  rebind_all
  log "rebound: each host's default Docker socket is its own dockerd's"
}

pid_state() { # PIDFILE -> "pid N up" / "DOWN"
  local p
  p=$(cat "$1" 2>/dev/null || true)
  if [[ "$p" =~ ^[0-9]+$ ]] && alive "$p"; then echo "pid $p up"; else echo "DOWN"; fi
}

cmd_status() {
  if [[ ! -e "$SDIR/slurm.env" ]]; then
    echo "slurm: down (no $SDIR/slurm.env)"
    local left
    left=$(leftovers 2>/dev/null || true)
    [[ -z "$left" ]] || printf 'leftovers:\n%s\n' "$left"
    return 3
  fi
  local bad=0 s h out
  echo "slurm: $SDIR/slurm.env"
  s=$(pid_state "$MUNGE_DIR/munged.pid"); [[ "$s" == DOWN ]] && bad=1
  printf '  munged     %s\n' "$s"
  s=$(pid_state "$SRUN/slurmctld.pid"); [[ "$s" == DOWN ]] && bad=1
  printf '  slurmctld  %s\n' "$s"
  local -a nodes
  read -r -a nodes <<<"$(sed -n 's/^BED_SLURM_NODES="\(.*\)"$/\1/p' "$SDIR/slurm.env")"
  for h in "${nodes[@]}"; do
    s=$(pid_state "$SRUN/slurmd-$h.pid"); [[ "$s" == DOWN ]] && bad=1
    printf '  slurmd %-3s %s\n' "$h" "$s"
  done
  out=$(timeout 10 sinfo -N -h -o '%N %T' 2>&1) || bad=1
  sed 's/^/  node /' <<<"$out"
  grep -qvE ' (idle|allocated|mixed|completing)$' <<<"$out" && bad=1
  return $bad
}

case "${1:-}" in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  rebind) cmd_rebind ;;
  *)
    sed -n '2,11p' "$SELF" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
