// Keep (keep.h): a failed job kept for a look before its teardown.
#include "runner/controller/keep.h"

#include <chrono>
#include <string>

#include "runner/console/time_format.h"
#include "runner/controller/job_state.h"
#include "runner/store/job_store.h"

namespace barge::runner::internal {

bool Keep::KeepFailedJob() {
  if (!ctx_.spec.on_failure || ctx_.interrupts > 0) return false;
  size_t kept = 0, live = 0;
  for (const auto& n : attempt_.nodes) {
    if (!n->run_attempted) continue;
    ++kept;
    if (n->phase == NodePhase::kRunning) ++live;
  }
  if (kept == 0) return false;
  const milliseconds keep = ctx_.spec.on_failure->keep;
  const Clock::time_point until = Now() + keep;
  const std::string for_how_long = FormatDuration(keep);
  const std::string& id = ctx_.job_id;
  const std::string detail = "kept for a look for " + for_how_long + " (on_failure.keep)";
  SetStatus(JobStatus::kCompleting, detail);
  Event(event::kKept, std::nullopt, detail);
  // The failed attempt's monitors stop: a hang or an engine probe would
  // only find faults in a job that has ended.
  ++attempt_.generation;
  // The watchdogs first: once it is said, the keep holds without barge.
  leases_.KeepUntil(until);
  Say("keeping the job's " + std::to_string(kept) + " container(s) (" + std::to_string(live) +
      " still running) for " + for_how_long + " for a look (on_failure.keep): barge logs " + id + ", barge attach " +
      id + ", barge exec " + id + " --node RANK -- CMD; barge down " + id + " ends it now");
  const bool interrupted = RunUntil([this] { return ctx_.interrupts > 0; }, until);
  Say(interrupted ? "the keep ended early: tearing the job down" : "the keep (" + for_how_long + ") ended: tearing the job down");
  return true;
}

}  // namespace barge::runner::internal
