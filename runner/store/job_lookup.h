// Finding a recorded job from what a user typed (an id, a unique prefix, a
// name), and telling whether its controller still runs: for the command
// line and the dashboard alike.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "base/status.h"
#include "runner/store/job_store.h"

namespace barge::runner {

// The store under `state_dir`, or nullptr when no database exists yet.
[[nodiscard]] Result<std::unique_ptr<JobStore>> OpenIfPresent(const std::string& state_dir);

// True while process `pid` exists (kill(pid, 0) succeeds or says EPERM).
// nullopt (no controller recorded) is not alive. A reused pid reads as
// alive.
bool ControllerAlive(std::optional<int> pid);

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
