#!/usr/bin/env bash
# Builds barge/mpi:local offline: Debian's OpenMPI (openmpi-bin), mpi4py
# (python3-mpi4py) and OpenSSH (openssh-server, openssh-client) cut out of
# this machine's own installation, the way tests/bed/build-torch-image.sh
# cuts the PyTorch image. Installs the packages with apt when they are
# missing, then `docker import`s a rootfs made of the file lists (dpkg -L) of
# those packages and their Depends closure, plus python3, bash, dash (/bin/sh),
# coreutils, sed and grep, the alternatives symlinks no file list contains, and a few
# generated files: /etc/passwd with root and the `sshd` user that sshd's
# privilege separation needs, /etc/group, /tmp, and /etc/ssh/sshd_config
# (Debian's default, which openssh-server's install would write). /run/sshd
# is left out: barge makes it when a worker starts.
#
# The image's PATH starts with /opt/mpi/bin (empty), so that a test can see
# the image's own ENV reach the ranks on the workers.
#
# Idempotent: the image carries a label with a hash of the packages'
# versions, this script and scripts/lib/image-build.sh (the steps shared with
# the PyTorch image); an image with the same label is kept. Prints the image
# ID.
#
# Usage: samples/build-mpi-image.sh [TAG]   (default barge/mpi:local)
#   BARGE_MPI_CHECK=1  also run a 2-rank mpi4py allreduce in a container.
set -euo pipefail

tag=${1:-barge/mpi:local}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)

die() { echo "build-mpi-image: $*" >&2; exit 1; }
log() { echo "build-mpi-image: $*" >&2; }

timeout 20 docker version >/dev/null 2>&1 || die "no Docker engine answers (scripts/ensure-docker.sh starts one)"
"$root/scripts/install-deps.sh" openmpi-bin python3-mpi4py openssh-server openssh-client >&2

work=$(mktemp -d "${TMPDIR:-/tmp}/barge-mpi.XXXXXX")
trap 'rm -rf "$work"' EXIT

source "$root/scripts/lib/image-build.sh"
image_closure openmpi-bin python3-mpi4py openssh-server openssh-client python3 bash \
  dash coreutils sed grep libc-bin hostname

source_id=$(image_source_id "${BASH_SOURCE[0]}")
mpi_version=$(awk '$1 == "openmpi-bin" {print $2}' "$work/packages")
current=$(docker image inspect --format '{{index .Config.Labels "barge.image.source"}}' "$tag" 2>/dev/null || true)
if [[ "$current" == "$source_id" ]]; then
  log "$tag is up to date (openmpi-bin $mpi_version, $(wc -l <"$work/packages") packages)"
  docker image inspect --format '{{.Id}}' "$tag"
  exit 0
fi
log "openmpi-bin $mpi_version: $(wc -l <"$work/packages") packages"

image_file_list

# Generated files, on top of the packages' files in the same tarball.
extra="$work/extra"
mkdir -p "$extra"/{etc/ssh,tmp,root,var/tmp,home,proc,sys,dev,workspace,opt/mpi/bin}
chmod 0755 "$extra"
chmod 1777 "$extra/tmp" "$extra/var/tmp"
chmod 0700 "$extra/root"
printf 'root:x:0:0:root:/root:/bin/bash\nsshd:x:100:65534::/run/sshd:/usr/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n' >"$extra/etc/passwd"
cp /usr/share/openssh/sshd_config "$extra/etc/ssh/sshd_config"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$extra/etc/group"
printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$extra/etc/nsswitch.conf"
: >"$extra/etc/hosts"
: >"$extra/etc/resolv.conf"

image_import "$tag" "openmpi-bin $mpi_version, mpi4py and OpenSSH cut from this machine's Debian packages"
image_commit "$tag" \
  'ENV PATH=/opt/mpi/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  'ENV LANG=C.UTF-8' \
  'ENV PYTHONDONTWRITEBYTECODE=1' \
  'WORKDIR /workspace' \
  'CMD ["/usr/bin/python3"]' \
  "LABEL barge.image.source=$source_id" \
  "LABEL barge.openmpi.version=$mpi_version"

if [[ "${BARGE_MPI_CHECK:-0}" == 1 ]]; then
  log "checking a 2-rank mpi4py allreduce"
  docker run --rm -e OMPI_ALLOW_RUN_AS_ROOT=1 -e OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    -e OMPI_MCA_btl_vader_single_copy_mechanism=none "$tag" \
    mpirun --oversubscribe -np 2 /usr/bin/python3 -c '
from mpi4py import MPI
c = MPI.COMM_WORLD
print("rank", c.Get_rank(), "allreduce ->", c.allreduce(c.Get_rank() + 1))
' >&2 || die "the image cannot run an mpi4py allreduce"
fi
docker image inspect --format '{{.Id}}' "$tag"
