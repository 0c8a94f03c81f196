#!/usr/bin/env bash
# barge's test bed: real OpenSSH sshds and real dockerds on this machine.
#
#   tests/bed/bed.sh up        clear anything stale, then bring the bed up
#   tests/bed/bed.sh down      remove everything the bed made (safe to repeat)
#   tests/bed/bed.sh status    print what is up; exit 0 only if all of it is
#   tests/bed/bed.sh exec NAME CMD...   run CMD inside host NAME's namespaces
#   tests/bed/bed.sh ssh NAME [CMD...]  ssh into a bed host ("lo" or "hN")
#
# The bed is
#  - the loopback host "lo": an sshd on $BARGE_BED_SSH_ADDR:$BARGE_BED_SSH_PORT
#    (127.0.0.2:2222) in the root network namespace, driving the machine's
#    default dockerd (scripts/ensure-docker.sh starts one if needed), with a
#    private tmpfs /root so root's ~/.bashrc stays out of remote commands;
#  - $BARGE_BED_HOSTS namespace hosts h1..hN (default 3; 0 = loopback only):
#    each a network namespace on the bridge bb-br0 at $BARGE_BED_SUBNET.(i+1)
#    (10.77.0.2, .3, ...), with its own UTS namespace (hostname hN), mount
#    namespace (private /root and /tmp, /etc/hosts listing every bed host,
#    resolv.conf -> 127.0.0.1, no default route), sshd on port 22 and dockerd
#    (own data-root, exec-root, socket, cgroup parent; sshd's SetEnv points
#    DOCKER_HOST at it). BARGE_BED_SSHD_ONLY=1 skips the dockerds (for SSH
#    fan-out with many hosts);
#  - with 3 or more namespace hosts, the jump target: a second sshd in h3's
#    namespaces on $SUBNET.4:2022 (own host key, in known_hosts as
#    [10.77.0.4]:2022) that only h2 can reach: an iptables rule in h3's
#    network namespace (comment "barge-bed") drops TCP to port 2022 from every
#    other source, so a client gets there only through h2 (ProxyJump). bed.env
#    names it BED_JUMP_TARGET_ADDR/_PORT and BED_JUMP_VIA=h2. It goes with h3's
#    namespace on `down`. `bed.sh _jump_target` adds it to a bed that is
#    already up and lacks it (idempotent);
#  - one client key, one known_hosts with every host's key, the busybox image
#    $BARGE_BED_IMAGE (barge/test:local) in every engine, and with
#    BARGE_BED_TORCH=1 also barge/torch:local (tests/bed/build-torch-image.sh)
#    in every namespace host's engine.
# BARGE_BED_REUSE=1 makes `up` keep a healthy bed made with the same settings
# and BARGE_BED_KEEP=1 makes `down` a no-op (e.g. for repeated ctest runs).
# `up` writes $BARGE_BED_DIR/bed.env (default /tmp/barge-bed/bed.env), read by
# tests/support/bed_env.cc and shell-sourceable, last: it exists only when the bed is up.
#
# Everything the bed makes carries a prefix of its own so that clean-up never
# touches anything else: network namespaces and links "bb-*", iptables rules
# with the comment "barge-bed", cgroups "barge-bed-*", files under
# $BARGE_BED_DIR and /run/barge-bed. Needs root. See shared/TESTBED.md for
# why each step is done the way it is.
set -euo pipefail

BED_LOG_NAME=bed
# shellcheck source=tests/bed/lib.sh
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib.sh"
close_inherited_fds

BED=${BARGE_BED_DIR:-/tmp/barge-bed}
RUN=/run/barge-bed            # sockets, exec-roots, namespace files
NSDIR=$RUN/ns                 # persisted mount/uts namespaces (private mount)
LOCK=/run/lock/barge-bed.lock
NHOSTS=${BARGE_BED_HOSTS:-3}
SUBNET=${BARGE_BED_SUBNET:-10.77.0}   # a /24 the bed owns: .1 bridge, .2.. hosts
LO_ADDR=${BARGE_BED_SSH_ADDR:-127.0.0.2}
LO_PORT=${BARGE_BED_SSH_PORT:-2222}
SSHD_ONLY=${BARGE_BED_SSHD_ONLY:-0}
IMAGE=${BARGE_BED_IMAGE:-barge/test:local}
TORCH=${BARGE_BED_TORCH:-0}
TORCH_IMAGE=barge/torch:local
# `docker save` of the 1.1 GB torch image takes half a minute: keep it here.
CACHE_DIR=${BARGE_BED_CACHE:-/var/cache/barge-bed}
# Where the namespace hosts' dockerds keep their data: "tmpfs" (one tmpfs at
# $RUN/data: the root disk here is mounted with `discard`, and deleting a
# dockerd's synced files from it takes seconds per host), "disk" ($BED/hN/docker),
# or "auto": tmpfs unless the images would need more than half the free memory.
DATA_MODE=${BARGE_BED_DATA:-auto}
BRIDGE=bb-br0
# The jump target (see the header): sshd in $JUMP_HOST's namespaces on
# $JUMP_PORT, reachable from $JUMP_VIA only.
JUMP_HOST=h3
JUMP_VIA=h2
JUMP_PORT=2022
TAG=barge-bed                 # iptables comment, cgroup prefix, marker
SELF=$(readlink -f "${BASH_SOURCE[0]}")
HERE=$(dirname "$SELF")
ROOT=$(cd "$HERE/../.." && pwd)
SSHD=$(command -v sshd || echo /usr/sbin/sshd)

# progress WHAT CMD...: runs CMD (its stdout kept as this function's) and, so
# that a long step (apt installs, cutting and loading the torch image) is not
# minutes of silence, logs "WHAT: still going (N s)" every
# BARGE_BED_PROGRESS_SECONDS (default 10) until it ends. Returns CMD's status.
progress() {
  local what=$1 every=${BARGE_BED_PROGRESS_SECONDS:-10} start=$SECONDS ticker rc=0
  shift
  log "$what"
  # The ticker ends with this script too (a die inside CMD exits it).
  ( trap 'exit 0' TERM
    while sleep "$every" && kill -0 "$$" 2>/dev/null; do
      log "$what: still going ($((SECONDS - start)) s)"
    done ) >/dev/null 9>&- &
  ticker=$!
  "$@" || rc=$?
  kill "$ticker" 2>/dev/null || true
  wait "$ticker" 2>/dev/null || true
  ((rc == 0)) && log "$what: done in $((SECONDS - start)) s"
  return "$rc"
}


host_names() {
  local i
  for ((i = 1; i <= NHOSTS; i++)); do printf 'h%d\n' "$i"; done
}
host_addr() { echo "$SUBNET.$((${1#h} + 1))"; }
data_root() { if [[ -e "$RUN/data.tmpfs" ]]; then echo "$RUN/data/$1"; else echo "$BED/$1/docker"; fi; }

