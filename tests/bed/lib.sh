# shellcheck shell=bash
# tests/bed/lib.sh: what tests/bed/bed.sh and tests/bed/slurm.sh share.
# Sourced, never run. BED_LOG_NAME (set before sourcing) prefixes log and die
# lines ("bed", "slurm").

# The daemons these scripts start (sshd, dockerd, slurmd, ...) live on after
# them: they must not inherit the caller's descriptors beyond 0-2 (a
# caller's `flock LOCK ctest ...` lock fd would be held by every daemon for
# good, and the next flock on it would wait forever). Call it first.
close_inherited_fds() {
  local fd
  for fd in "/proc/$$/fd/"*; do
    fd=${fd##*/}
    if [[ $fd -gt 2 ]]; then eval "exec $fd>&-" 2>/dev/null || true; fi
  done
}

log() { printf '%s %s: %s\n' "$(date +%T.%3N)" "$BED_LOG_NAME" "$*" >&2; }
die() { printf '%s: ERROR: %s\n' "$BED_LOG_NAME" "$*" >&2; exit 1; }

# Alive = exists and is not a zombie. PID 1 here reaps late, so kill -0 lies.
alive() {
  local s
  s=$(cut -d' ' -f3 "/proc/$1/stat" 2>/dev/null) || return 1
  [[ -n "$s" && "$s" != Z && "$s" != X ]]
}
