#!/usr/bin/env bash
# Configures (once) and builds barge in ./build with Ninja.
#   BUILD_TYPE (default RelWithDebInfo), BUILD_DIR (default build),
#   CMAKE_ARGS (extra configure arguments, word-split),
#   BUILD_TARGETS (targets to build, word-split; default all).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

build_dir=${BUILD_DIR:-build}
build_type=${BUILD_TYPE:-RelWithDebInfo}
cache="$build_dir/CMakeCache.txt"

# A build dir configured with another generator cannot be reused: start over.
if [[ -f "$cache" ]] && ! grep -qx 'CMAKE_GENERATOR:INTERNAL=Ninja' "$cache"; then
  echo "build: $build_dir was configured with another generator; reconfiguring"
  rm -rf "$cache" "$build_dir/CMakeFiles"
fi
# shellcheck disable=SC2086
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE="$build_type" ${CMAKE_ARGS:-}
# shellcheck disable=SC2086
cmake --build "$build_dir" ${BUILD_TARGETS:+--target $BUILD_TARGETS}
