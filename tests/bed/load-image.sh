#!/usr/bin/env bash
# Loads IMAGE (from the machine's default engine) into each engine given as
# a DOCKER_HOST that does not already hold that image ID: one `docker save`,
# kept as a tarball in the bed's cache ($BARGE_BED_CACHE, default
# /var/cache/barge-bed, as bed.sh keeps the torch image), streamed through
# tee into a `docker load` per engine at once. For images only some tests
# need (barge/mpi:local), loaded by those tests into the hosts they use.
#
# Usage: tests/bed/load-image.sh IMAGE DOCKER_HOST...
set -euo pipefail

die() { echo "load-image: $*" >&2; exit 1; }
(($# >= 2)) || die "usage: $0 IMAGE DOCKER_HOST..."
image=$1
shift
cache_dir=${BARGE_BED_CACHE:-/var/cache/barge-bed}
id=$(docker image inspect -f '{{.Id}}' "$image") || die "no image $image in the default engine"

targets=()
for dh in "$@"; do
  have=$(DOCKER_HOST=$dh docker image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)
  [[ "$have" == "$id" ]] || targets+=("$dh")
done
((${#targets[@]} > 0)) || { echo "load-image: $image is in all $# engine(s)" >&2; exit 0; }

file="$cache_dir/${image//[^a-zA-Z0-9]/_}-${id#sha256:}.tar"
if [[ ! -s "$file" ]]; then
  mkdir -p "$cache_dir"
  rm -f "$cache_dir/${image//[^a-zA-Z0-9]/_}-"*.tar
  docker save "$image" >"$file.tmp.$$" && mv "$file.tmp.$$" "$file" || { rm -f "$file.tmp.$$"; die "docker save $image failed"; }
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/barge-load.XXXXXX")
trap 'rm -rf "$work"' EXIT
pids=()
fifos=()
for i in "${!targets[@]}"; do
  mkfifo "$work/$i"
  fifos+=("$work/$i")
  DOCKER_HOST=${targets[$i]} docker load -q <"$work/$i" >"$work/$i.log" 2>&1 &
  pids+=($!)
done
rc=0
tee "${fifos[@]}" <"$file" >/dev/null || rc=1
for i in "${!targets[@]}"; do
  wait "${pids[$i]}" || { rc=1; echo "load-image: docker load into ${targets[$i]} failed:" >&2; cat "$work/$i.log" >&2; }
done
((rc == 0)) || die "could not load $image everywhere"
echo "load-image: $image loaded into ${#targets[@]} engine(s)" >&2
