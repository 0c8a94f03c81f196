// The array controller: runs a job array's members, each a full barge job
// (connect, preflight, head/worker, rendezvous, logs, teardown, store) on
// hosts of its own taken from the job's inventory as a pool.
//
// Shape: one process per running member. The array controller forks a
// child per member attempt, which runs the ordinary single-job Controller
// (RunJob, its own event loop and job record) on the member's spec; the
// array controller passes each child's output on, prefixed with the member
// index (member_output.h), hands out and takes back hosts (host_pool.h),
// retries failed members, and records every member in the store
// (array_store.h). The Controller runs one job on one loop and blocks in
// its phases, so a process per member reuses it unchanged, and gives each
// member what a single job has: its own pid for `barge down`, its own
// watchdog leases, and isolation from the others' faults. The array
// controller itself waits on one event loop (ssh/event_loop.h): its
// members' output pipes and the signals (console/signals.h's
// SignalWatcher, as in every barge process), and reaps exits between
// polls. A member inherits none of its descriptors.
//
// Members run in their own process groups: a Ctrl-C (or `barge down
// ARRAY`'s SIGTERM) reaches the array controller, which stops starting
// members, cancels the waiting ones and passes the signal to each running
// member once (a second one kills them, as for a single job).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "runner/array/array_params.h"
#include "runner/jobfile/job_spec.h"

namespace barge::runner::array {

struct ArrayRunOptions {
  std::string state_dir;
  std::string spec_text;  // each member job's recorded spec (the job file as run)
  bool echo = true;       // members' lines to this process's stdout/stderr
  // `--events json` (array_events.h): the array's events, written here (not
  // owned; null: none). When it is stdout, the members' stdout lines are
  // not echoed and the summary table goes to stderr, so stdout stays
  // parseable.
  std::FILE* events = nullptr;
};

// Records a new array `array_id` (status running, every member waiting).
[[nodiscard]] Status CreateArrayRecord(const std::string& state_dir, const JobSpec& spec,
                                       const ArrayParams& params, const std::string& array_id);

// Runs every member of array `array_id` whose status is waiting, until all
// have ended; prints the summary table; records the array's outcome.
// Returns 0 when every member succeeded, 130 after an interrupt, 125
// otherwise.
int RunArray(const JobSpec& spec, const ArrayParams& params, const std::string& array_id,
             const ArrayRunOptions& options);

}  // namespace barge::runner::array
