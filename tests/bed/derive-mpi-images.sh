#!/usr/bin/env bash
# Derives, in the machine's default engine, two small images from
# barge/mpi:local (samples/build-mpi-image.sh), with `docker build` from a
# Dockerfile on stdin (no registry, no context, one tiny layer each;
# Docker's build cache keeps the same image ID on a second run), then loads
# them into each engine given as a DOCKER_HOST with tests/bed/load-image.sh
# (a no-op where that ID is already; barge requires the same image ID on
# every host, so the images are not built in each engine):
#   barge/mpi-user:local    USER mpiuser (uid 1000, home /home/mpiuser): an
#                           MPI job whose containers run as a non-root user
#   barge/mpi-nosshd:local  root, without the `sshd` user in /etc/passwd
# The base image has no useradd (it is cut from a few packages), so the
# user is written to /etc/passwd and /etc/group directly.
#
# Usage: tests/bed/derive-mpi-images.sh DOCKER_HOST...
set -euo pipefail

die() { echo "derive-mpi-images: $*" >&2; exit 1; }
(($# >= 1)) || die "usage: $0 DOCKER_HOST..."

user_dockerfile='FROM barge/mpi:local
RUN echo "mpiuser:x:1000:1000::/home/mpiuser:/bin/sh" >> /etc/passwd \
 && echo "mpiuser:x:1000:" >> /etc/group \
 && mkdir -p /home/mpiuser && chown 1000:1000 /home/mpiuser
USER mpiuser
'
nosshd_dockerfile='FROM barge/mpi:local
RUN sed -i "/^sshd:/d" /etc/passwd
'

build() {  # TAG DOCKERFILE: quiet unless it fails
  local out
  out=$(printf '%s' "$2" | DOCKER_BUILDKIT=0 timeout 120 docker build -q --network none -t "$1" - 2>&1) \
    || { echo "$out" >&2; die "building $1 failed"; }
}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
docker image inspect barge/mpi:local >/dev/null 2>&1 || die "no barge/mpi:local (samples/build-mpi-image.sh)"
build barge/mpi-user:local "$user_dockerfile"
build barge/mpi-nosshd:local "$nosshd_dockerfile"
"$here/load-image.sh" barge/mpi-user:local "$@"
"$here/load-image.sh" barge/mpi-nosshd:local "$@"
