#!/usr/bin/env bash
# The whole test suite, as the README and CI run it: installs what is missing
# (apt), makes sure a Docker engine runs, builds, then runs every test with
# ctest: the unit tests and the bed tests, whose "bed" fixture brings the test
# bed (tests/bed/bed.sh) up before them and down after them.
# Needs root (or password-less sudo for the installs; the bed needs root).
# Extra arguments go to ctest (e.g. -L unit, -R Quote).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec </dev/null

step() { printf '\n=== %s\n' "$*"; }

step "dependencies"
scripts/install-deps.sh
step "docker engine"
scripts/ensure-docker.sh
step "build"
scripts/build.sh
step "tests"
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure --no-tests=error \
  -j "$(nproc)" "$@"
# The suite's fuzzing is reproducible: a fixed seed and number of runs per
# target (the same inputs on every machine, a prefix of them on a slow one
# that reaches BARGE_FUZZ_SECONDS first). Longer, random runs find more:
# BARGE_FUZZ_SECONDS=600 scripts/fuzz.sh.
step "fuzz (seed 1, 150000 runs or BARGE_FUZZ_SECONDS per target; 0 skips)" &&
  BARGE_FUZZ_SECONDS=${BARGE_FUZZ_SECONDS:-120} scripts/fuzz.sh -seed=1 -runs=150000
