// Teardown: once the attempt is over, stop what still runs (docker stop,
// or kill after a second interrupt), let the log streams drain, copy the
// artifacts a last time, remove every container of the attempt on every
// reachable host (on the last teardown with the job's holds and the
// watchdog's disarming), then (when the job is over) run the teardown
// hooks.
#pragma once

#include <string>
#include <vector>

#include "runner/controller/artifacts.h"
#include "runner/controller/job.h"

namespace barge::runner::internal {

class Teardown : private JobPart {
 public:
  Teardown(Job* job, Artifacts* artifacts) : JobPart(job), artifacts_(*artifacts) {}

  // Stops and removes the attempt's containers on every reachable host,
  // with a last copy of the artifacts. `final`: the job is over, so the
  // teardown hooks run too.
  void Run(bool graceful, bool final = true);
  void RunTeardownHooks();

 private:
  // `docker stop -t GRACE NAMES` through the Engine API: one call per
  // container in `group`; `done` once all have answered (the first
  // failure, or success).
  void StopWithApi(CommandGroup& group, HostState& hs, const std::vector<std::string>& names,
                   int grace_seconds, CommandGroup::Done done);
  // The removal through the Engine API: every name or ID in `names` goes
  // (one already gone is fine); when one would not and `sweep`, everything
  // labelled with the job goes by a listing instead; then `then_line` (a
  // shell command line, e.g. the watchdog's disarming) runs when not
  // empty. `done` gets the removal's outcome, its exit unknown when
  // `then_line` could not run.
  void RemoveWithApi(CommandGroup& group, HostState& hs, const std::vector<std::string>& names, bool sweep,
                     const std::string& then_line, CommandGroup::Done done);

  Artifacts& artifacts_;
};

}  // namespace barge::runner::internal
