// barge's open-file budget: one TCP socket per SSH host (and the event loop's
// duplicate of it, ssh_executor.cc) and one log file per
// node stay open for the whole job, so a large job needs more descriptors
// than the usual soft limit of 1024. barge raises its soft RLIMIT_NOFILE to
// the hard limit at start and, when even that is too low for the job, says
// so before it connects anywhere (instead of failing midway with EMFILE).
#pragma once

#include <cstdint>

#include "base/status.h"

namespace barge::runner {

struct OpenFileLimit {
  uint64_t soft = 0;
  uint64_t hard = 0;  // RLIM_INFINITY reads as UINT64_MAX
};

// Raises this process's soft RLIMIT_NOFILE to its hard limit (capped at
// what the kernel accepts, /proc/sys/fs/nr_open, when the hard limit is
// unlimited). Returns the limits in force afterwards; on failure the soft
// limit is unchanged and the error says why.
[[nodiscard]] Result<OpenFileLimit> RaiseOpenFileLimit();

// Descriptors a job needs: a fixed base (stdio, the job store, the event
// loop, the local executor's pipes) plus, with a quarter for margin, two
// descriptors per SSH host (its socket and the loop's duplicate) and one log
// file per node. Channels on a
// session share its socket.
uint64_t OpenFilesNeeded(int ssh_hosts, int nodes);

// Ok when `limit.soft` covers OpenFilesNeeded; otherwise an error naming the
// need, the host count and the limits, and how to raise them.
[[nodiscard]] Status CheckOpenFileLimit(int ssh_hosts, int nodes, const OpenFileLimit& limit);

}  // namespace barge::runner