need_root() {
  ((EUID == 0)) || die "the test bed needs root (network namespaces, mounts, iptables); run as root"
}

# Clean-up removes $BED: refuse a directory that is not the bed's.
check_bed_dir() {
  [[ "$BED" == /* && "$BED" != / && "$BED" != *..* ]] || die "BARGE_BED_DIR must be an absolute path (not /): '$BED'"
  BED=${BED%/}
  if [[ -d "$BED" && ! -e "$BED/.$TAG" && -n "$(ls -A "$BED" 2>/dev/null)" ]]; then
    die "$BED is not empty and is not a test bed directory (no .$TAG marker); set BARGE_BED_DIR to a new directory"
  fi
}

take_lock() {
  mkdir -p "$(dirname "$LOCK")"
  exec 9>"$LOCK"
  flock -w 300 9 || die "another bed.sh holds $LOCK"
}

# ---------------------------------------------------------------------------
# Clean-up: everything with the bed's prefixes, whether or not a process
# still stands behind it (kernel state outlives processes).

ns_inode() { stat -L -c %i "$1" 2>/dev/null || true; }

# PIDs of everything the bed started: processes in its network, mount or UTS
# namespaces, daemons whose command line names its directories, and
# processes in its containers' cgroups.
bed_pids() {
  local -A want=()
  local f ino p line path
  local -a args
  for f in /run/netns/bb-* "$NSDIR"/*.mnt "$NSDIR"/*.uts; do
    [[ -e "$f" ]] || continue
    ino=$(ns_inode "$f")
    [[ -n "$ino" ]] && want[$ino]=1
  done
  # Namespaces shared with PID 1 are the machine's own: never match those.
  for f in net mnt uts; do
    ino=$(ns_inode "/proc/1/ns/$f")
    [[ -n "$ino" ]] && unset "want[$ino]"
  done
  if ((${#want[@]})); then
    while read -r path ino; do
      [[ -n "${want[$ino]:-}" ]] || continue
      p=${path#/proc/}
      echo "${p%%/*}"
    done < <(stat -L -c '%n %i' /proc/[0-9]*/ns/net /proc/[0-9]*/ns/mnt /proc/[0-9]*/ns/uts 2>/dev/null || true)
  fi
  # Daemons by command line (a half-made host may have no namespace file).
  for f in /proc/[0-9]*/comm; do
    { read -r line <"$f"; } 2>/dev/null || continue
    case $line in
      sshd | dockerd | containerd | containerd-shim*) ;;
      *) continue ;;
    esac
    p=${f#/proc/}
    p=${p%/comm}
    { mapfile -d '' -t args <"/proc/$p/cmdline"; } 2>/dev/null || continue
    [[ "${args[*]}" == *"$BED/"* || "${args[*]}" == *"$RUN/"* ]] && echo "$p"
  done
  # Containers of the bed's dockerds (cgroup parent barge-bed-hN).
  cat /sys/fs/cgroup/*/"$TAG"-*/*/cgroup.procs /sys/fs/cgroup/"$TAG"-*/*/cgroup.procs 2>/dev/null || true
}

kill_bed_processes() {
  local pids p me=$$ left
  for _ in 1 2 3 4 5; do
    pids=$(bed_pids | sort -un | grep -vx -e "$me" -e "$BASHPID" -e 1 || true)
    [[ -z "$pids" ]] && break
    # shellcheck disable=SC2086
    kill -KILL $pids 2>/dev/null || true
    # Wait (up to ~5 s) until they are really gone.
    for _ in $(seq 50); do
      left=0
      for p in $pids; do alive "$p" && { left=1; break; }; done
      ((left)) || break
      sleep 0.1
    done
  done
  pids=$(bed_pids | sort -un | grep -vx -e "$me" -e "$BASHPID" -e 1 || true)
  left=""
  for p in $pids; do alive "$p" && left+=" $p"; done
  [[ -z "$left" ]] || log "WARNING: processes survive SIGKILL:$left"
}

umount_bed_mounts() {
  local m
  # Deepest first. Only mounts under the bed's own directories.
  while read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || log "WARNING: cannot unmount $m"
  done < <(awk -v a="$BED" -v b="$RUN" '$5 == a || index($5, a "/") == 1 || $5 == b || index($5, b "/") == 1 {print $5}' /proc/self/mountinfo | sort -r)
}

remove_cgroups() {
  local d
  # Children before parents.
  while read -r d; do
    rmdir "$d" 2>/dev/null || true
  done < <(find /sys/fs/cgroup -maxdepth 3 -type d -name "$TAG-*" 2>/dev/null | while read -r top; do
    find "$top" -depth -type d
  done)
}

remove_iptables_rules() {
  local table rule
  for table in filter nat; do
    while read -r rule; do
      [[ -n "$rule" ]] || continue
      # shellcheck disable=SC2086
      eval "iptables -w -t $table ${rule/#-A/-D}" 2>/dev/null || log "WARNING: cannot delete iptables rule: $rule"
    done < <(iptables -w -t "$table" -S 2>/dev/null | grep -e "--comment \"\?$TAG\"\? " -e "--comment \"\?$TAG\"\?$" || true)
  done
}

remove_links_and_netns() {
  local l n batch=""
  # Root-side veths first: deleting one removes its peer at once, where
  # deleting a namespace removes its devices asynchronously.
  while read -r l; do
    [[ -z "$l" || "$l" == "$BRIDGE" ]] || batch+="link del $l"$'\n'
  done < <(ip -o link show 2>/dev/null | awk -F': ' '{sub(/@.*/, "", $2); print $2}' | grep '^bb-' || true)
  for n in /run/netns/bb-*; do
    [[ -e "$n" ]] && batch+="netns del ${n##*/}"$'\n'
  done
  [[ -z "$batch" ]] || ip -force -batch - <<<"$batch" >/dev/null 2>&1 || true
  ip link del "$BRIDGE" 2>/dev/null || true
  for n in /run/netns/bb-*; do # whatever ip could not delete
    [[ -e "$n" ]] || continue
    umount -l "$n" 2>/dev/null || true
    rm -f "$n"
  done
}

remove_dirs() {
  rm -rf "$RUN"
  [[ -z "${OTHER_BED:-}" ]] || rm -rf "$OTHER_BED"
  if [[ -e "$BED" ]]; then
    if [[ -e "$BED/.$TAG" ]] || [[ -z "$(ls -A "$BED" 2>/dev/null)" ]]; then
      rm -rf "$BED"
    else
      die "$BED exists and is not a bed directory (no .$TAG marker); not removing it"
    fi
  fi
}

