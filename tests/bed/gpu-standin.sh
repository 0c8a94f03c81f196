#!/usr/bin/env bash
# An engine-side GPU stand-in for one namespace host of the test bed, so that
# a test can see the GPU requests that reach the real engine (not a docker
# shim's echo of its own arguments):
#
#   tests/bed/gpu-standin.sh on HOST [GPUS]   turn it on for bed host HOST (h1..)
#   tests/bed/gpu-standin.sh off HOST         undo `on` (safe to repeat; a no-op
#                                             where `on` never ran)
#   tests/bed/gpu-standin.sh requests HOST    print what it recorded, one line
#                                             per GPU container started
#
# dockerd 20.10 registers its "nvidia" device driver at start when an
# executable named nvidia-container-runtime-hook is on its PATH
# (shared/TESTBED.md, "Added 2026-11-27"). `on` binds a directory of its own
# over /usr/local/sbin (empty on this machine, first on dockerd's and an ssh
# session's PATH) in HOST's mount namespace only, holding a stand-in hook,
# and restarts HOST's dockerd with the same command line and environment:
# the engine then accepts `--gpus` and the Engine API's DeviceRequests
# unchanged and calls the hook (through runc) at each GPU container's
# prestart. The stand-in hook
#   - records, in $BED/HOST/gpu-standin/requests.log, the container's name,
#     the NVIDIA_VISIBLE_DEVICES the engine derived, and HostConfig's
#     DeviceRequests as the engine stored them (its hostconfig.json, what
#     `docker inspect` shows) as a tab-separated line;
#   - puts a stand-in nvidia-smi in the container (what the real hook does
#     with the driver's tools): `nvidia-smi -L` lists the visible GPUs as the
#     captured H100 (tests/data/nvidia-smi), GPU i's UUID ending in i;
#   - exits 0: the container starts, without any GPU.
# `off` restarts HOST's dockerd as it was, without the bind. A restart stops
# every container of that engine: `on` refuses while HOST's engine runs one;
# `off` restores the engine all the same (a failed test's leftovers stop). Each takes about a second or two (dockerd on the bed's tmpfs).
# Needs root; the bed up (tests/bed/bed.sh).
set -euo pipefail

BED_LOG_NAME=gpu-standin
# shellcheck source=tests/bed/lib.sh
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib.sh"
# The restarted dockerd lives on: it must not hold the caller's descriptors
# (a bed lock's fd, a test's pipes).
close_inherited_fds

BED=${BARGE_BED_DIR:-/tmp/barge-bed}
NSDIR=/run/barge-bed/ns
SBIN=/usr/local/sbin

env_get() { sed -n "s/^$1=//p" "$BED/bed.env" 2>/dev/null | head -n1; }

host_vars() {
  H=${1:?usage: gpu-standin.sh on|off|requests HOST}
  [[ "$H" =~ ^h[0-9]+$ ]] || die "not a namespace bed host: '$H'"
  [[ -e "$BED/bed.env" ]] || die "the bed is down (no $BED/bed.env)"
  PIDFILE=$(env_get "BED_HOST_${H}_DOCKERD_PIDFILE")
  SOCK=$(env_get "BED_HOST_${H}_DOCKER_HOST")
  [[ -n "$PIDFILE" && -n "$SOCK" ]] || die "$H has no dockerd in $BED/bed.env"
  DIR=$BED/$H/gpu-standin
}

in_host() { nsenter --net="/run/netns/bb-$H" --uts="$NSDIR/$H.uts" --mount="$NSDIR/$H.mnt" -- "$@"; }

# No container may run on the engine a restart would stop.
check_idle() {
  local running
  running=$(DOCKER_HOST=$SOCK timeout 20 docker ps -q) || die "$H's engine does not answer"
  [[ -z "$running" ]] || die "$H's engine runs containers ($(echo $running)): not restarting it"
}

# Saves the running dockerd's argv and environment (NUL-separated) once.
save_dockerd() {
  local pid
  pid=$(cat "$PIDFILE" 2>/dev/null) && alive "$pid" || die "$H's dockerd is not running ($PIDFILE)"
  [[ -e "$DIR/dockerd.argv" ]] && return 0
  cp "/proc/$pid/cmdline" "$DIR/dockerd.argv"
  cp "/proc/$pid/environ" "$DIR/dockerd.env"
}

stop_dockerd() {
  local pid i
  pid=$(cat "$PIDFILE" 2>/dev/null) || return 0
  alive "$pid" || return 0
  kill -TERM "$pid"
  for ((i = 0; i < 300; i++)); do
    alive "$pid" || return 0
    sleep 0.1
  done
  die "$H's dockerd (pid $pid) did not stop in 30 s"
}

# Starts dockerd in HOST's namespaces with the saved argv and environment.
start_dockerd() {
  local -a argv envs
  mapfile -d '' -t argv <"$DIR/dockerd.argv"
  mapfile -d '' -t envs <"$DIR/dockerd.env"
  rm -f "$PIDFILE"
  # (A simple command, not in_host: the background child execs it, and no
  # shell stays behind waiting on dockerd.)
  nsenter --net="/run/netns/bb-$H" --uts="$NSDIR/$H.uts" --mount="$NSDIR/$H.mnt" -- \
    env -i "${envs[@]}" setsid "${argv[@]}" </dev/null >>"$BED/$H/dockerd.log" 2>&1 &
  local i
  for ((i = 0; i < 300; i++)); do
    if [[ -S "${SOCK#unix://}" ]] && DOCKER_HOST=$SOCK timeout 20 docker version >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  tail -n 15 "$BED/$H/dockerd.log" >&2 || true
  die "$H's dockerd did not answer in 30 s after its restart"
}

