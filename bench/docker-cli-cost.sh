#!/usr/bin/env bash
# bench/docker-cli-cost.sh: what one Docker CLI process costs a host, against
# the same request made to the Engine API without a Docker CLI (curl on the
# engine's socket), on this machine's engine.
#
#   bench/docker-cli-cost.sh [RUNS]     (default 20 calls per row; root or
#                                        the docker group; needs curl)
#
# Per row: the caller's CPU (user + sys of the calling processes, from
# /usr/bin/time over RUNS calls, minus the same loop calling /bin/true) and
# the engine's CPU (the dockerd of /var/run/docker.pid and its containerd,
# from /proc/PID/stat over the same calls), per call, in milliseconds. CPU
# time, not wall time: other work on the machine changes it little. DOCKER selects the CLI (default: the first
# docker on PATH; Debian's docker.io is /usr/bin/docker).
set -euo pipefail
RUNS=${1:-20}
DOCKER=${DOCKER:-$(command -v docker)}
SOCK=${BENCH_DOCKER_SOCK:-/var/run/docker.sock}
command -v curl >/dev/null || { echo "bench: curl is missing (apt-get install curl)" >&2; exit 1; }
[[ -x /usr/bin/time ]] || { echo "bench: /usr/bin/time is missing (apt-get install time)" >&2; exit 1; }
"$DOCKER" version >/dev/null || { echo "bench: no Docker engine answers" >&2; exit 1; }
image=$("$DOCKER" images --format '{{.Repository}}:{{.Tag}}' | grep -v '<none>' | head -n 1)
[[ -n "$image" ]] || { echo "bench: the engine has no image to inspect" >&2; exit 1; }
name=barge-cli-cost-$$
"$DOCKER" create --name "$name" --label barge.bench=cli-cost "$image" true >/dev/null
trap '"$DOCKER" rm -f "$name" >/dev/null 2>&1 || true' EXIT
api=v$("$DOCKER" version --format '{{.Server.APIVersion}}')

# The engine behind $SOCK: its dockerd (the pid file's) and that dockerd's
# own containerd (other dockerds, e.g. a test bed's, do not count).
DPID=$(cat "${BENCH_DOCKER_PID:-/var/run/docker.pid}")
[[ -d /proc/$DPID ]] || { echo "bench: dockerd pid $DPID (${BENCH_DOCKER_PID:-/var/run/docker.pid}) is not running" >&2; exit 1; }
engine() {  # CPU jiffies of that dockerd and its containerd
  local t=0 p
  for p in "$DPID" $(pgrep -P "$DPID" -x containerd); do
    t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat")))
  done
  echo "$t"
}
# loop_cpu CMD: caller's CPU seconds for RUNS calls of CMD (a shell line)
loop_cpu() {
  /usr/bin/time -f '%U %S' -o "/tmp/$name.t" bash -c "for ((i = 0; i < $RUNS; i++)); do $1 >/dev/null 2>&1 || true; done"
  tail -n 1 "/tmp/$name.t" | awk '{print $1 + $2}'
}
base=$(loop_cpu /bin/true)
rm -f "/tmp/$name.t.base"
row() {  # LABEL CMD
  local e0 c e1
  e0=$(engine); c=$(loop_cpu "$2"); e1=$(engine)
  awk -v l="$1" -v c="$c" -v b="$base" -v e=$((e1 - e0)) -v n="$RUNS" -v hz="$(getconf CLK_TCK)" \
    'BEGIN { printf "%-44s %8.1f %8.1f\n", l, (c - b) * 1000 / n, e * 1000 / hz / n }'
}
echo "# $(date -u '+%Y-%m-%d %H:%M') UTC, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), CLI $("$DOCKER" version --format '{{.Client.Version}}') ($DOCKER), engine $("$DOCKER" version --format '{{.Server.Version}}'), $RUNS calls per row"
printf "%-44s %8s %8s\n" "call" "caller" "engine"
printf "%-44s %8s %8s\n" "" "ms/call" "ms/call"
row "docker version" "$DOCKER version"
row "docker image inspect IMAGE" "$DOCKER image inspect $image"
row "docker ps -a --filter label=..." "$DOCKER ps -a --filter label=barge.bench=cli-cost"
row "docker inspect CONTAINER" "$DOCKER inspect $name"
row "docker logs --timestamps CONTAINER" "$DOCKER logs --timestamps $name"
row "curl: GET /_ping" "curl -s --unix-socket $SOCK http://d/_ping"
row "curl: GET /containers/NAME/json" "curl -s --unix-socket $SOCK http://d/$api/containers/$name/json"
row "curl: GET /images/IMAGE/json" "curl -s --unix-socket $SOCK http://d/$api/images/$image/json"