# The failure record's entries (runner/remote/host_record.h: created, never
# started, named barge-fault-*, labelled barge.fault) that tests left, on
# the engines of DOCKER_HOST... ("" or none: the machine's default engine,
# which the loopback host uses and which outlives the bed).
remove_fault_records() {
  local e ids
  (($#)) || set -- ""
  for e in "$@"; do
    ids=$(env ${e:+DOCKER_HOST="$e"} timeout 20 docker ps -aq --filter 'name=^/?barge-fault-' \
      --filter label=barge.fault 2>/dev/null) || continue
    # shellcheck disable=SC2086  # one word per ID
    [[ -z "$ids" ]] || env ${e:+DOCKER_HOST="$e"} timeout 20 docker rm -f $ids >/dev/null 2>&1 ||
      log "WARNING: cannot remove the failure record on ${e:-the default engine}"
  done
}

clean() {
  # The bed's Slurm cluster (tests/bed/slurm.sh) first, if one runs: its
  # munged and slurmctld live in the root namespaces, where nothing below looks.
  [[ ! -x "$HERE/slurm.sh" ]] || BARGE_BED_DIR=$BED "$HERE/slurm.sh" down >&2 9>&- ||
    log "WARNING: tests/bed/slurm.sh down failed"
  rm -f "$BED/bed.env"
  # The bed is one per machine (its names, port and /run/barge-bed are
  # global): a bed made with another BARGE_BED_DIR goes too, bed.env first.
  local prev
  prev=$(cat "$RUN/bed-dir" 2>/dev/null || true)
  if [[ -n "$prev" && "$prev" != "$BED" && -e "$prev/.$TAG" ]]; then
    log "removing the bed of $prev (another BARGE_BED_DIR)"
    rm -f "$prev/bed.env"
    OTHER_BED=$prev
  fi
  local step
  for step in kill_bed_processes umount_bed_mounts remove_links_and_netns \
    remove_iptables_rules remove_cgroups remove_dirs remove_fault_records; do
    [[ "${BARGE_BED_VERBOSE:-0}" == 1 ]] && log "clean: $step"
    "$step"
  done
}

leftovers() {
  local out=""
  out+=$(ip netns list 2>/dev/null | grep '^bb-' | sed 's/^/netns /' || true)
  out+=$(ip -o link show 2>/dev/null | awk -F': ' '{sub(/@.*/, "", $2); print $2}' | grep '^bb-' | sed 's/^/\nlink /' || true)
  out+=$(iptables -w -S 2>/dev/null | grep -F -- "$TAG" | sed 's/^/\niptables /' || true)
  out+=$(awk -v a="$BED" -v b="$RUN" '$5 == a || index($5, a "/") == 1 || $5 == b || index($5, b "/") == 1 {print "\nmount " $5}' /proc/self/mountinfo || true)
  local p
  for p in $(bed_pids | sort -un | grep -vx -e "$$" -e "$BASHPID" || true); do
    alive "$p" && out+=$'\n'"process $p $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-100)"
  done
  [[ -e "$BED" ]] && out+=$'\n'"dir $BED"
  [[ -e "$RUN" ]] && out+=$'\n'"dir $RUN"
  sed '/^$/d' <<<"$out"
}

cmd_down() {
  need_root
  check_bed_dir
  take_lock
  if [[ "${BARGE_BED_KEEP:-0}" == 1 ]]; then
    log "BARGE_BED_KEEP=1: leaving the bed up"
    return 0
  fi
  local t0=$SECONDS
  clean
  local left
  left=$(leftovers)
  [[ -z "$left" ]] || die "left after down:"$'\n'"$left"
  log "down in $((SECONDS - t0))s"
}

# ---------------------------------------------------------------------------
# _persist MNT UTS CMD...: runs CMD in new mount namespaces (slave
# propagation) and, when UTS is not empty, new UTS namespaces, named by MNT
# (and UTS) before CMD starts; exits with CMD's status. The names are
# symlinks to /proc/HOLDER/ns/{mnt,uts} of a holder process (titled
# barge-bed-ns-holder, a sleep) that stays in those namespaces until the
# bed goes down (bed_pids finds it through them). Not bind mounts of the
# namespaces (`unshare --mount=FILE`): inside a container
# (bench/fresh-machine.sh, kernel 6.18) the kernel refuses to bind new mount
# namespaces there ("mount /proc/PID/ns/mnt on FILE failed: Invalid
# argument"), sometimes every one of 30 made in a row; nsenter and setns
# take the /proc name as well.
cmd__persist() {
  local mnt=$1 uts=$2 pid holder="" i pidfile
  shift 2
  pidfile=$(mktemp -u "$NSDIR/.holder.XXXXXX")
  local -a flags=(--mount)
  [[ -z "$uts" ]] || flags+=(--uts)
  # shellcheck disable=SC2016
  unshare "${flags[@]}" --propagation slave -- bash -c \
    '(exec -a barge-bed-ns-holder sleep 2147483647) </dev/null >/dev/null 2>&1 &
     echo $! >"$1.tmp" && mv "$1.tmp" "$1" || exit 1
     shift; exec "$@"' bash "$pidfile" "$@" &
  pid=$!
  for ((i = 0; i < 500; i++)); do
    [[ -s "$pidfile" ]] && { holder=$(cat "$pidfile"); break; }
    alive "$pid" || break
    sleep 0.01
  done
  rm -f "$pidfile"
  if ! [[ "$holder" =~ ^[0-9]+$ ]] ||
     [[ "$(readlink "/proc/$holder/ns/mnt" 2>/dev/null)" == "$(readlink /proc/self/ns/mnt)" ]]; then
    kill "$pid" 2>/dev/null || true
    die "no namespaces holder for $* (holder pid '${holder}')"
  fi
  ln -sfn "/proc/$holder/ns/mnt" "$mnt" || die "cannot name $mnt"
  [[ -z "$uts" ]] || ln -sfn "/proc/$holder/ns/uts" "$uts" || die "cannot name $uts"
  wait "$pid"
}

# ---------------------------------------------------------------------------
# Inside a host's fresh namespaces (called through nsenter + unshare).

# _lo_init: mount namespace of the loopback sshd. Root network and /tmp (the
# default dockerd resolves bind mounts in the machine's own /tmp), private /root.
cmd__lo_init() {
  umount -l "$NSDIR" 2>/dev/null || true
  mount -t tmpfs -o mode=0700,size=64m bb-lo-root /root
  exec "$SSHD" -f "$BED/lo/sshd_config" -E "$BED/lo/sshd.log"
}

# _host_init NAME ADDR: runs in host NAME's network, UTS and mount namespaces.
cmd__host_init() {
  local name=$1 addr=$2 dir="$BED/$1"
  umount -l "$NSDIR" 2>/dev/null || true
  hostname "$name"
  # Private /root and /tmp; the bed directory (under /tmp) stays visible:
  # bind the directory held as cwd back over the new tmpfs. -c: mount must
  # not canonicalize "." into a path that now names the new tmpfs.
  cd "$BED"
  mount -t tmpfs -o mode=0700,size=256m "bb-$name-root" /root
  mount -t tmpfs -o mode=1777 "bb-$name-tmp" /tmp
  if [[ ! -e "$BED/.$TAG" ]]; then
    mkdir -p "$BED"
    mount -c --bind . "$BED"
  fi
  cd /
  [[ -e "$BED/.$TAG" ]] || { echo "bed dir not visible in $name" >&2; exit 1; }
  mount --bind "$BED/etc-hosts" /etc/hosts
  mount --bind "$BED/resolv.conf" /etc/resolv.conf
  # Hide the machine's own engine so nothing on this host reaches it by mistake.
  local s
  s=$(readlink -f /var/run/docker.sock)
  if [[ -S "$s" ]]; then mount --bind "$BED/no-docker.sock" "$s"; fi
  ip link set lo up
  ip addr add "$addr/24" dev eth0
  ip link set eth0 up
  if [[ "$SSHD_ONLY" != 1 ]]; then
    mkdir -p "$RUN/$name"
    env -u DOCKER_HOST -u DOCKER_CONTEXT -u DOCKER_CONFIG setsid dockerd \
      --config-file "$dir/daemon.json" \
      --data-root "$(data_root "$name")" \
      --exec-root "$RUN/$name" \
      --pidfile "$dir/dockerd.pid" \
      -H "unix://$RUN/$name.sock" \
      --bridge=none --iptables=false --ip-masq=false --ip-forward=false \
      --cgroup-parent "/$TAG-$name" \
      --log-level warn \
      </dev/null >>"$dir/dockerd.log" 2>&1 &
    echo $! >"$dir/dockerd.launched"
  fi
  # sshd binds its port before it daemonizes: listening once this returns.
  "$SSHD" -f "$dir/sshd_config" -E "$dir/sshd.log"
}

# ---------------------------------------------------------------------------
# up

# write_sshd_config FILE LISTEN HOSTKEY PIDFILE [DOCKER_HOST [SETENV...]]:
# every SetEnv goes into one line (sshd takes only the first SetEnv line).
write_sshd_config() {
  local file=$1 listen=$2 hostkey=$3 pidfile=$4 docker_host=${5:-}
  local -a setenv=("${@:6}")
  [[ -z "$docker_host" ]] || setenv=("DOCKER_HOST=$docker_host" "${setenv[@]}")
  cat >"$file" <<EOF
# barge test bed sshd (tests/bed/bed.sh)
ListenAddress $listen
HostKey $hostkey
PidFile $pidfile
AuthorizedKeysFile $BED/authorized_keys .ssh/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
UseDNS no
PrintMotd no
PrintLastLog no
MaxStartups 200:30:400
MaxSessions 100
LoginGraceTime 30
Subsystem sftp internal-sftp
EOF
  ((${#setenv[@]} == 0)) || echo "SetEnv ${setenv[*]}" >>"$file"
}

ssh_opts() {
  printf '%s\n' -i "$BED/id_ed25519" -o "UserKnownHostsFile=$BED/known_hosts" \
    -o StrictHostKeyChecking=yes -o BatchMode=yes -o ConnectTimeout=10 \
    -o KexAlgorithms=curve25519-sha256 \
    -o GlobalKnownHostsFile=/dev/null -o LogLevel=ERROR -F /dev/null
}

# check_ssh NAME ADDR PORT WANT_HOSTNAME WANT_DOCKER_HOST
check_ssh() {
  local out want
  local -a opts
  mapfile -t opts < <(ssh_opts)
  out=$(ssh "${opts[@]}" -p "$3" "root@$2" 'echo "$(hostname) ${DOCKER_HOST:-default}"' 2>&1) || {
    echo "ssh to $1 ($2:$3) failed: $out" >&2
    return 1
  }
  want="$4 ${5:-default}"
  [[ "$out" == "$want" ]] || { echo "ssh to $1: got '$out', want '$want'" >&2; return 1; }
}

# setup_jump_target: the jump target (see the header) on a bed whose hosts
# $JUMP_HOST and $JUMP_VIA are up. Idempotent: a key, known_hosts line, rule
# or running sshd that is already there is kept.
setup_jump_target() {
  local dir="$BED/jump" addr via_addr dh="" line pid
  addr=$(host_addr "$JUMP_HOST")
  via_addr=$(host_addr "$JUMP_VIA")
  [[ -e "/run/netns/bb-$JUMP_HOST" && -e "/run/netns/bb-$JUMP_VIA" ]] ||
    die "the jump target needs the hosts $JUMP_VIA and $JUMP_HOST"
  mkdir -p "$dir"
  [[ -s "$dir/ssh_host_ed25519_key" ]] ||
    ssh-keygen -q -t ed25519 -N '' -C "$TAG-jump-target" -f "$dir/ssh_host_ed25519_key"
  [[ "$SSHD_ONLY" == 1 ]] || dh="unix://$RUN/$JUMP_HOST.sock"
  write_sshd_config "$dir/sshd_config" "$addr:$JUMP_PORT" "$dir/ssh_host_ed25519_key" "$dir/sshd.pid" "$dh"
  "$SSHD" -t -f "$dir/sshd_config" || die "sshd rejects $dir/sshd_config"
  line="[$addr]:$JUMP_PORT $(cut -d' ' -f1,2 "$dir/ssh_host_ed25519_key.pub")"
  grep -qxF -- "$line" "$BED/known_hosts" || printf '%s\n' "$line" >>"$BED/known_hosts"
  # Only $JUMP_VIA may open a TCP connection to the port; anyone else's
  # SYN is dropped (the client times out). The rule lives in $JUMP_HOST's
  # network namespace and goes with it.
  local -a rule=(INPUT -p tcp --dport "$JUMP_PORT" ! -s "$via_addr" -m comment --comment "$TAG" -j DROP)
  nsenter --net="/run/netns/bb-$JUMP_HOST" -- iptables -w -C "${rule[@]}" 2>/dev/null ||
    nsenter --net="/run/netns/bb-$JUMP_HOST" -- iptables -w -A "${rule[@]}" ||
    die "cannot add the jump target's DROP rule in $JUMP_HOST (iptables)"
  pid=$(cat "$dir/sshd.pid" 2>/dev/null || true)
  if ! [[ "$pid" =~ ^[0-9]+$ ]] || ! alive "$pid"; then
    # sshd binds its port before it daemonizes: listening once this returns.
    nsenter --net="/run/netns/bb-$JUMP_HOST" --uts="$NSDIR/$JUMP_HOST.uts" \
      --mount="$NSDIR/$JUMP_HOST.mnt" -- "$SSHD" -f "$dir/sshd_config" -E "$dir/sshd.log" 9>&- ||
      die "the jump target's sshd did not start; see $dir/sshd.log"
  fi
  check_jump_target 2>"$dir/check.log" || { cat "$dir/check.log" >&2; die "the jump target does not work"; }
}

# The jump target answers through $JUMP_VIA, and a direct connection does not
# get through.
check_jump_target() {
  local addr via_addr out pc
  local -a opts
  addr=$(host_addr "$JUMP_HOST")
  via_addr=$(host_addr "$JUMP_VIA")
  # shellcheck disable=SC2016  # $0, $1 belong to the inner bash
  if timeout 2 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$addr" "$JUMP_PORT" 2>/dev/null; then
    echo "jump target $addr:$JUMP_PORT accepts a direct connection (no DROP rule?)" >&2
    return 1
  fi
  mapfile -t opts < <(ssh_opts)
  pc="ssh $(printf '%q ' "${opts[@]}")-W %h:%p root@$via_addr"
  out=$(ssh "${opts[@]}" -o "ProxyCommand=$pc" -p "$JUMP_PORT" "root@$addr" 'echo "$SSH_CONNECTION"' 2>&1) || {
    echo "ssh to the jump target through $JUMP_VIA failed: $out" >&2
    return 1
  }
  # "client_addr client_port server_addr server_port": came from $JUMP_VIA.
  [[ "$out" == "$via_addr "*" $addr $JUMP_PORT" ]] || {
    echo "jump target: SSH_CONNECTION is '$out', want '$via_addr PORT $addr $JUMP_PORT'" >&2
    return 1
  }
}

jump_env() {
  echo "BED_JUMP_TARGET_ADDR=$(host_addr "$JUMP_HOST")"
  echo "BED_JUMP_TARGET_PORT=$JUMP_PORT"
  echo "BED_JUMP_TARGET_HOST=$JUMP_HOST"
  echo "BED_JUMP_TARGET_SSHD_PIDFILE=$BED/jump/sshd.pid"
  echo "BED_JUMP_VIA=$JUMP_VIA"
}

wait_docker() { # SOCKET DEADLINE_S LOGFILE [PIDFILE]
  local i pid
  pid=$(cat "${4:-/dev/null}" 2>/dev/null || true)
  for ((i = 0; i < $2 * 10; i++)); do
    if [[ -S "$1" ]] && timeout 20 docker -H "unix://$1" version >/dev/null 2>&1; then return 0; fi
    if [[ -n "$pid" ]] && ! alive "$pid"; then
      echo "dockerd for $1 exited; last lines of $3:" >&2
      tail -n 15 "$3" >&2 || true
      return 1
    fi
    sleep 0.1
  done
  echo "dockerd at $1 did not answer in $2 s; last lines of $3:" >&2
  tail -n 15 "$3" >&2 || true
  return 1
}

# push_image IMAGE [CACHE]: one `docker save` of IMAGE (or the cached tarball
# of that image ID), streamed through tee into a `docker load` on every host at
# once. With CACHE=cache the tarball is kept in $CACHE_DIR for the next `up`.
push_image() {
  local image=$1 cache=${2:-} id h file="" tmp="" rc=0
  local -a fifos=() pids=() src=(docker save "$image")
  id=$(docker image inspect -f '{{.Id}}' "$image") || die "no image $image in the default engine"
  if [[ "$cache" == cache ]]; then
    file="$CACHE_DIR/${image//[^a-zA-Z0-9]/_}-${id#sha256:}.tar"
    if [[ -s "$file" ]]; then
      src=(cat "$file")
      file=""
      log "$image: from the cache"
    else
      mkdir -p "$CACHE_DIR"
      rm -f "$CACHE_DIR/${image//[^a-zA-Z0-9]/_}-"*.tar
      tmp="$file.tmp"
    fi
  fi
  for h in $names; do
    mkfifo "$RUN/$h.load"
    fifos+=("$RUN/$h.load")
    docker -H "unix://$RUN/$h.sock" load -q <"$RUN/$h.load" >>"$BED/$h/load.log" 2>&1 &
    pids+=($!)
  done
  "${src[@]}" | tee "${fifos[@]}" >"${tmp:-/dev/null}" || rc=1
  local i=0
  for h in $names; do
    wait "${pids[$i]}" || { rc=1; log "docker load of $image into $h failed:"; sed 's/^/    /' "$BED/$h/load.log" >&2; }
    i=$((i + 1))
  done
  rm -f "${fifos[@]}"
  ((rc == 0)) || { rm -f "$tmp"; die "could not load $image into every host"; }
  [[ -z "$tmp" ]] || mv "$tmp" "$file"
}

# A bed that is up, healthy and made with the same settings as this `up` would.
reusable() {
  [[ -e "$BED/bed.env" ]] || return 1
  local want_hosts want_dockerd want_torch
  want_hosts="$(host_names | tr '\n' ' ' | sed 's/ *$//')"
  want_dockerd=$([[ "$SSHD_ONLY" == 1 ]] && echo 0 || echo 1)
  want_torch=$([[ "$TORCH" == 1 ]] && echo "$TORCH_IMAGE")
  [[ "$(env_get BED_HOSTS | tr -d '"')" == "$want_hosts" &&
    "$(env_get BED_DOCKERD)" == "$want_dockerd" &&
    "$(env_get BED_TORCH_IMAGE)" == "$want_torch" &&
    "$(env_get BED_SSH_ADDR)" == "$LO_ADDR" && "$(env_get BED_SSH_PORT)" == "$LO_PORT" &&
    "$(env_get BED_IMAGE)" == "$IMAGE" ]] || return 1
  ((NHOSTS < 3)) || [[ -n "$(env_get BED_JUMP_TARGET_ADDR)" ]] || return 1
  (cmd_status >/dev/null 2>&1)
}

UP_OK=0
on_up_exit() {
  local rc=$?
  ((UP_OK)) && return 0
  log "up FAILED (exit $rc)"
  if [[ "${BARGE_BED_KEEP_ON_FAIL:-0}" == 1 ]]; then
    log "BARGE_BED_KEEP_ON_FAIL=1: leaving the half-made bed for inspection in $BED"
  else
    log "removing the half-made bed"
    clean || true
  fi
  exit "$rc"
}

cmd_up() {
  need_root
  [[ "$NHOSTS" =~ ^[0-9]+$ && "$NHOSTS" -le 250 ]] || die "BARGE_BED_HOSTS must be 0..250, not '$NHOSTS'"
  [[ "$SUBNET" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "BARGE_BED_SUBNET must be the first three octets of a /24, e.g. 10.77.0"
  local t
  for t in ip iptables nsenter unshare flock ssh ssh-keygen docker hostname setsid; do
    command -v "$t" >/dev/null 2>&1 || die "missing '$t'; run scripts/install-deps.sh"
  done
  [[ -x "$SSHD" ]] || die "no sshd; run scripts/install-deps.sh (openssh-server)"
  [[ "$SSHD_ONLY" == 1 ]] || command -v dockerd >/dev/null || die "no dockerd; run scripts/install-deps.sh (docker.io)"
  [[ -e /proc/self/ns/net && -e /proc/self/ns/mnt && -e /proc/self/ns/uts ]] || die "this kernel has no network/mount/UTS namespaces"
  check_bed_dir
  take_lock
  local t0=$SECONDS
  if [[ "${BARGE_BED_REUSE:-0}" == 1 ]] && reusable; then
    log "BARGE_BED_REUSE=1: the bed in $BED is up and matches; reusing it"
    home_keys
    local h engines=("")
    for h in $(host_names); do engines+=("$(env_get "BED_HOST_${h}_DOCKER_HOST")"); done
    remove_fault_records "${engines[@]}"
    return 0
  fi
  trap on_up_exit EXIT

  log "clearing stale state"
  clean
  local left
  left=$(leftovers)
  [[ -z "$left" ]] || die "cannot clear stale bed state:"$'\n'"$left"
  if (exec 3<>"/dev/tcp/$LO_ADDR/$LO_PORT") 2>/dev/null; then
    die "$LO_ADDR:$LO_PORT is already taken by something that is not the bed; set BARGE_BED_SSH_ADDR/BARGE_BED_SSH_PORT"
  fi
  if ip -4 -o addr show | awk '{print $4}' | grep -q "^${SUBNET//./\\.}\."; then
    die "$SUBNET.0/24 is already in use on this machine (ip addr); set BARGE_BED_SUBNET to a free /24"
  fi

  # The default engine (loopback host) and the bed's image.
  # 9>&-: daemons must not inherit the lock (they would hold it forever).
  "$ROOT/scripts/ensure-docker.sh" >&2 9>&- || die "no Docker engine (scripts/ensure-docker.sh failed)"
  local image_id
  image_id=$(progress "building $IMAGE (samples/build-demo-image.sh)" \
    "$ROOT/samples/build-demo-image.sh" "$IMAGE" 9>&- | tail -n1) || die "cannot build $IMAGE"
  if [[ "$TORCH" == 1 ]]; then
    progress "building $TORCH_IMAGE (tests/bed/build-torch-image.sh: installs python3-torch if missing, cuts the image)" \
      "$HERE/build-torch-image.sh" >&2 9>&- || die "cannot build $TORCH_IMAGE"
  fi

  log "keys and configuration"
  mkdir -p "$BED" "$NSDIR" /run/sshd
  chmod 0755 /run/sshd
  touch "$BED/.$TAG"
  echo "$BED" >"$RUN/bed-dir"
  # Namespace files must sit on a mount that is not shared.
  { mount --bind "$NSDIR" "$NSDIR" && mount --make-private "$NSDIR"; } || die "cannot mount $NSDIR (mount namespaces unavailable?)"
  if [[ "$SSHD_ONLY" != 1 && NHOSTS -gt 0 ]]; then
    local mode=$DATA_MODE
    if [[ "$mode" == auto ]]; then
      mode=tmpfs
      if [[ "$TORCH" == 1 ]]; then
        local need_mb avail_mb
        need_mb=$(( (NHOSTS + 1) * $(docker image inspect -f '{{.Size}}' "$TORCH_IMAGE") / 1000000 ))
        avail_mb=$(awk '/^MemAvailable:/ {print int($2 / 1024)}' /proc/meminfo)
        ((need_mb * 2 < avail_mb)) || mode=disk
      fi
    fi
    if [[ "$mode" == tmpfs ]]; then
      mkdir -p "$RUN/data"
      mount -t tmpfs -o mode=0711,size=50% bb-data "$RUN/data"
      touch "$RUN/data.tmpfs"
    fi
    log "dockerd data on $mode"
  fi
  ssh-keygen -q -t ed25519 -N '' -C "$TAG-client" -f "$BED/id_ed25519"
  cp "$BED/id_ed25519.pub" "$BED/authorized_keys"
  printf 'nameserver 127.0.0.1\n' >"$BED/resolv.conf"
  : >"$BED/no-docker.sock"
  {
    printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n'
    printf '%s\tbb-gateway\n' "$SUBNET.1"
    local h
    for h in $(host_names); do printf '%s\t%s\n' "$(host_addr "$h")" "$h"; done
  } >"$BED/etc-hosts"
  : >"$BED/known_hosts"

  # Loopback host.
  mkdir -p "$BED/lo"
  ssh-keygen -q -t ed25519 -N '' -C "$TAG-lo" -f "$BED/lo/ssh_host_ed25519_key"
  # SLURM_CONF names where tests/bed/slurm.sh puts the bed's Slurm config,
  # so that a Slurm client run over ssh to lo finds it once Slurm is up: set
  # here once, rather than by reloading this sshd under the tests.
  write_sshd_config "$BED/lo/sshd_config" "$LO_ADDR:$LO_PORT" "$BED/lo/ssh_host_ed25519_key" "$BED/lo/sshd.pid" \
    "" "SLURM_CONF=$BED/slurm/slurm.conf"
  printf '[%s]:%s %s\n' "$LO_ADDR" "$LO_PORT" "$(cut -d' ' -f1,2 "$BED/lo/ssh_host_ed25519_key.pub")" >>"$BED/known_hosts"
  "$SSHD" -t -f "$BED/lo/sshd_config" || die "sshd rejects $BED/lo/sshd_config"
  "$SELF" _persist "$NSDIR/lo.mnt" "" "$SELF" _lo_init 9>&- \
    || die "loopback sshd did not start; see $BED/lo/sshd.log"

  # Namespace hosts.
  local names
  names=$(host_names)
  if ((NHOSTS > 0)); then
    log "$NHOSTS namespace hosts on $BRIDGE ($SUBNET.0/24)$([[ "$SSHD_ONLY" == 1 ]] && echo ', sshd only')"
    { ip link add "$BRIDGE" type bridge && ip addr add "$SUBNET.1/24" dev "$BRIDGE" &&
      ip link set "$BRIDGE" up; } || die "cannot make the bridge $BRIDGE"
    # br_netfilter + dockerd's FORWARD DROP policy: let the bridge forward.
    iptables -w -I FORWARD 1 -i "$BRIDGE" -o "$BRIDGE" -m comment --comment "$TAG" -j ACCEPT \
      || die "cannot add the FORWARD rule for $BRIDGE (iptables)"
    local batch=""
    for h in $names; do
      batch+="netns add bb-$h"$'\n'
      batch+="link add bb-$h type veth peer name eth0 netns bb-$h"$'\n'
      batch+="link set bb-$h master $BRIDGE up"$'\n'
    done
    ip -batch - <<<"$batch" || die "cannot make the network namespaces (ip -batch failed)"
    for h in $names; do
      mkdir -p "$BED/$h"
      ssh-keygen -q -t ed25519 -N '' -C "$TAG-$h" -f "$BED/$h/ssh_host_ed25519_key" &
    done
    wait
    for h in $names; do
      local dh=""
      [[ "$SSHD_ONLY" == 1 ]] || dh="unix://$RUN/$h.sock"
      write_sshd_config "$BED/$h/sshd_config" "$(host_addr "$h"):22" "$BED/$h/ssh_host_ed25519_key" "$BED/$h/sshd.pid" "$dh"
      echo '{}' >"$BED/$h/daemon.json"
      printf '%s,%s %s\n' "$h" "$(host_addr "$h")" "$(cut -d' ' -f1,2 "$BED/$h/ssh_host_ed25519_key.pub")" >>"$BED/known_hosts"
    done
    local -A pid_of=()
    for h in $names; do
      nsenter --net="/run/netns/bb-$h" -- \
        "$SELF" _persist "$NSDIR/$h.mnt" "$NSDIR/$h.uts" \
        "$SELF" _host_init "$h" "$(host_addr "$h")" >"$BED/$h/init.log" 2>&1 9>&- &
      pid_of[$h]=$!
    done
    local failed=""
    for h in $names; do
      wait "${pid_of[$h]}" || failed+=" $h"
    done
    if [[ -n "$failed" ]]; then
      for h in $failed; do
        log "host $h failed to start:"
        sed 's/^/    /' "$BED/$h/init.log" "$BED/$h/sshd.log" 2>/dev/null >&2 || true
      done
      die "namespace hosts failed:$failed"
    fi
  fi

  # Images into every host's engine, once every dockerd answers.
  if [[ "$SSHD_ONLY" != 1 && NHOSTS -gt 0 ]]; then
    log "waiting for $NHOSTS dockerds"
    local -A wpid=()
    for h in $names; do
      wait_docker "$RUN/$h.sock" 60 "$BED/$h/dockerd.log" "$BED/$h/dockerd.launched" 2>"$BED/$h/wait.log" &
      wpid[$h]=$!
    done
    local failed=""
    for h in $names; do
      wait "${wpid[$h]}" || { failed+=" $h"; cat "$BED/$h/wait.log" >&2; }
    done
    [[ -z "$failed" ]] || die "dockerd did not come up on:$failed"
    progress "loading $IMAGE into $NHOSTS dockerds" push_image "$IMAGE"
    [[ "$TORCH" != 1 ]] || progress "loading $TORCH_IMAGE into $NHOSTS dockerds" push_image "$TORCH_IMAGE" cache
  fi

  # End to end: key auth, known_hosts, hostname, DOCKER_HOST of every host.
  log "checking ssh to every host"
  check_ssh lo "$LO_ADDR" "$LO_PORT" "$(hostname)" "" 2>"$BED/lo/check.log" || { cat "$BED/lo/check.log" >&2; die "loopback host does not answer over ssh"; }
  local -A chk=()
  for h in $names; do
    local dh=""
    [[ "$SSHD_ONLY" == 1 ]] || dh="unix://$RUN/$h.sock"
    check_ssh "$h" "$(host_addr "$h")" 22 "$h" "$dh" 2>"$BED/$h/check.log" &
    chk[$h]=$!
  done
  local failed=""
  for h in $names; do
    wait "${chk[$h]}" || { failed+=" $h"; cat "$BED/$h/check.log" >&2; }
  done
  [[ -z "$failed" ]] || die "ssh check failed on:$failed"
  if ((NHOSTS >= 3)); then
    log "jump target $(host_addr "$JUMP_HOST"):$JUMP_PORT in $JUMP_HOST, reachable through $JUMP_VIA only"
    setup_jump_target
  fi

  write_env "$image_id" "$names"
  UP_OK=1
  trap - EXIT
  log "up in $((SECONDS - t0))s: loopback $LO_ADDR:$LO_PORT + $NHOSTS namespace hosts; $BED/bed.env"
}

write_env() {
  local image_id=$1 names=$2 h tmp="$BED/bed.env.tmp"
  {
    echo "# barge test bed, written by tests/bed/bed.sh up at $(date -Is)"
    echo "# KEY=VALUE lines, read by tests/support/bed_env.cc; also sourceable by sh."
    echo "BED_DIR=$BED"
    echo "BED_SCRIPT=$SELF"
    echo "BED_SSH_ADDR=$LO_ADDR"
    echo "BED_SSH_PORT=$LO_PORT"
    echo "BED_SSH_USER=root"
    echo "BED_SSH_KEY=$BED/id_ed25519"
    echo "BED_KNOWN_HOSTS=$BED/known_hosts"
    echo "BED_IMAGE=$IMAGE"
    echo "BED_IMAGE_ID=$image_id"
    echo "BED_DOCKER_HOST=unix:///var/run/docker.sock"
    echo "BED_LO_SSHD_PIDFILE=$BED/lo/sshd.pid"
    echo "BED_DOCKERD=$([[ "$SSHD_ONLY" == 1 ]] && echo 0 || echo 1)"
    [[ "$TORCH" == 1 ]] && echo "BED_TORCH_IMAGE=$TORCH_IMAGE"
    echo "BED_BRIDGE=$BRIDGE"
    echo "BED_SUBNET=$SUBNET.0/24"
    echo "BED_GATEWAY=$SUBNET.1"
    echo "BED_HOSTS=\"$(tr '\n' ' ' <<<"$names" | sed 's/ *$//')\""
    for h in $names; do
      echo "BED_HOST_${h}_ADDR=$(host_addr "$h")"
      echo "BED_HOST_${h}_PORT=22"
      echo "BED_HOST_${h}_HOSTNAME=$h"
      # In sshd-only mode no daemon listens there: docker calls fail clearly.
      echo "BED_HOST_${h}_DOCKER_HOST=unix://$RUN/$h.sock"
      echo "BED_HOST_${h}_NETNS=bb-$h"
      echo "BED_HOST_${h}_VETH=bb-$h"
      echo "BED_HOST_${h}_SSHD_PIDFILE=$BED/$h/sshd.pid"
      [[ "$SSHD_ONLY" == 1 ]] || echo "BED_HOST_${h}_DOCKERD_PIDFILE=$BED/$h/dockerd.pid"
    done
    [[ ! -e "$BED/jump/sshd_config" ]] || jump_env
  } >"$tmp"
  mv "$tmp" "$BED/bed.env"
}

# ---------------------------------------------------------------------------
# status, exec, ssh

pid_state() { # PIDFILE -> "pid N up" / "down"
  local p
  p=$(cat "$1" 2>/dev/null || true)
  if [[ "$p" =~ ^[0-9]+$ ]] && alive "$p"; then echo "pid $p up"; else echo "DOWN"; fi
}

cmd_status() {
  local env="$BED/bed.env"
  if [[ ! -e "$env" ]]; then
    echo "bed: down (no $env)"
    local left
    left=$(leftovers 2>/dev/null || true)
    [[ -z "$left" ]] || printf 'leftovers:\n%s\n' "$left"
    return 3
  fi
  local bad=0 h s names dockerd
  names=$(sed -n 's/^BED_HOSTS="\?\([^"]*\)"\?$/\1/p' "$env")
  dockerd=$(sed -n 's/^BED_DOCKERD=//p' "$env")
  LO_ADDR=$(sed -n 's/^BED_SSH_ADDR=//p' "$env")
  LO_PORT=$(sed -n 's/^BED_SSH_PORT=//p' "$env")
  SUBNET=$(sed -n 's/^BED_GATEWAY=\(.*\)\.1$/\1/p' "$env")
  SUBNET=${SUBNET:-10.77.0}
  echo "bed: $env ($(sed -n 's/^# .* at //p' "$env" | head -n1))"
  s=$(pid_state "$BED/lo/sshd.pid")
  [[ "$s" == DOWN ]] && bad=1
  local d="up"
  timeout 10 docker version >/dev/null 2>&1 || { d=DOWN; bad=1; }
  printf '  %-4s %-18s sshd %-14s docker(default) %s\n' lo "$LO_ADDR:$LO_PORT" "$s" "$d"
  for h in $names; do
    s=$(pid_state "$BED/$h/sshd.pid")
    [[ "$s" == DOWN ]] && bad=1
    if [[ "$dockerd" == 1 ]]; then
      d=$(pid_state "$BED/$h/dockerd.pid")
      if [[ "$d" != DOWN ]] && ! timeout 10 docker -H "unix://$RUN/$h.sock" version >/dev/null 2>&1; then
        d="$d, NOT ANSWERING"
      fi
      [[ "$d" == *DOWN* || "$d" == *NOT* ]] && bad=1
    else
      d="(sshd-only bed)"
    fi
    printf '  %-4s %-18s sshd %-14s dockerd %s\n' "$h" "$(host_addr "$h"):22" "$s" "$d"
  done
  local jump
  jump=$(sed -n 's/^BED_JUMP_TARGET_ADDR=//p' "$env")
  if [[ -n "$jump" ]]; then
    s=$(pid_state "$BED/jump/sshd.pid")
    [[ "$s" == DOWN ]] && bad=1
    printf '  %-4s %-18s sshd %-14s only through %s\n' jump "$jump:$(sed -n 's/^BED_JUMP_TARGET_PORT=//p' "$env")" \
      "$s" "$(sed -n 's/^BED_JUMP_VIA=//p' "$env")"
  fi
  if [[ -n "$names" ]]; then
    if ip link show "$BRIDGE" >/dev/null 2>&1; then echo "  bridge $BRIDGE up"; else echo "  bridge $BRIDGE MISSING"; bad=1; fi
    if iptables -w -S FORWARD | grep -qF -- "$TAG"; then echo "  FORWARD rule present"; else echo "  FORWARD rule MISSING"; bad=1; fi
  fi
  return $bad
}

# exec NAME CMD...: run CMD in namespace host NAME (network, UTS, mount).
cmd_exec() {
  need_root
  local h=${1:?usage: bed.sh exec NAME CMD...}
  shift
  [[ -e "/run/netns/bb-$h" ]] || die "no bed host $h"
  exec nsenter --net="/run/netns/bb-$h" --uts="$NSDIR/$h.uts" --mount="$NSDIR/$h.mnt" -- "$@"
}

env_get() { sed -n "s/^$1=//p" "$BED/bed.env" 2>/dev/null | head -n1; }

# _jump_target: adds the jump target to a bed that is up but was made
# without it (by an older bed.sh). Idempotent.
cmd__jump_target() {
  need_root
  check_bed_dir
  take_lock
  [[ -e "$BED/bed.env" ]] || die "the bed is down (no $BED/bed.env)"
  [[ "$(env_get BED_DOCKERD)" == 1 ]] || SSHD_ONLY=1
  SUBNET=$(env_get BED_GATEWAY)
  SUBNET=${SUBNET%.1}
  setup_jump_target
  if ! grep -q '^BED_JUMP_TARGET_ADDR=' "$BED/bed.env"; then
    { cat "$BED/bed.env"; jump_env; } >"$BED/bed.env.tmp"
    mv "$BED/bed.env.tmp" "$BED/bed.env"
  fi
  log "jump target $(host_addr "$JUMP_HOST"):$JUMP_PORT up, reachable through $JUMP_VIA only"
}

# home_keys: every sshd of the bed also reads the login user's own
# ~/.ssh/authorized_keys (each namespace host has its own /root), as a host
# with OpenSSH's defaults does: image_pull: push's relay adds its keys
# there. For a bed made by an older bed.sh: the line is changed and the
# sshd told to read its config again (SIGHUP). Idempotent.
home_keys() {
  local conf pid
  for conf in "$BED"/*/sshd_config; do
    [[ -e "$conf" ]] || continue
    grep -q '^AuthorizedKeysFile .* \.ssh/authorized_keys$' "$conf" && continue
    sed -i 's|^AuthorizedKeysFile .*|& .ssh/authorized_keys|' "$conf"
    pid=$(cat "$(dirname "$conf")/sshd.pid" 2>/dev/null) || continue
    [[ "$pid" =~ ^[0-9]+$ ]] && kill -HUP "$pid" 2>/dev/null || true
  done
}

# _home_keys: home_keys on a bed that is up.
cmd__home_keys() {
  need_root
  check_bed_dir
  take_lock
  [[ -e "$BED/bed.env" ]] || die "the bed is down (no $BED/bed.env)"
  home_keys
  log "every sshd of the bed reads ~/.ssh/authorized_keys too"
}

cmd_ssh() {
  local h=${1:?usage: bed.sh ssh NAME [CMD...]} addr port=22
  shift
  [[ -e "$BED/bed.env" ]] || die "the bed is down (no $BED/bed.env)"
  local -a opts
  mapfile -t opts < <(ssh_opts)
  if [[ "$h" == lo ]]; then
    addr=$(env_get BED_SSH_ADDR)
    port=$(env_get BED_SSH_PORT)
  else
    addr=$(env_get "BED_HOST_${h}_ADDR")
    [[ -n "$addr" ]] || die "no bed host $h"
  fi
  exec ssh "${opts[@]}" -p "$port" "root@$addr" "$@"
}

case "${1:-}" in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  exec) shift; cmd_exec "$@" ;;
  ssh) shift; cmd_ssh "$@" ;;
  _persist) shift; cmd__persist "$@" ;;
  _lo_init) cmd__lo_init ;;
  _host_init) shift; cmd__host_init "$@" ;;
  _jump_target) cmd__jump_target ;;
  _home_keys) cmd__home_keys ;;
  *)
    sed -n '2,8p' "$SELF" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
