#!/usr/bin/env bash
# Makes sure a Docker engine answers `docker version`. When none does and we
# are root, starts one: through systemd where systemd runs, else `dockerd` in
# the background (log: $BARGE_DOCKERD_LOG, default /var/log/barge-dockerd.log),
# removing a stale /var/run/docker.pid first. Waits up to
# $BARGE_DOCKER_WAIT seconds (default 30) for it to answer.
set -euo pipefail

log=${BARGE_DOCKERD_LOG:-/var/log/barge-dockerd.log}
wait_s=${BARGE_DOCKER_WAIT:-30}
pidfile=/var/run/docker.pid

die() { echo "ensure-docker: $*" >&2; exit 1; }

# A frozen dockerd makes the CLI hang forever: always bound it.
answers() { timeout 10 docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

# Alive = exists and not a zombie (PID 1 may reap late: check /proc state).
alive() {
  local state
  state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
  [[ -n "$state" && "$state" != Z && "$state" != X ]]
}

wait_answer() {
  local i
  for ((i = 0; i < wait_s * 5; i++)); do
    answers && return 0
    sleep 0.2
  done
  return 1
}

command -v docker >/dev/null 2>&1 || die "no docker client on PATH; run scripts/install-deps.sh"

if answers; then
  echo "ensure-docker: engine $(docker version --format '{{.Server.Version}}' 2>/dev/null) answers"
  exit 0
fi

if [[ -n "${DOCKER_HOST:-}" && "$DOCKER_HOST" != unix:///var/run/docker.sock && "$DOCKER_HOST" != unix:///run/docker.sock ]]; then
  die "DOCKER_HOST=$DOCKER_HOST does not answer; not starting a local dockerd for it"
fi
((EUID == 0)) || die "no Docker engine answers and not root: start one (as root: scripts/ensure-docker.sh), or add your user to the docker group"
command -v dockerd >/dev/null 2>&1 || die "no dockerd; run scripts/install-deps.sh (package docker.io)"

# A dockerd that is still starting: give it the time instead of starting another.
if [[ -s "$pidfile" ]]; then
  pid=$(cat "$pidfile" 2>/dev/null || true)
  if [[ "$pid" =~ ^[0-9]+$ ]] && alive "$pid" && [[ "$(cat "/proc/$pid/comm" 2>/dev/null)" == dockerd ]]; then
    echo "ensure-docker: dockerd (pid $pid) runs but does not answer yet; waiting"
    wait_answer && { echo "ensure-docker: engine answers"; exit 0; }
    die "dockerd pid $pid runs but has not answered in ${wait_s}s (frozen?); see its log"
  fi
  echo "ensure-docker: removing stale $pidfile (pid ${pid:-?} is gone)"
  rm -f "$pidfile"
fi

if [[ "$(cat /proc/1/comm 2>/dev/null)" == systemd ]] && command -v systemctl >/dev/null 2>&1; then
  echo "ensure-docker: systemctl start docker"
  systemctl start docker || true
  wait_answer && { echo "ensure-docker: engine answers"; exit 0; }
  echo "ensure-docker: systemd did not bring docker up; starting dockerd by hand" >&2
fi

# containerd's pid file under dockerd's exec-root goes stale the same way.
cpid=/var/run/docker/containerd/containerd.pid
if [[ -s "$cpid" ]] && ! alive "$(cat "$cpid")"; then rm -f "$cpid"; fi

mkdir -p "$(dirname "$log")"
echo "ensure-docker: starting dockerd (log: $log)"
setsid dockerd </dev/null >>"$log" 2>&1 &
dpid=$!
for ((i = 0; i < wait_s * 5; i++)); do
  if answers; then
    echo "ensure-docker: dockerd (pid $dpid) answers after $((i / 5)).$((i % 5 * 2))s"
    exit 0
  fi
  alive "$dpid" || break
  sleep 0.2
done
echo "ensure-docker: dockerd did not come up; last lines of $log:" >&2
tail -n 20 "$log" >&2 || true
exit 1
