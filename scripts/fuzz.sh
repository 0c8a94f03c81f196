#!/usr/bin/env bash
# A bounded libFuzzer run of every fuzz target in tests/fuzz/ (the job-file
# parser, the log-line framing, the Engine API's HTTP responses, the
# dashboard's request heads, a job array's rows, and what hosts answer:
# Slurm's commands, the GPU driver and DCGM, holds, RDMA and interfaces;
# tests/fuzz/README.md lists them): installs clang, its sanitizer runtimes
# and llvm-symbolizer if missing (apt, through scripts/install-deps.sh),
# builds the targets with clang and BARGE_FUZZ=ON in their own build
# directory, then runs each for a fixed time on a scratch copy of its seed
# corpus (the source tree is never written to).
#
# Exits non-zero when a target crashes, fails a check, leaks, hangs past
# -timeout or passes -rss_limit_mb, and prints where the input that did it
# is and how to replay it. Once fixed, copy that input into
# tests/fuzz/corpus/TARGET/ so every build replays it (ctest, label unit),
# or, when each run of it is slow (mutated, it would eat the fuzzing's
# time), into tests/fuzz/regressions/TARGET/, which this script runs once
# before fuzzing, under the same limits.
#
# Usage: scripts/fuzz.sh [LIBFUZZER_OPTION...]   (e.g. -jobs=2 -max_len=65536)
# Environment:
#   BARGE_FUZZ_SECONDS    run time per target (default 60; 0 skips fuzzing)
#   BARGE_FUZZ_TARGETS    targets to run (default "job_file log_line http_response
#                         request_head array_rows slurm_text gpu_text host_reply")
#   BARGE_FUZZ_BUILD_DIR  clang build directory (default build-fuzz)
# Needs root (or password-less sudo) only when something must be installed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec </dev/null

seconds="${BARGE_FUZZ_SECONDS:-60}"
read -r -a targets <<<"${BARGE_FUZZ_TARGETS:-job_file log_line http_response request_head array_rows slurm_text gpu_text host_reply}"
build="${BARGE_FUZZ_BUILD_DIR:-build-fuzz}"

if ! [[ "$seconds" =~ ^[0-9]+$ ]]; then
  echo "fuzz: BARGE_FUZZ_SECONDS must be a whole number of seconds, not '$seconds'" >&2
  exit 2
fi
if ((seconds == 0)); then
  echo "fuzz: skipped (BARGE_FUZZ_SECONDS=0)"
  exit 0
fi

scripts/install-deps.sh clang libclang-rt-dev llvm

cmake -S . -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DBARGE_FUZZ=ON >/dev/null
cmake --build "$build" --target "${targets[@]/%/_fuzz}"

# The seeds of TARGET, as tests/fuzz/CMakeLists.txt has them.
seeds() {
  ls -d "tests/fuzz/corpus/$1"/*
  local smi=tests/data/nvidia-smi/driver-580.159.04-h100-80gb-hbm3
  case "$1" in
    job_file) ls -d samples/*.yaml tests/bad_jobs/*.yaml tests/bad_jobs/data/*.yaml ;;
    slurm_text) ls -d tests/data/slurm-22.05/*.txt ;;
    gpu_text) ls -d "$smi"/query-*.txt "$smi"/dmesg-*.txt "$smi"/journal-xid.txt "$smi"/dcgmi.txt ;;
    host_reply) ls -d tests/data/net/debian12-vm/*.txt "$smi"/ib.txt "$smi"/net.txt ;;
  esac
}

work="$(mktemp -d "${TMPDIR:-/tmp}/barge-fuzz.XXXXXX")"
failed=()
for t in "${targets[@]}"; do
  mkdir -p "$work/$t/corpus" "$work/$t/artifacts"
  while read -r seed; do
    cp -- "$seed" "$work/$t/corpus/${seed//\//_}"
  done < <(seeds "$t")
  echo "fuzz: $t (at most ${seconds}s) on $(find "$work/$t/corpus" -type f | wc -l) seeds"
  rc=0
  # Regressions too slow to fuzz from (tests/fuzz/regressions/TARGET/):
  # each run once, under the same limits, before the fuzzing.
  regressions=(tests/fuzz/regressions/"$t"/*)
  if [[ -f "${regressions[0]}" ]]; then
    "$build/tests/fuzz/${t}_fuzz" -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$work/$t/artifacts/" \
      "${regressions[@]}" >"$work/$t/fuzz.log" 2>&1 || rc=$?
  fi
  if ((rc == 0)); then
    "$build/tests/fuzz/${t}_fuzz" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$work/$t/artifacts/" "$@" \
      "$work/$t/corpus" >>"$work/$t/fuzz.log" 2>&1 || rc=$?
  fi
  { grep -E '^(Done|stat::number_of_executed_units|stat::peak_rss_mb)|cov: ' "$work/$t/fuzz.log" ||
    true; } | tail -n 4 | sed 's/^/  /'
  if ((rc != 0)); then
    failed+=("$t")
    tail -n 60 "$work/$t/fuzz.log" | sed 's/^/  | /'
    echo "fuzz: $t FAILED (exit $rc); log: $work/$t/fuzz.log"
    for input in "$work/$t/artifacts"/*; do
      [[ -e "$input" ]] || continue
      echo "  input: $input"
      echo "  replay: $build/tests/fuzz/${t}_fuzz $input"
    done
  fi
done

if ((${#failed[@]})); then
  echo "fuzz: FAILED: ${failed[*]}; inputs and logs kept in $work" >&2
  exit 1
fi
rm -rf -- "$work"
echo "fuzz: ${targets[*]}: no failure (at most ${seconds}s each)"
