#!/usr/bin/env bash
# The whole test suite, as the README and CI run it: installs what is missing
# (apt: install-deps.sh's list and the tests' own, below), makes sure a Docker
# engine runs, builds, then runs every test with ctest: the unit tests, the
# command-line tests (label cli), the Debian package test (label package)
# and the bed tests, whose "bed" fixture brings the test bed
# (tests/bed/bed.sh) up before them and down after them. It leaves dockerd
# running.
# Needs root (or password-less sudo for the installs; the bed needs root).
# Extra arguments go to ctest (e.g. -L unit, -R Quote).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec </dev/null

step() { printf '\n=== %s\n' "$*"; }

# What only the tests need, on top of scripts/install-deps.sh's list.
test_packages=(
  libgtest-dev libgmock-dev
  # the test bed: sshd, namespaces, iptables; pdsh for the benchmarks' reference
  openssh-server iproute2 iptables pdsh procps util-linux
  # a non-POSIX login shell, for the preflight test that must refuse it;
  # a local registry with htpasswd auth, for the registry login test
  tcsh docker-registry apache2-utils curl
  # the PyTorch job test's image (about 180 packages with its Depends)
  python3-torch
  # the package test (debootstrap, dpkg-shlibdeps) and the schema test
  debootstrap dpkg-dev python3-jsonschema python3-yaml
)

step "dependencies"
scripts/install-deps.sh "${test_packages[@]}"
step "docker engine"
scripts/ensure-docker.sh
step "build"
CMAKE_ARGS="-DBUILD_TESTING=ON ${CMAKE_ARGS:-}" scripts/build.sh
step "tests"
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure --no-tests=error \
  -j "$(nproc)" "$@"
# The suite's fuzz run: a fixed seed and number of runs per target, at most
# BARGE_FUZZ_SECONDS each; it fails on crashes, sanitizer reports, hangs,
# memory and the parser's contract. The stricter nesting-estimate check
# (tests/fuzz/job_file_fuzz.cc) is for developers' runs and the corpus
# replay: BARGE_FUZZ_SECONDS=600 scripts/fuzz.sh.
step "fuzz (seed 1, 150000 runs or BARGE_FUZZ_SECONDS per target; 0 skips)" &&
  BARGE_FUZZ_NESTING=0 BARGE_FUZZ_SECONDS=${BARGE_FUZZ_SECONDS:-120} \
  scripts/fuzz.sh -seed=1 -runs=150000
