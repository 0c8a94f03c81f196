#!/usr/bin/env bash
# Throughput of an artifact upload to a local S3-compatible server (moto,
# tests/support/s3_server.py) against `curl -T` of the same file; the raw
# output goes to bench/results/s3-upload-DATE.txt.
#   bench/s3-upload.sh [SIZE_MIB=128] [RUNS=3] [PART_MIB=16] [PARALLEL=4]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${BUILD_DIR:-build}
ninja -C "$build" bench_s3_upload >/dev/null
out=bench/results/s3-upload-$(date -u +%F).txt
{
  echo "# bench/s3-upload.sh $*; commit $(git rev-parse --short HEAD); $(date -u +%FT%TZ); $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
  "$build/bench/bench_s3_upload" "$@"
} | tee "$out"
