#!/usr/bin/env bash
# shellcheck disable=SC2015,SC2016  # `ok` never fails; remote commands are quoted on purpose
# Checks that the bed's Slurm cluster ($BARGE_BED_DIR/slurm/slurm.env, made
# by tests/bed/slurm.sh up) really works, with Slurm's own client commands:
# what barge's Slurm tests take for granted. Each check prints what it found.
# Run by ctest as slurm_smoke (needs the "slurm" fixture); also by hand.
# Cancels the jobs it made, on failure too; leaves ended jobs in the
# controller (MinJobAge) and the jobcomp file.
set -euo pipefail

BED=${BARGE_BED_DIR:-/tmp/barge-bed}
HERE=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
env_file="$BED/slurm/slurm.env"
[[ -r "$BED/bed.env" ]] || { echo "slurm-smoke: no $BED/bed.env: the bed is down (tests/bed/bed.sh up)" >&2; exit 1; }
[[ -r "$env_file" ]] || { echo "slurm-smoke: no $env_file: the cluster is down (tests/bed/slurm.sh up)" >&2; exit 1; }
# shellcheck disable=SC1090
source "$BED/bed.env"
# shellcheck disable=SC1090
source "$env_file"
export SLURM_CONF
# Nothing of the caller's own Slurm job or engine may steer the checks.
unset SLURM_JOB_ID SLURM_JOBID SLURM_CLUSTERS SLURM_PARTITION DOCKER_HOST DOCKER_CONTEXT
# sbatch's output files and nobody's working directory: not the caller's.
cd /

fails=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*" >&2; fails=$((fails + 1)); }
t() { timeout 30 "$@"; }
as_nobody() { t setpriv --reuid=65534 --regid=65534 --clear-groups -- env HOME=/ "$@"; }
read -r -a nodes <<<"$BED_SLURM_NODES"
one_line() { tr '\n' ' ' <<<"$1" | sed 's/ *$//'; }

