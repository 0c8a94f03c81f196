#!/usr/bin/env bash
# The README's first command: installs what barge needs and is missing
# (apt; not the tests' packages), makes sure a Docker engine runs (starts
# dockerd when none does and we are root), builds the barge binary and its generated docs
# (no tests: configured with BUILD_TESTING=OFF, so GoogleTest is not
# needed), builds the sample image offline and runs the sample job on the
# local engine. Exits with the job's exit code.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { printf '\n=== %s\n' "$*"; }

step "dependencies"
scripts/install-deps.sh </dev/null
step "docker engine"
scripts/ensure-docker.sh
step "build"
# barge_docs: the man page, completions and JSON Schema that the README's
# `cmake --install build` and `cpack` install beside the binary.
CMAKE_ARGS="-DBUILD_TESTING=OFF ${CMAKE_ARGS:-}" BUILD_TARGETS="barge barge_docs" scripts/build.sh
step "sample image"
samples/build-demo-image.sh barge/demo:local
barge=${BUILD_DIR:-build}/runner/barge
[[ -x "$barge" ]] || { echo "quickstart: $barge was not built" >&2; exit 1; }
[[ -f samples/hello.yaml ]] || { echo "quickstart: samples/hello.yaml is missing" >&2; exit 1; }
step "barge run samples/hello.yaml"
exec "$barge" run samples/hello.yaml
