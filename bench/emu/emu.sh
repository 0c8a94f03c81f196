#!/usr/bin/env bash
# bench/emu/emu.sh: EMULATED hosts for the scale bench and the emulated-hosts
# test. N hosts are N loopback addresses (127.1.x.y: all of 127/8 reaches lo
# on Linux, nothing to set up) served by ONE OpenSSH sshd of its own on
# 0.0.0.0:$BARGE_EMU_PORT (default 2200; only logins from 127/8 are allowed)
# with MaxStartups and MaxSessions raised. Every command a client runs
# goes through bench/emu/enter.cc (built here with c++; root's login shell in
# that sshd's own /etc/passwd), which gives the host its own /tmp
# ($BARGE_EMU_DIR/hosts/ADDR) in a private mount namespace. The container
# engine is bench/emu/fake-docker (a job uses it through docker_command:): it
# measures barge's controller, not Docker.
#
# With --api the hosts also have an EMULATED Docker Engine API, as a host
# with plain `docker` has: bench/emu/fake-engine.py (one process) serves one
# unix socket per host, $BARGE_EMU_DIR/hosts-api/ADDR/docker.sock, keeping
# the containers in fake-docker's on-disk layout in the host's /tmp; each
# host's commands see DOCKER_HOST=unix://that socket and a `docker` on PATH
# that is fake-docker. A job written then has no docker_command:, so barge
# takes its main path: the Engine API over the SSH session (a
# direct-streamlocal channel per request), the CLI only where barge still
# uses it (hold release, the watchdog).
#
#   bench/emu/emu.sh up N [--api]  # replaces an emulation that is up; writes emu.env
#   bench/emu/emu.sh down          # stops sshd, the API server and every process of the emulation
#   bench/emu/emu.sh job N FILE [WORKER_SECONDS]   # writes a head/worker job file:
#       with docker_command: fake-docker, or, when the emulation is up with
#       --api (or given --api, or BARGE_EMU_ENGINE=api), plain `docker`
#       (BARGE_EMU_ENGINE=cli: fake-docker's docker_command: all the same)
#   bench/emu/emu.sh pids          # the emulation's processes on the hosts' side
#
# emu.env (in $BARGE_EMU_DIR, default /var/tmp/barge-emu; not under /tmp, which
# each host replaces) sets EMU_KEY, EMU_KNOWN_HOSTS, EMU_PORT, EMU_DOCKER,
# EMU_ADDRS (a file, one address a line) and EMU_API (1 with --api; the API
# server's pid is then in $BARGE_EMU_DIR/engine.ready). The sshd runs in a mount namespace
# whose /root is empty and whose /etc/passwd gives root the shell `enter`,
# so no bash and no ~/.bashrc run for the hosts' commands. Needs root.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
EMU=${BARGE_EMU_DIR:-/var/tmp/barge-emu}
PORT=${BARGE_EMU_PORT:-2200}

addr() {  # $1 = host number from 1: 127.1.X.Y, 200 hosts per X
  echo "127.1.$(( ($1 - 1) / 200 )).$(( ($1 - 1) % 200 + 1 ))"
}

# Every process on the hosts' side carries BARGE_EMU_SIDE=$EMU in its
# environment (sshd's SetEnv, which nothing on the client's side sets): the
# sessions' shells, the fake engine's container processes, barge's
# watchdogs on the hosts.
emu_pids() {
  grep -lzxF "BARGE_EMU_SIDE=$EMU" /proc/[0-9]*/environ 2>/dev/null |
    sed 's|^/proc/\([0-9]*\)/environ$|\1|' || true
}

