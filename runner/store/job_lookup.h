// Finding a recorded job from what a user typed (an id, a unique prefix, a
// name), and telling whether its controller still runs: for the command
// line and the dashboard alike.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "runner/store/job_store.h"
#include "runner/store/process_identity.h"

namespace barge::runner {

// The store under `state_dir`, or nullptr when no database exists yet.
[[nodiscard]] Result<std::unique_ptr<JobStore>> OpenIfPresent(const std::string& state_dir);

// Every job of the store under `state_dir` (ListJobs: newest first), each
// whose controller is gone marked lost first (MarkLostIfControllerGone),
// so what is listed is true now; the store stays open in `*store` for more
// reads (nullptr, and no job, when no database exists: nothing is made).
[[nodiscard]] Result<std::vector<JobRecord>> ListJobsNow(const std::string& state_dir,
                                                         std::unique_ptr<JobStore>* store);

// True while the controller recorded as `pid` with `identity` still runs:
// /proc/PID exists, the process has not exited (not a zombie), and its
// boot id, start time and uid are those recorded, so a pid the kernel gave
// to another process (after the controller died, or after a reboot) is not
// alive, whoever's process it is. nullopt `pid` (no controller recorded) is
// not alive. A record without an identity (written by a barge before
// identities, or where /proc could not be read) is judged by the pid alone,
// but only a process of this user (effective uid) counts: a controller runs
// as its store's user.
bool ControllerAlive(std::optional<int> pid, const std::optional<ProcessIdentity>& identity);

// Sends `signal` to the controller recorded as `pid` with `identity` only
// while ControllerAlive says it is that controller. Where the kernel has
// pidfds (Linux 5.3), the process is pinned (pidfd_open) before the check
// and signalled through that pidfd, so a pid reused between the check and
// the signal cannot be hit; elsewhere kill(2) follows the check. Returns
// whether the signal was sent (false: not alive, or sending failed).
bool SignalController(std::optional<int> pid, const std::optional<ProcessIdentity>& identity, int signal);

// A recorded job and the store it was found in.
struct FoundJob {
  std::unique_ptr<JobStore> store;
  JobRecord job;
};
// Opens the store (creating none) and finds JOB: an exact id, the latest
// job of that name, or a unique id prefix. A job whose controller is gone
// is marked lost first (MarkLostIfControllerGone).
[[nodiscard]] Result<FoundJob> FindJob(const std::string& state_dir, const std::string& job_text);

// When `job` is not final and its controller is gone, marks it lost in the
// store and updates `*job` to match. For `attach`, `logs -f`, `down` too.
[[nodiscard]] Status MarkLostIfControllerGone(JobStore& store, JobRecord* job);

}  // namespace barge::runner
