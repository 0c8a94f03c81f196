#!/bin/sh
# A Slurm Epilog for nodes where barge runs containers (`slurm:` jobs).
#
# Docker's containers live outside Slurm's cgroups: when an allocation ends
# while its barge controller is gone (killed, its machine down), Slurm kills
# the allocation's processes, the hosts' lease watchdogs included where SSH
# sessions are adopted into the job (pam_slurm_adopt) or started as job
# steps, but not the containers. barge labels every node container of a
# slurm: job with the allocation's id (barge.slurm_job); this epilog, run by
# slurmd as root on each node when a job ends, removes those containers and
# everything else of the same barge job there (its holds and lease).
#
# Install: copy to the nodes and set `Epilog=/path/to/epilog.sh` in
# slurm.conf (or add these lines to the site's epilog). It always exits 0:
# an epilog that fails drains the node.
[ -n "${SLURM_JOB_ID:-}" ] || exit 0
jobs=$(timeout 30 docker ps -a --filter "label=barge.slurm_job=$SLURM_JOB_ID" \
  --format '{{.Label "barge.job"}}' 2>/dev/null | sort -u) || exit 0
for job in $jobs; do
  case "$job" in *[!0-9a-f]*|'') continue ;; esac
  ids=$(timeout 30 docker ps -aq --filter "label=barge.job=$job" 2>/dev/null) || continue
  [ -z "$ids" ] || timeout 60 docker rm -f $ids >/dev/null 2>&1
done
exit 0
