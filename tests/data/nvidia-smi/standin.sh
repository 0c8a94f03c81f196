#!/bin/sh
# A stand-in nvidia-smi for tests: replays the real outputs captured in
# driver-580.159.04-h100-80gb-hbm3/ (one H100) for the exact commands the
# GPU health gate runs (runner/remote/gpu_health.h), and fails like the
# real one for anything else. Knobs (environment), each an edit of a real
# output that a healthy GPU cannot give, named here:
#   STANDIN_REFUSE_FULL=1  the full query is refused with the driver's
#                          "not a valid field" message (captured for
#                          another field: query-unknown-field.txt, rc 2)
#   STANDIN_HANG=1         every call hangs (a dead GPU's nvidia-smi)
#   STANDIN_REMAP_PENDING=1  the remapped-rows line says "Yes" pending
#   STANDIN_ECC=N          the volatile uncorrectable ECC count reads N
set -u
D=$(dirname "$0")/driver-580.159.04-h100-80gb-hbm3
[ "${STANDIN_HANG:-}" = 1 ] && exec sleep 60
full='--query-gpu=index,uuid,name,driver_version,memory.total,ecc.errors.uncorrected.volatile.total,retired_pages.pending,mig.mode.current,pci.bus_id'
basic='--query-gpu=index,uuid,name,driver_version,memory.total'
remap='--query-remapped-rows=gpu_uuid,remapped_rows.correctable,remapped_rows.uncorrectable,remapped_rows.pending,remapped_rows.failure'
case "$*" in
  "$full --format=csv,noheader,nounits")
    if [ "${STANDIN_REFUSE_FULL:-}" = 1 ]; then cat "$D/query-unknown-field.txt"; exit 2; fi
    sed "s/, 81559, 0, /, 81559, ${STANDIN_ECC:-0}, /" "$D/query-health-nounits.txt" ;;
  "$basic --format=csv,noheader,nounits") cat "$D/query-basic-nounits.txt" ;;
  "$remap --format=csv,noheader,nounits")
    if [ "${STANDIN_REMAP_PENDING:-}" = 1 ]; then sed 's/, No, No$/, Yes, No/' "$D/query-remapped-nounits.txt"
    else cat "$D/query-remapped-nounits.txt"; fi ;;
  "-L") cat "$D/list.txt" ;;
  "topo -m") cat "$D/topo.txt" ;;
  *) echo "standin nvidia-smi: no captured output for: $*" >&2; exit 2 ;;
esac
