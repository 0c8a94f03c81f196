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
#   STANDIN_ECC=N          GPU 0's volatile uncorrectable ECC count reads N
#   STANDIN_GPUS=N         N GPUs: the H100's line N times, GPU i with
#                          index i, its UUID's last digit i and PCI device
#                          06+i (the query and the remapped rows)
#   STANDIN_LOST=I         GPU I fell off the bus: every field of its line
#                          (the query and the remapped rows) reads
#                          "[GPU is lost]", as the driver answers for a lost
#                          GPU (shared/TESTBED.md); exit status still 0
#   STANDIN_UTIL=U0,U1,..  the utilisation query (GpuWatch's) reads GPU i
#                          at Ui percent (the last one for the rest);
#                          default 0, as the captured `nvidia-smi -q`
#                          (q.txt: "GPU : 0 %") reads on the idle H100;
#                          the rows in the query's csv,noheader,nounits
#                          form, one per GPU of the query's lines
set -u
D=$(dirname "$0")/driver-580.159.04-h100-80gb-hbm3
[ "${STANDIN_HANG:-}" = 1 ] && exec sleep 60
full='--query-gpu=index,uuid,name,driver_version,memory.total,ecc.errors.uncorrected.volatile.total,retired_pages.pending,mig.mode.current,pci.bus_id'
basic='--query-gpu=index,uuid,name,driver_version,memory.total'
util='--query-gpu=index,utilization.gpu'
remap='--query-remapped-rows=gpu_uuid,remapped_rows.correctable,remapped_rows.uncorrectable,remapped_rows.pending,remapped_rows.failure'
# The captured file's lines once per GPU (see STANDIN_GPUS).
each() {
  [ -n "${STANDIN_GPUS:-}" ] || { cat "$1"; return; }
  i=0
  while [ "$i" -lt "${STANDIN_GPUS:-1}" ]; do
    sed -e "s/^0, GPU-/$i, GPU-/" -e "s/256680d526a5/256680d526a$i/" -e "s/00:06.0/00:0$((6 + i)).0/" "$1"
    i=$((i + 1))
  done
}
# Line STANDIN_LOST+1 as a lost GPU's (see STANDIN_LOST); others as they are.
lost() {
  if [ -z "${STANDIN_LOST:-}" ]; then cat; return; fi
  awk -F', ' -v n="$((STANDIN_LOST + 1))" \
    'NR == n { s = ""; for (i = 1; i <= NF; i++) s = s (i > 1 ? ", " : "") "[GPU is lost]"; print s; next } { print }'
}
case "$*" in
  "$full --format=csv,noheader,nounits")
    if [ "${STANDIN_REFUSE_FULL:-}" = 1 ]; then cat "$D/query-unknown-field.txt"; exit 2; fi
    each "$D/query-health-nounits.txt" | sed "1s/, 81559, 0, /, 81559, ${STANDIN_ECC:-0}, /" | lost ;;
  "$basic --format=csv,noheader,nounits") each "$D/query-basic-nounits.txt" | lost ;;
  "$remap --format=csv,noheader,nounits")
    if [ "${STANDIN_REMAP_PENDING:-}" = 1 ]; then each "$D/query-remapped-nounits.txt" | sed '1s/, No, No$/, Yes, No/'
    else each "$D/query-remapped-nounits.txt"; fi | lost ;;
  "$util --format=csv,noheader,nounits")
    each "$D/query-health-nounits.txt" | lost | awk -F', ' -v u="${STANDIN_UTIL:-0}" \
      '{ n = split(u, a, ","); v = NR <= n ? a[NR] : a[n]; print $1 ", " ($1 ~ /^\[/ ? $1 : v) }' ;;
  "-L") cat "$D/list.txt" ;;
  "topo -m") cat "$D/topo.txt" ;;
  *) echo "standin nvidia-smi: no captured output for: $*" >&2; exit 2 ;;
esac
