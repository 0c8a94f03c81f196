#!/usr/bin/env bash
# Builds barge's Debian package with CPack and checks it in a clean Debian 12
# container: `dpkg -i` installs it, `barge version` and `man -w barge` work
# there, its completions and JSON Schema are in place, and `dpkg -r`
# removes every file it installed.
#
# The container is a `debootstrap --variant=minbase` rootfs of bookworm
# from the Debian mirror apt uses here, with the package's Depends (the
# runtime libraries dpkg-shlibdeps found, openssh-client, tar) and man-db
# included, imported with `docker import`. The rootfs tarball is cached in
# $BARGE_DEB_CACHE (default /var/cache/barge-bed), keyed by that package
# list, and the image is kept in the local engine: the first run takes a
# minute or two, later ones seconds.
#
# Usage: deb_test.sh BUILD_DIR   (root; needs debootstrap, dpkg-dev and a
# Docker engine, and fails when one is missing)
set -euo pipefail
build=$(realpath "${1:?usage: $0 BUILD_DIR}")
cache=${BARGE_DEB_CACHE:-/var/cache/barge-bed}
die() { echo "FAIL: $*" >&2; exit 1; }
step() { printf '=== %s\n' "$*"; }

((EUID == 0)) || die "needs root (debootstrap)"
command -v debootstrap >/dev/null || die "debootstrap is not installed (scripts/test.sh installs it)"
command -v dpkg-shlibdeps >/dev/null || die "dpkg-shlibdeps is not installed (package dpkg-dev)"
command -v cpack >/dev/null || die "cpack is not installed (package cmake)"
timeout 20 docker version >/dev/null 2>&1 || die "no Docker engine answers (scripts/ensure-docker.sh)"
[[ -f "$build/CPackConfig.cmake" ]] || die "$build/CPackConfig.cmake is missing: configure the build first"

step "cpack"
out=$build/package
rm -rf "$out"
cpack --config "$build/CPackConfig.cmake" -B "$out" >"$out.log" 2>&1 || { cat "$out.log" >&2; die "cpack failed"; }
debs=("$out"/barge_*_amd64.deb)
[[ -f "${debs[0]}" && ${#debs[@]} == 1 ]] || die "expected one barge_<version>_amd64.deb in $out, got: ${debs[*]}"
deb=${debs[0]}
echo "$(basename "$deb"): $(du -k "$deb" | cut -f1) KiB"
depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
echo "Recommends: $(dpkg-deb -f "$deb" Recommends)"
for need in libssh-4 libyaml-cpp0.7 libsqlite3-0 openssh-client tar; do
  [[ ",$depends," == *", $need"* || ",$depends," == *",$need"* ]] || die "Depends lacks $need"
done
[[ "$(dpkg-deb -f "$deb" Recommends)" == *docker.io* ]] || die "Recommends lacks docker.io"

# The Depends, without versions or alternatives, and man-db: what the
# rootfs must hold for `dpkg -i` and `man -w` to work offline.
# A virtual package (libspdlog1.10-fmt9, which libspdlog1.10 provides) is
# replaced by the real one: debootstrap installs only real packages.
real_package() {
  if [[ -n "$(apt-cache show --no-all-versions "$1" 2>/dev/null | head -n 1)" ]]; then
    echo "$1"
  else
    apt-cache showpkg "$1" | sed -n '/^Reverse Provides:/,$p' | sed -n '2{s/ .*//;p}'
  fi
}
include=man-db
for p in $(tr ',' '\n' <<<"$depends" | sed 's/(.*)//; s/|.*//; s/[[:space:]]//g' | grep -v '^$' | sort -u); do
  real=$(real_package "$p")
  [[ -n "$real" ]] || die "no Debian package provides $p (apt-get update?)"
  include="$include,$real"
done
key=$(sha256sum <<<"$include" | cut -c1-12)
tarball=$cache/debootstrap-bookworm-minbase-$key.tar
image=barge/deb-test:$key

# The mirror apt uses for bookworm main (deb822 .sources or sources.list).
mirror() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -f "$f" ]] || continue
    awk 'BEGIN{RS=""; FS="\n"} /Suites:[^\n]*bookworm( |\n|$)/ && /Components:[^\n]*main/ {
           for (i = 1; i <= NF; i++) if ($i ~ /^URIs:/) { split($i, a, " "); print a[2]; exit } }' "$f"
  done
  awk '$1 == "deb" && $3 == "bookworm" { print $2; exit }' /etc/apt/sources.list 2>/dev/null || true
}

if [[ ! -s "$tarball" ]]; then
  step "debootstrap --variant=minbase bookworm (once; cached as $tarball)"
  url=$(mirror | head -n 1)
  [[ -n "$url" ]] || die "no Debian mirror for bookworm main in /etc/apt/sources.list(.d)"
  mkdir -p "$cache"
  root=$(mktemp -d "${TMPDIR:-/tmp}/barge-deb-root.XXXXXX")
  trap 'rm -rf -- "$root"' EXIT
  start=$SECONDS
  debootstrap --variant=minbase --include="$include" bookworm "$root" "$url" >"$cache/debootstrap-$key.log" 2>&1 ||
    { tail -n 30 "$cache/debootstrap-$key.log" >&2; die "debootstrap failed (log: $cache/debootstrap-$key.log)"; }
  rm -rf "$root"/var/cache/apt/archives/*.deb
  tar -C "$root" -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
  rm -rf -- "$root"
  trap - EXIT
  echo "debootstrap: $((SECONDS - start)) s, $(du -m "$tarball" | cut -f1) MiB"
fi
if ! docker image inspect "$image" >/dev/null 2>&1; then
  step "docker import $image"
  docker import "$tarball" "$image" >/dev/null
fi

step "dpkg -i, barge version, man -w barge, dpkg -r in a clean container"
docker run --rm --network none -v "$deb:/tmp/barge.deb:ro" "$image" /bin/sh -euc '
  ! command -v barge
  dpkg -i /tmp/barge.deb
  barge version
  test "$(barge --version)" = "$(barge version)"
  man -w barge
  test "$(man -w barge)" = /usr/share/man/man1/barge.1.gz
  test -f /usr/share/bash-completion/completions/barge
  test -f /usr/share/zsh/vendor-completions/_barge
  test -f /usr/share/fish/vendor_completions.d/barge.fish
  barge schema | cmp - /usr/share/barge/job.schema.json
  barge completion bash | cmp - /usr/share/bash-completion/completions/barge
  dpkg -L barge >/tmp/files
  dpkg -r barge
  test "$(dpkg-query -W -f="\${db:Status-Status}" barge 2>/dev/null || echo gone)" != installed
  left=0
  while read -r f; do
    if [ -e "$f" ] && [ ! -d "$f" ]; then echo "left behind: $f"; left=1; fi
  done </tmp/files
  test -d /usr/share/barge && { echo "left behind: /usr/share/barge"; left=1; }
  test "$left" = 0
  echo "installed, ran, removed cleanly"
' || die "the package check in the container failed"
echo "1 passed, 0 failed"