down() {
  local p
  for p in "$EMU/engine.ready" "$EMU/engine.pid"; do
    if [[ -f $p ]]; then kill "$(cat "$p")" 2>/dev/null || true; fi
  done
  if [[ -f $EMU/sshd.pid ]]; then kill "$(cat "$EMU/sshd.pid")" 2>/dev/null || true; fi
  if [[ -f $EMU/listener.pid ]]; then kill "$(cat "$EMU/listener.pid")" 2>/dev/null || true; fi
  local pids
  pids=$(emu_pids)
  # shellcheck disable=SC2086
  [[ -z $pids ]] || kill -9 $pids 2>/dev/null || true
  rm -rf "$EMU"
}

up() {
  local n=$1 api=${2:-} i a
  command -v sshd >/dev/null || [[ -x /usr/sbin/sshd ]] || { echo "emu: sshd missing (openssh-server)" >&2; exit 1; }
  down
  mkdir -p "$EMU/root" "$EMU/hosts" "$EMU/started" /run/sshd
  c++ -O2 -o "$EMU/enter" "$HERE/enter.cc"
  # The hosts see their own /tmp: a checkout under /tmp is not theirs, so
  # the fake engine runs from the emulation's directory.
  install -m 0755 "$HERE/fake-docker" "$EMU/fake-docker"
  if [[ -n $api ]]; then
    # The `docker` of the hosts' commands (first on their PATH, enter.cc).
    mkdir -p "$EMU/bin" "$EMU/hosts-api"
    ln -s "$EMU/fake-docker" "$EMU/bin/docker"
  fi
  ssh-keygen -q -t ed25519 -N '' -f "$EMU/host_ed25519" -C barge-emu-host
  ssh-keygen -q -t ed25519 -N '' -f "$EMU/client_ed25519" -C barge-emu-client
  cp "$EMU/client_ed25519.pub" "$EMU/authorized_keys"
  sed "s|^\(root:[^:]*:[^:]*:[^:]*:[^:]*:[^:]*\):.*|\1:$EMU/enter|" /etc/passwd >"$EMU/passwd"
  grep -q "^root:.*:$EMU/enter\$" "$EMU/passwd" || { echo "emu: cannot set root's shell in a copy of /etc/passwd" >&2; exit 1; }
  local hostkey; hostkey=$(cut -d' ' -f1,2 "$EMU/host_ed25519.pub")
  : >"$EMU/addrs"; : >"$EMU/known_hosts"
  for ((i = 1; i <= n; i++)); do
    a=$(addr "$i")
    echo "$a" >>"$EMU/addrs"
    echo "[$a]:$PORT $hostkey" >>"$EMU/known_hosts"
    mkdir -m 1777 "$EMU/hosts/$a"
  done
  cat >"$EMU/sshd_config" <<CFG
Port $PORT
ListenAddress 0.0.0.0
HostKey $EMU/host_ed25519
PidFile $EMU/sshd.pid
AuthorizedKeysFile $EMU/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
UseDNS no
MaxStartups 4000
MaxSessions 1000
LogLevel ERROR
AllowUsers root@127.0.0.0/8
SetEnv BARGE_EMU_DIR=$EMU BARGE_EMU_SIDE=$EMU${api:+ BARGE_EMU_API=1}
CFG
  /usr/sbin/sshd -t -f "$EMU/sshd_config"
  setsid unshare -m --propagation private sh -c \
    'mount --bind "$0/root" /root && mount --bind "$0/passwd" /etc/passwd && exec /usr/sbin/sshd -D -f "$0/sshd_config" -E "$0/sshd.log"' "$EMU" \
    </dev/null >"$EMU/listener.log" 2>&1 &
  echo $! >"$EMU/listener.pid"
  cat >"$EMU/emu.env" <<ENV
EMU_DIR=$EMU
EMU_PORT=$PORT
EMU_KEY=$EMU/client_ed25519
EMU_KNOWN_HOSTS=$EMU/known_hosts
EMU_DOCKER=$EMU/fake-docker
EMU_ADDRS=$EMU/addrs
EMU_API=${api:+1}
ENV
  if [[ -n $api ]]; then
    # The engine API of every host: one process, not on the hosts' side
    # (no BARGE_EMU_SIDE: `pids` lists what is left of jobs, and the
    # containers' processes it starts carry it).
    local py=/usr/bin/python3
    [[ -x $py ]] || py=python3
    setsid "$py" "$HERE/fake-engine.py" "$EMU" </dev/null >"$EMU/engine.log" 2>&1 &
    echo $! >"$EMU/engine.pid"
    local t=0
    until [[ -s $EMU/engine.ready ]]; do
      if ((++t > 600)) || ! kill -0 "$(cat "$EMU/engine.pid")" 2>/dev/null; then
        echo "emu: the engine API server did not start:" >&2; cat "$EMU/engine.log" >&2; exit 1
      fi
      sleep 0.05
    done
  fi
  # Ready when the first and the last host answer a command.
  local tries=0 first last
  first=$(addr 1); last=$(addr "$n")
  until ssh -p "$PORT" -i "$EMU/client_ed25519" -o UserKnownHostsFile="$EMU/known_hosts" \
      -o StrictHostKeyChecking=yes -o BatchMode=yes "root@$first" true 2>/dev/null &&
      ssh -p "$PORT" -i "$EMU/client_ed25519" -o UserKnownHostsFile="$EMU/known_hosts" \
      -o StrictHostKeyChecking=yes -o BatchMode=yes "root@$last" 'test "$BARGE_EMU_HOST" = '"$last"; do
    ((++tries < 100)) || { echo "emu: sshd did not answer on port $PORT:" >&2; cat "$EMU/listener.log" "$EMU/sshd.log" >&2 2>/dev/null; exit 1; }
    sleep 0.1
  done
  echo "emu: $n emulated hosts (127.1.x.y:$PORT${api:+, Engine API: $EMU/hosts-api/ADDR/docker.sock}) up; env in $EMU/emu.env" >&2
}