jobs=()
cleanup() {
  ((${#jobs[@]} == 0)) || timeout 30 scancel "${jobs[@]}" 2>/dev/null || true
}
trap cleanup EXIT

# alloc [--as-nobody] ARGS...: salloc --no-shell; prints the job id.
alloc() {
  local -a run=(t)
  [[ "$1" == --as-nobody ]] && { run=(as_nobody); shift; }
  local out
  out=$("${run[@]}" salloc --no-shell "$@" 2>&1) || { echo "salloc $*: $out" >&2; return 1; }
  sed -n 's/.*Granted job allocation \([0-9][0-9]*\).*/\1/p' <<<"$out" | head -n1
}

# end_state JOB: waits (up to 20 s) for JOB's line in the jobcomp file and
# prints its JobState.
end_state() {
  local i line
  for ((i = 0; i < 40; i++)); do
    line=$(grep "^JobId=$1 " "$BED_SLURM_JOBCOMP" 2>/dev/null || true)
    [[ -n "$line" ]] && { sed -n 's/.* JobState=\([A-Z_]*\) .*/\1/p' <<<"$line"; return 0; }
    sleep 0.5
  done
  echo "(no line for job $1 in $BED_SLURM_JOBCOMP)"
}

# munge: one key, one socket, reached from the machine and from a host.
out=$(munge -S "$BED_SLURM_MUNGE_SOCKET" -n | unmunge -S "$BED_SLURM_MUNGE_SOCKET" 2>&1 | grep '^STATUS:' || true)
[[ "$out" == *Success* ]] && ok "munge: round trip through $BED_SLURM_MUNGE_SOCKET: $out" || bad "munge: $out"
out=$("$HERE/bed.sh" exec "${nodes[0]}" sh -c "munge -S '$BED_SLURM_MUNGE_SOCKET' -n | unmunge -S '$BED_SLURM_MUNGE_SOCKET'" 2>&1 | grep '^STATUS:' || true)
[[ "$out" == *Success* ]] && ok "munge: round trip from ${nodes[0]}: $out" || bad "munge from ${nodes[0]}: $out"

# Controller and nodes.
out=$(t scontrol ping 2>&1 || true)
[[ "$out" == *"is UP"* ]] && ok "scontrol ping: $out" || bad "scontrol ping: $out"
out=$(t sinfo -N -h -o '%N %P %T %G %c' 2>&1 || true)
want=$(for n in "${nodes[@]}"; do echo "$n $BED_SLURM_PARTITION* idle gpu:$BED_SLURM_GPUS_PER_NODE"; done)
got=$(awk '{print $1, $2, $3, $4}' <<<"$out")
[[ "$got" == "$want" ]] && ok "sinfo: $(one_line "$out")" || bad "sinfo: got '$(one_line "$out")', want '$(one_line "$want")'"

# Each host's own dockerd is its default engine (what a job step reaches).
for n in "${nodes[@]}"; do
  out=$("$HERE/bed.sh" exec "$n" docker info --format '{{.Name}}' 2>&1 || true)
  [[ "$out" == "$n" ]] && ok "$n: default docker engine is $out" || bad "$n: default docker engine answers '$out', not $n"
done

# The loopback ssh host finds the cluster (SetEnv SLURM_CONF in its sshd).
out=$(t "$HERE/bed.sh" ssh lo 'echo "$SLURM_CONF"; squeue -h -o %i >/dev/null && echo squeue-ok; srun -N1 -w '"${nodes[-1]}"' -t 1 hostname' 2>&1 || true)
[[ "$out" == "$SLURM_CONF"$'\n'squeue-ok$'\n'"${nodes[-1]}" ]] &&
  ok "lo (ssh): SLURM_CONF=$SLURM_CONF, squeue works, srun -w ${nodes[-1]} hostname -> ${nodes[-1]}" ||
  bad "lo (ssh): got '$(one_line "$out")'"

# An allocation on every node, with one GPU each: per-node GRES indices.
mid=${nodes[1]:-${nodes[0]}}
mid_addr_var="BED_HOST_${mid}_ADDR"
mid_addr=${!mid_addr_var}
if J=$(alloc -N"${#nodes[@]}" -t 5 --gres=gpu:1) && [[ -n "$J" ]]; then
  jobs+=("$J")
  ok "salloc --no-shell -N${#nodes[@]} -t 5 --gres=gpu:1: job $J"
  out=$(t scontrol show job -d "$J" 2>&1 || true)
  gres=$(grep -o 'GRES=gpu[^ ]*(IDX:[0-9,-]*)' <<<"$out" || true)
  [[ -n "$gres" ]] && ok "scontrol show job -d $J: $(grep -E '^ +Nodes=' <<<"$out" | sed 's/^ *//' | tr '\n' ';')" ||
    bad "scontrol show job -d $J has no per-node GRES=gpu:..(IDX:..): $out"
  # A step on the middle node: its hostname, address and engine.
  out=$(t srun --jobid "$J" --overlap -N1 -w "$mid" sh -c \
    'hostname; ip -4 -o addr show eth0; docker info --format "{{.Name}}"; docker ps -q >/dev/null && echo docker-ps-ok; echo "CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-}"' 2>&1 || true)
  mapfile -t l <<<"$out"
  if [[ "${l[0]:-}" == "$mid" && "${l[1]:-}" == *"inet $mid_addr/"* && "${l[2]:-}" == "$mid" && "${l[3]:-}" == docker-ps-ok ]]; then
    ok "srun --jobid $J --overlap -w $mid: hostname ${l[0]}, eth0 $mid_addr, docker engine ${l[2]}, docker ps works, ${l[4]:-}"
  else
    bad "srun --jobid $J --overlap -w $mid: got: $out"
  fi
  t scancel "$J" || bad "scancel $J failed"
  s=$(end_state "$J")
  [[ "$s" == CANCELLED ]] && ok "scancel $J: jobcomp says $s" || bad "scancel $J: jobcomp says $s"
  out=$(t sacct --completion -j "$J" -n -o JobID,State 2>&1 || true)
  [[ "$out" == *CANCELLED* ]] && ok "sacct --completion -j $J: $(one_line "$out")" || bad "sacct --completion -j $J: $out"
  # COMPLETING while the nodes' epilog runs, then CANCELLED.
  for _ in $(seq 50); do
    out=$(t scontrol show job "$J" 2>&1 | grep -o 'JobState=[A-Z_]*' || true)
    [[ "$out" == JobState=COMPLETING ]] || break
    sleep 0.2
  done
  [[ "$out" == JobState=CANCELLED ]] && ok "scontrol show job $J (ended): $out" || bad "scontrol show job $J (ended): '$out'"
else
  bad "salloc --no-shell -N${#nodes[@]}: ${J:-no job id}"
fi

# Another user (uid 65534), the way a colleague would: allocate, cancel.
if J=$(alloc --as-nobody -N1 -t 5) && [[ -n "$J" ]]; then
  jobs+=("$J")
  out=$(t squeue -h -j "$J" -o '%u %T %N' 2>&1 || true)
  [[ "$out" == "nobody RUNNING "* ]] && ok "uid 65534: salloc job $J: $out" || bad "uid 65534: squeue -j $J: $out"
  as_nobody scancel "$J" || bad "uid 65534: scancel $J failed"
  s=$(end_state "$J")
  line=$(grep "^JobId=$J " "$BED_SLURM_JOBCOMP" | grep -o 'UserId=[^ ]*' || true)
  [[ "$s" == CANCELLED && "$line" == "UserId=nobody(65534)" ]] && ok "uid 65534: scancel $J: jobcomp says $s, $line" ||
    bad "uid 65534: scancel $J: jobcomp says $s, $line"
else
  bad "uid 65534: salloc failed: ${J:-no job id}"
fi

# A batch job ends COMPLETED.
if J=$(t sbatch --parsable -o /dev/null -t 1 --wrap true 2>&1) && [[ "$J" =~ ^[0-9]+$ ]]; then
  jobs+=("$J")
  s=$(end_state "$J")
  [[ "$s" == COMPLETED ]] && ok "sbatch --wrap true: job $J, jobcomp says $s" || bad "sbatch --wrap true: job $J, jobcomp says $s"
else
  bad "sbatch --wrap true: $J"
fi

if ((fails)); then
  echo "slurm-smoke: $fails check(s) FAILED (logs: $BED_SLURM_LOG_DIR)" >&2
  exit 1
fi
echo "slurm-smoke: all checks passed"
