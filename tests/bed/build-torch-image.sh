#!/usr/bin/env bash
# Builds barge/torch:local offline: Debian's python3-torch (CPU, gloo) cut out
# of this machine's own installation. Installs python3-torch with apt when it
# is missing, then `docker import`s a rootfs made of the file lists (dpkg -L)
# of python3-torch and its Depends closure, plus python3, bash and coreutils,
# the alternatives symlinks (libblas.so.3, liblapack.so.3, ...) that no file
# list contains, and a few generated files (/etc/passwd, /etc/group, /tmp,
# ld.so.cache).
#
# Idempotent: the image carries a label with a hash of the packages' versions,
# this script and scripts/lib/image-build.sh (the steps shared with the MPI
# image); an image with the same label is kept. Prints the image ID.
#
# Usage: tests/bed/build-torch-image.sh [TAG]   (default barge/torch:local)
#   BARGE_TORCH_CHECK=1  also run `import torch` and a 1-node gloo
#                        init_process_group + all_reduce in a container.
set -euo pipefail

tag=${1:-barge/torch:local}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)

die() { echo "build-torch-image: $*" >&2; exit 1; }
log() { echo "build-torch-image: $*" >&2; }

timeout 20 docker version >/dev/null 2>&1 || die "no Docker engine answers (scripts/ensure-docker.sh starts one)"
"$root/scripts/install-deps.sh" python3-torch >&2

work=$(mktemp -d "${TMPDIR:-/tmp}/barge-torch.XXXXXX")
trap 'rm -rf "$work"' EXIT

source "$root/scripts/lib/image-build.sh"
image_closure python3-torch python3 bash coreutils libc-bin hostname

source_id=$(image_source_id "${BASH_SOURCE[0]}")
torch_version=$(awk '$1 == "python3-torch" {print $2}' "$work/packages")
current=$(docker image inspect --format '{{index .Config.Labels "barge.image.source"}}' "$tag" 2>/dev/null || true)
if [[ "$current" == "$source_id" ]]; then
  log "$tag is up to date (python3-torch $torch_version, $(wc -l <"$work/packages") packages)"
  docker image inspect --format '{{.Id}}' "$tag"
  exit 0
fi
log "python3-torch $torch_version: $(wc -l <"$work/packages") packages"

image_file_list

# Generated files, on top of the packages' files in the same tarball.
extra="$work/extra"
mkdir -p "$extra"/{etc,tmp,root,var/tmp,home,proc,sys,dev,workspace}
chmod 0755 "$extra"
chmod 1777 "$extra/tmp" "$extra/var/tmp"
chmod 0700 "$extra/root"
printf 'root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n' >"$extra/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$extra/etc/group"
printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$extra/etc/nsswitch.conf"
: >"$extra/etc/hosts"
: >"$extra/etc/resolv.conf"

image_import "$tag" "python3-torch $torch_version cut from this machine's Debian packages"
image_commit "$tag" \
  'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  'ENV LANG=C.UTF-8' \
  'ENV PYTHONDONTWRITEBYTECODE=1' \
  'WORKDIR /workspace' \
  'CMD ["/usr/bin/python3"]' \
  "LABEL barge.image.source=$source_id" \
  "LABEL barge.torch.version=$torch_version"

if [[ "${BARGE_TORCH_CHECK:-0}" == 1 ]]; then
  log "checking import torch + a 1-node gloo all_reduce"
  docker run --rm -e MASTER_ADDR=127.0.0.1 -e MASTER_PORT=29500 -e RANK=0 -e WORLD_SIZE=1 "$tag" \
    /usr/bin/python3 -c '
import torch, torch.distributed as dist
dist.init_process_group("gloo", init_method="env://")
t = torch.tensor([41.0]) + 1
dist.all_reduce(t)
print("torch", torch.__version__, "gloo all_reduce ->", int(t.item()))
dist.destroy_process_group()
' >&2 || die "the image cannot run a gloo all_reduce"
fi
docker image inspect --format '{{.Id}}' "$tag"