job() {  # $1 = hosts, $2 = file, $3 = worker seconds, $4 = --api: the head (an emu-barrier) ends once all N nodes run
  local n=$1 f=$2 a api
  # shellcheck disable=SC1091
  . "$EMU/emu.env"
  api=${4:-${EMU_API:-}}
  case ${BARGE_EMU_ENGINE:-} in api) api=1 ;; cli) api= ;; esac
  {
    echo "# EMULATED hosts and engine (bench/emu): measures barge's controller, not Docker"
    echo "name: emu$n"
    echo "image: emu/none:latest"
    # Plain `docker` (no docker_command:): the Engine API, barge's main path.
    [[ -n $api ]] || echo "docker_command: $EMU_DOCKER"
    echo "hosts:"
    head -n "$n" "$EMU_ADDRS" | while read -r a; do echo "  - $a"; done
    # The emulated hosts share this machine's cores (with whatever else runs on it):
    # a host answering late is load, not a lost host, and an engine call
    # that waits its turn for a core is load, not a frozen engine.
    echo "ssh: {user: root, port: $EMU_PORT, identity_file: $EMU_KEY, known_hosts: $EMU_KNOWN_HOSTS,"
    echo "      connect_timeout: 60s, dead_after: 60s, engine_timeout: 60s}"
    echo "stop_grace: 2s"
    echo "roles:"
    echo "  head: {command: [emu-barrier, \"$n\"]}"
    echo "  worker: {command: [sleep, \"${3:-100000}\"]}"
  } >"$f"
}

# --api anywhere among the arguments.
API=; ARGS=()
for arg in "$@"; do
  if [[ $arg == --api ]]; then API=1; else ARGS+=("$arg"); fi
done
set -- "${ARGS[@]}"
case ${1:-} in
  up) up "${2:?usage: emu.sh up N [--api]}" "$API" ;;
  down) down ;;
  job) job "${2:?hosts}" "${3:?file}" "${4:-}" "$API" ;;
  pids) emu_pids ;;
  *) echo "usage: $0 up N [--api] | down | job N FILE [WORKER_SECONDS] [--api] | pids" >&2; exit 2 ;;
esac
