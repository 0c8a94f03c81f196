#!/usr/bin/env bash
# bench/fanout.sh [RUNS]: SSH fan-out of `true` to 1, 4, 16 and 64 hosts,
# barge's one-event-loop way against pdsh, on a 64-host sshd-only bed
# (tests/bed/bed.sh; it replaces a bed that is up, and is taken down after).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RUNS=${1:-5}
BIN=${FANOUT:-$ROOT/build/bench/fanout}
[[ -x "$BIN" ]] || { echo "bench: build first ($BIN)" >&2; exit 1; }
BARGE_BED_HOSTS=64 BARGE_BED_SSHD_ONLY=1 BARGE_BED_TORCH=0 "$ROOT/tests/bed/bed.sh" up >&2
trap '"$ROOT/tests/bed/bed.sh" down >&2 || true' EXIT
"$BIN" "${BARGE_BED_DIR:-/tmp/barge-bed}/bed.env" 1 4 16 64 "$RUNS"
