// A job whose hosts are a Slurm allocation (`slurm:`, runner/jobfile/job_spec.h).
//
// `barge run` asks Slurm for the allocation (salloc --no-shell, on this
// machine or over SSH on slurm.login: runner/remote/slurm.h), prints each
// change of its place in the queue ("queued in gpu: Priority"), then runs
// the job on the allocated nodes exactly as on listed hosts (the same
// Controller, plan, env, logs, teardown and store), and ends the allocation
// (scancel) however the job ends: success, failure, Ctrl-C, `barge down`.
// The Controller does all of it on the job's loop, through its part
// SlurmAllocation (slurm_allocation.h). A controller that dies leaves it to
// Slurm's time limit and the hosts' watchdogs; `barge down` of the orphaned
// job cancels it (CancelSlurmAllocation).
//
// This header is what the verbs share with the run: the store keeps what
// the allocation was (events of the job): "slurm_job" (the Slurm job id,
// written as soon as Slurm names it, so that `down` of a queued job can
// cancel it), "slurm_nodes" (the nodes and their addresses, so that down,
// exec and attach reach the same hosts) and "slurm_released"; and the
// nodes are placed into a plan's facts (PlaceOnSlurmNodes) the same way for
// the run and for the verbs.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "cluster/plan.h"
#include "runner/jobfile/job_spec.h"

namespace barge::runner {

// The store's event kinds (see the header).
inline constexpr const char* kSlurmJobEvent = "slurm_job";
inline constexpr const char* kSlurmNodesEvent = "slurm_nodes";
inline constexpr const char* kSlurmReleasedEvent = "slurm_released";

// One allocated node: Slurm's name for it and its NodeAddr.
struct SlurmNode {
  std::string name;
  std::string address;
  // The allocation's share of the node (scontrol -d), for a shared node's
  // limits; not kept in the store.
  std::vector<int> gpus;
  int cpus = 0;
  long long mem_mb = 0;
};

// "h1=10.77.0.2 h2=10.77.0.3": the slurm_nodes event's detail.
std::string FormatSlurmNodes(const std::vector<SlurmNode>& nodes);
Result<std::vector<SlurmNode>> ParseSlurmNodes(const std::string& detail);

// The facts of a slurm: job's plan (`input`, made by MakePlanInput from the
// job's spec, with its placeholder hosts) on `nodes`: host N is node N, its
// address and internal address the node's NodeAddr, its var SLURM_NODE the
// node's name. Fails, changing nothing, when the counts differ. With
// `slurm.exclusive` false, every container on node N gets the allocation's
// share of it as Docker limits, whatever the job's container blocks say:
// --gpus "device=<its GPU indices>" (no GPUs where it got none), --cpus
// <its CPU count>, --memory <its Mem, else slurm.mem_per_node>; the
// job-wide and per-role gpus are cleared in `input`'s own copies. The spec
// itself is never edited.
[[nodiscard]] Status PlaceOnSlurmNodes(const SlurmSpec& slurm, const std::vector<SlurmNode>& nodes,
                                       cluster::PlanInput* input);

// `text`'s last non-blank lines (at most `n`), joined by "; ": what a
// failed Slurm command's message quotes of its stderr.
std::string SlurmErrorTail(const std::string& text, size_t n = 3);

// What the store says of a job's allocation (its events).
struct RecordedAllocation {
  std::string slurm_id;          // "" when Slurm never named one
  std::vector<SlurmNode> nodes;  // empty until granted
  bool released = false;         // barge ended it (slurm_released)
};
class JobStore;
Result<RecordedAllocation> ReadRecordedAllocation(JobStore& store, const std::string& job_id);

// `scancel ID` where the job's Slurm commands run (this machine or
// slurm.login), for `barge down` of a job whose controller is gone; Ok
// when Slurm took it (an allocation that already ended included). Runs on
// a loop of its own (there is no job's loop); blocks up to 60 s.
[[nodiscard]] Status CancelSlurmAllocation(const JobSpec& spec, const std::string& slurm_id);

}  // namespace barge::runner
