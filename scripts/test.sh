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
  # the test bed: sshd, namespaces, iptables; pdsh for the benchmarks'
  # reference, sqlite3 and time for bench/launch.sh's profile and RSS
  openssh-server iproute2 iptables pdsh procps util-linux sqlite3 time
  # a non-POSIX login shell, for the preflight test that must refuse it;
  # a local registry with htpasswd auth, for the registry login test
  tcsh docker-registry apache2-utils curl
  # `barge exec -it` driven through real terminals (script is util-linux's)
  tmux
  # the PyTorch job test's image (about 180 packages with its Depends)
  python3-torch
  # the MPI job tests' image (samples/build-mpi-image.sh; openssh-server and
  # openssh-client are listed above and in install-deps.sh)
  openmpi-bin python3-mpi4py
  # the AddressSanitizer build of barge (clang compiles it in about half
  # the CPU of g++; scripts/fuzz.sh needs both too)
  clang libclang-rt-dev
  # scripts/layering-check (a unit test): function lengths from ctags' end
  # lines
  universal-ctags
  # the package test (debootstrap; dpkg-dev and file for cpack's
  # dpkg-shlibdeps step: CPackDeb refuses to run without `file`, which a
  # minimal Debian lacks) and the schema test
  debootstrap dpkg-dev file python3-jsonschema python3-yaml
  # the dashboard's end-to-end test (tests/ui/dashboard_test.py) and
  # scripts/screenshot-dashboard.sh drive headless Chromium; a font so its
  # screenshots have text
  chromium chromium-driver python3-selenium fonts-dejavu-core
)

# The test bed's Slurm cluster (tests/bed/slurm.sh): installed apart, so
# that their maintainer scripts start no munged, slurmctld or slurmd on this
# machine (with its own /etc/munge key and /etc/slurm); the bed runs its own.
slurm_packages=(munge slurmctld slurmd slurm-client)

step "dependencies"
scripts/install-deps.sh "${test_packages[@]}"
INSTALL_DEPS_NO_START=1 scripts/install-deps.sh "${slurm_packages[@]}"
# The object-storage tests' server (tests/support/s3_server.py, label s3):
# moto's S3 server with SigV4 authentication, from Python's moto (this kind
# of machine has it in its image; Debian 12 packages no S3 server, and npm's
# s3rver does not check SigV4 signatures nor know ListParts or aborts).
step "S3 test server (Python's moto)"
if ! python3 -c 'import moto.server, boto3, flask' 2>/dev/null; then
  python3 -m pip install --quiet 'moto[server]' ||
    { echo "test.sh: Python's moto (moto[server]) is missing and pip could not install it" >&2; exit 1; }
fi
python3 -c 'import moto; print("moto", moto.__version__)'
step "docker engine"
scripts/ensure-docker.sh
step "build"
CMAKE_ARGS="-DBUILD_TESTING=ON ${CMAKE_ARGS:-}" scripts/build.sh
# The AddressSanitizer build of barge alone, for runner_asan_bed_tests
# (interrupts and deadlines with late answers from frozen engines). -O0 with
# -g1 (line tables, all a report's stack needs): a third less compile CPU
# than Debug's full -g; -O1 would double it. Compiled by clang (about half
# g++'s CPU at -O0 with the sanitizers), as a unity build (each library's
# sources in a few translation units, so the heavy headers are parsed and
# their templates instantiated and instrumented once per unit, not once per
# file), without test targets. The README's Tests section has the figures.
asan_build=(env BUILD_DIR=build-asan BUILD_TYPE=Debug BUILD_TARGETS=barge
  "CMAKE_ARGS=-DCMAKE_CXX_COMPILER=clang++ -DBARGE_SANITIZE=ON -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DBUILD_TESTING=OFF -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=16"
  scripts/build.sh)
