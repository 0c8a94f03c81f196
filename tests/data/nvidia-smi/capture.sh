#!/usr/bin/env bash
# Captures real nvidia-smi outputs (and what the GPU health gate and the
# network plumbing read) on a machine with an NVIDIA driver, into $OUT
# (default ./capture). Each command's stdout+stderr goes to NAME.txt, its
# exit status to NAME.rc. Run once per driver; the files are committed
# under tests/data/nvidia-smi/ with the driver version in their names.
set -u
OUT=${OUT:-./capture}
mkdir -p "$OUT"
cap() {  # cap NAME CMD...
  local name=$1; shift
  timeout 60 "$@" >"$OUT/$name.txt" 2>&1
  echo $? >"$OUT/$name.rc"
}
Q=index,uuid,name,driver_version,memory.total
cap version nvidia-smi --version
cap plain nvidia-smi
cap list nvidia-smi -L
cap query-basic nvidia-smi --query-gpu=$Q --format=csv,noheader
cap query-basic-nounits nvidia-smi --query-gpu=$Q --format=csv,noheader,nounits
cap query-health nvidia-smi --query-gpu=$Q,ecc.errors.uncorrected.volatile.total,retired_pages.pending --format=csv,noheader
cap query-health-nounits nvidia-smi --query-gpu=$Q,ecc.errors.uncorrected.volatile.total,retired_pages.pending,mig.mode.current,pci.bus_id --format=csv,noheader,nounits
cap query-unknown-field nvidia-smi --query-gpu=index,no.such.field --format=csv,noheader
cap query-remapped nvidia-smi --query-remapped-rows=gpu_bus_id,gpu_uuid,remapped_rows.correctable,remapped_rows.uncorrectable,remapped_rows.pending,remapped_rows.failure --format=csv,noheader
cap query-remapped-nounits nvidia-smi --query-remapped-rows=gpu_uuid,remapped_rows.correctable,remapped_rows.uncorrectable,remapped_rows.pending,remapped_rows.failure --format=csv,noheader,nounits
cap help-query-gpu nvidia-smi --help-query-gpu
cap help-query-remapped nvidia-smi --help-query-remapped-rows
cap q nvidia-smi -q
cap q-xml nvidia-smi -q -x
cap q-ecc nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER
cap topo nvidia-smi topo -m
cap dmesg-xid sh -c 'dmesg 2>&1 | grep -i -e xid -e nvrm | tail -n 50; echo "dmesg rc=${PIPESTATUS:-?}"'
cap dmesg-head sh -c 'dmesg 2>&1 | head -n 3'
cap journal-xid sh -c 'journalctl -k --no-pager -q 2>&1 | grep -i xid | tail -n 20; command -v journalctl'
cap dmesg-restrict cat /proc/sys/kernel/dmesg_restrict
cap dcgmi sh -c 'command -v dcgmi nv-hostengine; dcgmi discovery -l 2>&1 | head -n 20'
cap ib sh -c 'ls -la /dev/infiniband 2>&1; ls -la /sys/class/infiniband 2>&1; for d in /sys/class/infiniband/*/ports/*/state; do echo "$d: $(cat "$d")"; done 2>&1'
cap net sh -c 'ip -o -4 addr show 2>&1; ip route 2>&1; ip route get 8.8.8.8 2>&1; hostname; getent hosts "$(hostname)"'
cap os sh -c 'uname -a; cat /etc/os-release 2>/dev/null | head -n 4; id'
cap time-query sh -c 'time nvidia-smi --query-gpu=index --format=csv,noheader'
ls -la "$OUT"
for f in "$OUT"/*.rc; do printf '%s %s\n' "$(basename "$f" .rc)" "$(cat "$f")"; done
