#!/usr/bin/env bash
# bench/fresh-machine.sh: how the README's two commands fare on a fresh
# Debian 12 machine: a `debootstrap --variant=minbase bookworm` root file
# system (nothing of barge's installed, no compiler cache, no images, no
# test bed, no Docker engine), run as a container of this machine's engine
# with the machine's capabilities (not --privileged, see below) and the
# checked-out commit copied in (`git archive HEAD`, as a fresh clone has
# it). Inside, each command runs in turn as CI
# runs it (root, no standard input): scripts/quickstart.sh installs with apt
# from this machine's Debian mirror, starts its own dockerd, builds barge and
# runs the sample job; install runs the README's Install commands in the
# order it gives them (tests/package/readme_install.sh: cmake --install,
# cpack, apt-get install of the package, then checks and removes both);
# scripts/test.sh installs the tests' packages, builds
# everything, brings the test bed up inside the container and runs the
# whole suite, fuzzers included.
#
#   bench/fresh-machine.sh [quickstart] [install] [test]   (default: all three,
#                                                 in order;
#                                                 root; needs debootstrap and
#                                                 a Docker engine)
#
# Prints each step's start (seconds since its command began), each
# command's wall time and exit code, and the suite's summary lines; the
# whole output of the commands goes to $BARGE_FRESH_LOG (default
# /var/tmp/barge-fresh-machine.log). The root file system is cached in
# /var/cache/barge-bed (as the package test's is); the container, its
# volume and its image are removed at the end (BARGE_FRESH_KEEP=1 keeps
# them after a failure, to look inside). The machine's load counts:
# run it on a quiet machine, and say what else ran when quoting it.
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
commands=("$@")
((${#commands[@]})) || commands=(quickstart install test)
for c in "${commands[@]}"; do
  [[ $c == quickstart || $c == install || $c == test ]] ||
    { echo "fresh-machine: unknown command '$c' (quickstart, install, test)" >&2; exit 2; }
done
log=${BARGE_FRESH_LOG:-/var/tmp/barge-fresh-machine.log}
: >"$log"
docker import "$tarball" "$image" >/dev/null
# BARGE_FRESH_KEEP=1 keeps the container (and its image) after a failure,
# to look inside: docker exec -it NAME bash; remove it with docker rm -f -v.
cleanup() {
  if [[ ${BARGE_FRESH_KEEP:-0} == 1 && ${worst:-0} != 0 ]]; then
    echo "# kept the container $name (BARGE_FRESH_KEEP=1)" >&2
    return
  fi
  docker rm -f -v "$name" >/dev/null 2>&1 || true
  docker rmi "$image" >/dev/null 2>&1 || true
}
trap cleanup EXIT
# /var/lib/docker on a volume: the inner dockerd's overlay2 cannot sit on
# the container's own overlay file system (the bed's dockerds keep theirs
# on a tmpfs). Not --privileged: that asks for every capability, and on a
# machine whose root lacks one (CAP_SYS_RESOURCE here) runc refuses the
# container ("unable to apply caps"). Instead: every capability this
# machine has, no seccomp or AppArmor profile, every device allowed, the
# cgroup hierarchies writable (the inner dockerds make their containers'
# cgroups), /dev/fuse (a job test passes it through), /sys remounted
# read-write (the bed's bridge and namespaces).
caps=$(awk '/^CapBnd/ { print $2 }' /proc/self/status)
cap_opts=(--cap-add ALL)
((16#$caps & (1 << 24))) || cap_opts+=(--cap-drop SYS_RESOURCE)
dev_opts=()
[[ -e /dev/fuse ]] && dev_opts+=(--device /dev/fuse)
# A new machine has an IPv6 loopback (::1); Docker turns IPv6 off in a
# container's network namespace unless told otherwise (a unit test connects
# over ::1).
[[ -e /proc/sys/net/ipv6 ]] && dev_opts+=(--sysctl net.ipv6.conf.all.disable_ipv6=0 --sysctl net.ipv6.conf.lo.disable_ipv6=0)
docker run -d --name "$name" "${cap_opts[@]}" "${dev_opts[@]}" \
  --security-opt seccomp=unconfined --security-opt apparmor=unconfined --security-opt systempaths=unconfined \
  --device-cgroup-rule 'a *:* rwm' -v /sys/fs/cgroup:/sys/fs/cgroup -v /var/lib/docker \
  "$image" sh -c 'mount -o remount,rw /sys && exec sleep infinity' >/dev/null
commit=$(git -C "$ROOT" rev-parse --short HEAD)
git -C "$ROOT" archive --prefix=barge/ HEAD | docker exec -i "$name" tar -x -C /root
echo "# $(date -u '+%Y-%m-%d %H:%M') UTC, commit $commit, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg) before"
echo "# a fresh debootstrap bookworm minbase container; full output in $log"
worst=0
for c in "${commands[@]}"; do
  script=scripts/$c.sh
  [[ $c == install ]] && script=tests/package/readme_install.sh
  echo "# $script"
  set +e
  t0=$(date +%s.%N)
  docker exec "$name" bash -c "cd /root/barge && exec $script </dev/null" 2>&1 | tee -a "$log" |
    awk -v t0="$t0" '
      function el() { cmd = "date +%s.%N"; cmd | getline now; close(cmd); return now - t0 }
      /^=== / { printf "%7.1f s  %s\n", el(), $0; fflush(); next }
      /^readme_install|tests passed|tests failed|The following tests FAILED|\(Failed\)|\(Timeout\)|^fuzz|Done [0-9]+ runs|ERROR: libFuzzer|asan build:|install-deps: installed/ {
        printf "           %s\n", $0; fflush() }'
  rc=${PIPESTATUS[0]}
  set -e
  awk -v a="$(date +%s.%N)" -v b="$t0" -v rc="$rc" -v c="$c" 'BEGIN { printf "%7.1f s  end of %s (exit %d)\n", a - b, c, rc }'
  ((rc == 0)) || worst=$rc
  ((rc == 0)) || break
done
exit "$worst"
