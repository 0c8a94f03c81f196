#!/usr/bin/env bash
# Derives, in each engine given as a DOCKER_HOST, two small images from the
# barge/mpi:local that engine already holds (tests/bed/load-image.sh put it
# there), with `docker build` from a Dockerfile on stdin (no registry, no
# context, one tiny layer each; Docker's build cache makes a second run a
# no-op):
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
    || { echo "$out" >&2; die "building $1 in $DOCKER_HOST failed"; }
}

for dh in "$@"; do
  export DOCKER_HOST=$dh
  docker image inspect barge/mpi:local >/dev/null 2>&1 || die "no barge/mpi:local in $dh"
  build barge/mpi-user:local "$user_dockerfile"
  build barge/mpi-nosshd:local "$nosshd_dockerfile"
done
echo "derive-mpi-images: barge/mpi-user:local and barge/mpi-nosshd:local in $# engine(s)" >&2