# A build-asan left by an older checkout (configured with g++, or without the
# unity build): switching its compiler makes CMake drop the cache and
# configure again without the arguments above, so it is started afresh.
if [[ -f build-asan/CMakeCache.txt ]] &&
   ! { grep -q '^CMAKE_CXX_COMPILER:[A-Z]*=.*clang++$' build-asan/CMakeCache.txt &&
       grep -q '^CMAKE_UNITY_BUILD:[A-Z]*=ON$' build-asan/CMakeCache.txt; }; then
  rm -rf build-asan
fi
# The bed comes up here, where its progress is printed as it goes (under
# ctest, -j, a fixture's output shows only when it fails); ctest's bed_up
# fixture then reuses it (BARGE_BED_REUSE=1) and bed_down removes it at the
# end. Only for the whole suite (no ctest arguments: a selection may hold no
# bed test, and then nothing would take the bed down). The ASan build runs
# meanwhile in the background (niced: the bed's steps come first), since
# bringing the bed up mostly waits on image loads; its log is printed once
# it ends, and a failed build fails the run here, before any test.
# The bed is one per machine: a developer's bed test run by hand takes
# /tmp/barge-bed-turn.lock (docs/dev/testing.md), and so does this run, for
# as long as it lasts, so that neither removes or fills what the other uses.
exec 9>/tmp/barge-bed-turn.lock
if ! flock -n 9; then
  echo "test.sh: waiting for the test bed (another run holds /tmp/barge-bed-turn.lock)"
  flock 9
fi
if (($# == 0)); then
  step "build (AddressSanitizer, barge only; in the background while the bed comes up)"
  asan_log=${BUILD_DIR:-build}/asan-build.log
  setsid nice -n 10 /usr/bin/time -f 'asan build: %e s wall, %U s user, %S s sys' \
    "${asan_build[@]}" >"$asan_log" 2>&1 &
  asan_pid=$!
  # A failed bed step ends the script (set -e): stop the build with it.
  trap 'kill -- "-$asan_pid" 2>/dev/null || true' EXIT
  step "test bed"
  BARGE_BED_TORCH=${BARGE_BED_TORCH:-1} tests/bed/bed.sh up
  export BARGE_BED_REUSE=1
  step "build (AddressSanitizer, barge only): its log"
  asan_rc=0 asan_wait=$SECONDS
  wait "$asan_pid" || asan_rc=$?
  trap - EXIT
  cat "$asan_log"
  echo "asan build: waited $((SECONDS - asan_wait)) s for it after the bed was up"
  if ((asan_rc != 0)); then
    echo "test.sh: the AddressSanitizer build failed (exit $asan_rc; log above, also in $asan_log)" >&2
    exit 1
  fi
else
  step "build (AddressSanitizer, barge only)"
  "${asan_build[@]}"
fi
step "tests"
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure --no-tests=error \
  -j "$(nproc)" "$@"
# The suite's fuzz run: a fixed seed (BARGE_TEST_SEED=N picks another,
# BARGE_TEST_SEED=random a fresh one that libFuzzer prints) and number of
# runs per target, at most BARGE_FUZZ_SECONDS each; it fails on crashes,
# sanitizer reports, hangs, memory, the parser's contract and the exact
# nesting cap (tests/fuzz/job_file_fuzz.cc).
case "${BARGE_TEST_SEED:-}" in
  "") fuzz_seed=1 ;;
  random) fuzz_seed=0 ;;  # libFuzzer: 0 = a fresh seed, printed
  *[!0-9]*) echo "BARGE_TEST_SEED=$BARGE_TEST_SEED: not a seed (a number, or random)" >&2; exit 2 ;;
  *) fuzz_seed=$BARGE_TEST_SEED  # libFuzzer's seed is 32-bit: its last 9 digits
     ((${#fuzz_seed} <= 9)) || fuzz_seed=${fuzz_seed: -9}
     fuzz_seed=$((10#$fuzz_seed)) ;;
esac
step "fuzz (seed $fuzz_seed, 150000 runs or BARGE_FUZZ_SECONDS per target; 0 skips)" &&
  BARGE_FUZZ_SECONDS=${BARGE_FUZZ_SECONDS:-120} scripts/fuzz.sh -seed="$fuzz_seed" -runs=150000
