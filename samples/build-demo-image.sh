#!/usr/bin/env bash
# Builds the quick start's image offline: a busybox-static rootfs (every
# applet linked, /etc/passwd, /etc/group, /tmp) `docker import`ed. No
# registry is needed. Idempotent: an image with this tag built from the same
# busybox binary and the same script is kept. Prints the image ID.
#
# Usage: samples/build-demo-image.sh [TAG]   (default barge/demo:local)
set -euo pipefail

tag=${1:-barge/demo:local}
busybox=${BARGE_BUSYBOX:-/bin/busybox}

die() { echo "build-demo-image: $*" >&2; exit 1; }

[[ -x "$busybox" ]] || die "no $busybox; install busybox-static (scripts/install-deps.sh)"
if ! LC_ALL=C file -L "$busybox" 2>/dev/null | grep -q 'statically linked'; then
  # `file` may be absent; ldd says "not a dynamic executable" for static ones.
  if ldd "$busybox" >/dev/null 2>&1; then
    die "$busybox is dynamically linked; install busybox-static"
  fi
fi
timeout 20 docker version >/dev/null 2>&1 || die "no Docker engine answers (scripts/ensure-docker.sh starts one)"

# What the image is made of: the busybox binary and this script.
source_id=$(cat "$busybox" "${BASH_SOURCE[0]}" | sha256sum | cut -c1-16)
current=$(docker image inspect --format '{{index .Config.Labels "barge.image.source"}}' "$tag" 2>/dev/null || true)
if [[ "$current" == "$source_id" ]]; then
  docker image inspect --format '{{.Id}}' "$tag"
  exit 0
fi

root=$(mktemp -d "${TMPDIR:-/tmp}/barge-rootfs.XXXXXX")
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,etc,tmp,root,proc,sys,dev,var/tmp,home}
chmod 1777 "$root/tmp" "$root/var/tmp"
chmod 0700 "$root/root"
cp "$busybox" "$root/bin/busybox"
# `busybox --list-full` names each applet with its usual directory.
while read -r applet; do
  [[ -z "$applet" || "$applet" == bin/busybox ]] && continue
  mkdir -p "$root/$(dirname "$applet")"
  ln -sf /bin/busybox "$root/$applet"
done < <("$busybox" --list-full)
cat >"$root/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
PASSWD
cat >"$root/etc/group" <<'GROUP'
root:x:0:
nogroup:x:65534:
GROUP
: >"$root/etc/hosts"
: >"$root/etc/resolv.conf"

# The image this tag named before (an older build), removed once the tag
# moves, so that a rebuild leaves no dangling image behind.
previous=$(docker image inspect --format '{{.Id}}' "$tag" 2>/dev/null || true)
tar --numeric-owner --owner=0 --group=0 -C "$root" -cf - . |
  docker import \
    -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    -c 'CMD ["sh"]' \
    -c "LABEL barge.image.source=$source_id" \
    -m "busybox rootfs built by samples/build-demo-image.sh" \
    - "$tag" >/dev/null
id=$(docker image inspect --format '{{.Id}}' "$tag")
if [[ -n "$previous" && "$previous" != "$id" ]]; then
  docker rmi "$previous" >/dev/null 2>&1 || true  # kept if something else still uses it
fi
echo "$id"
