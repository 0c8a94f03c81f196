#!/usr/bin/env bash
# bench/fresh-machine.sh: how long the README's first command
# (scripts/quickstart.sh) takes on a fresh Debian 12 machine: a
# `debootstrap --variant=minbase bookworm` root file system (nothing of
# barge's installed, no compiler cache, no images, no Docker engine), run
# as a privileged container of this machine's engine with the checked-out
# commit copied in (`git archive HEAD`). Inside, quickstart installs with
# apt from this machine's Debian mirror, starts its own dockerd, builds the
# barge binary, builds the sample image and runs the sample job.
#
#   bench/fresh-machine.sh      (root; needs debootstrap and a Docker engine)
#
# Prints each quickstart step's start (seconds since the command began) and
# the whole command's wall time and exit code. The root file system is
# cached in /var/cache/barge-bed (as the package test's is); the container
# and its image are removed at the end. The machine's load counts: run it on
# a quiet machine, and say what else ran when quoting it.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
((EUID == 0)) || { echo "fresh-machine: needs root" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "fresh-machine: apt-get install debootstrap" >&2; exit 1; }
cache=${BARGE_DEB_CACHE:-/var/cache/barge-bed}
tarball=$cache/debootstrap-bookworm-minbase-plain.tar
image=barge/fresh-machine:bench
name=barge-fresh-machine-$$

if [[ ! -s "$tarball" ]]; then
  url=$(awk 'BEGIN{RS=""; FS="\n"} /Suites:[^\n]*bookworm( |\n|$)/ && /Components:[^\n]*main/ {
           for (i = 1; i <= NF; i++) if ($i ~ /^URIs:/) { split($i, a, " "); print a[2]; exit } }' \
        /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n 1)
  [[ -n "$url" ]] || url=$(awk '$1 == "deb" && $3 == "bookworm" { print $2; exit }' /etc/apt/sources.list)
  mkdir -p "$cache"
  root=$(mktemp -d)
  echo "debootstrap --variant=minbase bookworm from $url (once; cached as $tarball)" >&2
  debootstrap --variant=minbase bookworm "$root" "$url" >"$cache/debootstrap-plain.log" 2>&1 ||
    { tail -n 20 "$cache/debootstrap-plain.log" >&2; rm -rf "$root"; exit 1; }
  rm -rf "$root"/var/cache/apt/archives/*.deb
  tar -C "$root" -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
  rm -rf "$root"
fi
docker import "$tarball" "$image" >/dev/null
cleanup() { docker rm -f "$name" >/dev/null 2>&1 || true; docker rmi "$image" >/dev/null 2>&1 || true; }
trap cleanup EXIT
# /var/lib/docker on a volume: the inner dockerd's overlay2 cannot sit on
# the container's own overlay file system.
docker run -d --privileged --name "$name" -v /var/lib/docker "$image" sleep infinity >/dev/null
commit=$(git -C "$ROOT" rev-parse --short HEAD)
git -C "$ROOT" archive --prefix=barge/ HEAD | docker exec -i "$name" tar -x -C /root
echo "# $(date -u '+%Y-%m-%d %H:%M') UTC, commit $commit, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg) before"
echo "# scripts/quickstart.sh in a fresh debootstrap bookworm minbase container"
set +e
t0=$(date +%s.%N)
docker exec "$name" bash -c 'cd /root/barge && exec scripts/quickstart.sh </dev/null' 2>&1 |
  awk -v t0="$t0" '
    function el() { cmd = "date +%s.%N"; cmd | getline now; close(cmd); return now - t0 }
    /^=== / { printf "%7.1f s  %s\n", el(), $0; fflush(); next }
    { print > "/dev/stderr" }'
rc=${PIPESTATUS[0]}
set -e
awk -v a="$(date +%s.%N)" -v b="$t0" -v rc="$rc" 'BEGIN { printf "%7.1f s  end (exit %d)\n", a - b, rc }'
exit "$rc"