write_hook() { # GPUS DATA_ROOT
  local gpus=$1 data=$2
  cat >"$DIR/sbin/nvidia-container-runtime-hook" <<EOF
#!/bin/sh
# Stand-in nvidia-container-runtime-hook of the barge test bed
# (tests/bed/gpu-standin.sh): runc runs it as "HOOK prestart" with the
# container's OCI state on stdin. Records the request, gives the container a
# stand-in nvidia-smi, exits 0 (the container starts without a GPU).
[ "\${1:-}" = prestart ] || exit 0
state=\$(cat)
id=\$(printf '%s' "\$state" | sed -n 's/.*"id":"\\([0-9a-f]*\\)".*/\\1/p')
bundle=\$(printf '%s' "\$state" | sed -n 's/.*"bundle":"\\([^"]*\\)".*/\\1/p')
root=\$(sed -n 's/.*"root":{"path":"\\([^"]*\\)".*/\\1/p' "\$bundle/config.json")
visible=\$(grep -o '"NVIDIA_VISIBLE_DEVICES=[^"]*"' "\$bundle/config.json" | sed 's/^"NVIDIA_VISIBLE_DEVICES=//; s/"\$//')
name=\$(sed -n 's/.*"Name":"\\/\\([^"]*\\)".*/\\1/p' "$data/containers/\$id/config.v2.json")
# HostConfig.DeviceRequests: the JSON array after the key, brackets matched.
requests=\$(awk '{
  i = index(\$0, "\\"DeviceRequests\\":"); if (!i) { print "none"; exit }
  s = substr(\$0, i + 17); d = 0; q = 0
  for (j = 1; j <= length(s); j++) {
    c = substr(s, j, 1)
    if (q) { if (c == "\\\\") j++; else if (c == "\\"") q = 0; continue }
    if (c == "\\"") q = 1; else if (c == "[" || c == "{") d++; else if (c == "]" || c == "}") { d--; if (d == 0) break }
  }
  print substr(s, 1, j); exit }' "$data/containers/\$id/hostconfig.json")
printf '%s\\t%s\\t%s\\n' "\$name" "\$visible" "\$requests" >>"$DIR/requests.log"
if [ "\$visible" = all ]; then visible=\$(seq -s, 0 $((gpus - 1))); fi
mkdir -p "\$root/usr/bin"
{
  echo '#!/bin/sh'
  echo '# nvidia-smi stand-in put here by the test bed GPU stand-in: -L only.'
  echo '[ "\$*" = -L ] || { echo "nvidia-smi stand-in: only -L" >&2; exit 2; }'
  n=0
  for d in \$(echo "\$visible" | tr , ' '); do
    echo "echo 'GPU \$n: NVIDIA H100 80GB HBM3 (UUID: GPU-32f94187-cb0a-290d-513a-256680d526a\$d)'"
    n=\$((n + 1))
  done
} >"\$root/usr/bin/nvidia-smi"
chmod 755 "\$root/usr/bin/nvidia-smi"
exit 0
EOF
  chmod 755 "$DIR/sbin/nvidia-container-runtime-hook"
}

cmd_on() {
  need_root_here
  host_vars "$1"
  local gpus=${2:-2} data
  [[ ! -e "$DIR/on" ]] || die "the GPU stand-in is on for $H already (gpu-standin.sh off $H)"
  check_idle
  mkdir -p "$DIR/sbin"
  save_dockerd
  # --data-root from the saved command line: where the hook finds the
  # engine's record of each container.
  data=$(tr '\0' '\n' <"$DIR/dockerd.argv" | sed -n '/^--data-root$/{n;p;}; s/^--data-root=//p' | head -n1)
  [[ -n "$data" ]] || die "$H's dockerd has no --data-root"
  tr '\0' '\n' <"$DIR/dockerd.env" | grep -q "^PATH=\(.*:\)\?$SBIN\(:\|$\)" ||
    die "$SBIN is not on $H's dockerd PATH: the engine would not find the hook"
  write_hook "$gpus" "$data"
  : >"$DIR/requests.log"
  touch "$DIR/on"
  stop_dockerd
  in_host mount --bind "$DIR/sbin" "$SBIN"
  start_dockerd
}

cmd_off() {
  need_root_here
  host_vars "$1"
  [[ -e "$DIR/dockerd.argv" ]] || { rm -rf "$DIR"; return 0; }
  # Undo whatever the engine runs (a failed test's leftovers stop: its own
  # check still sees them, stopped).
  local running
  running=$(DOCKER_HOST=$SOCK timeout 20 docker ps -q 2>/dev/null || true)
  [[ -z "$running" ]] || log "$H's engine runs containers ($(echo $running)): they stop with the restart"
  stop_dockerd
  if [[ -e "$DIR/on" ]] && in_host mountpoint -q "$SBIN"; then in_host umount "$SBIN"; fi
  start_dockerd
  rm -rf "$DIR"
}

cmd_requests() {
  host_vars "$1"
  cat "$DIR/requests.log" 2>/dev/null || true
}

need_root_here() { ((EUID == 0)) || die "needs root (namespaces, mounts)"; }

case "${1:-}" in
  on) shift; cmd_on "$@" ;;
  off) shift; cmd_off "$@" ;;
  requests) shift; cmd_requests "$@" ;;
  *)
    sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
