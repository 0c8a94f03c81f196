// A job whose hosts are a Slurm allocation (`slurm:`, runner/jobfile/job_spec.h).
//
// `barge run` asks Slurm for the allocation (salloc --no-shell, on this
// machine or over SSH on slurm.login: runner/remote/slurm.h), prints each
// change of its place in the queue ("queued in gpu: Priority"), then runs
// the job on the allocated nodes exactly as on listed hosts (the same
// Controller, plan, env, logs, teardown and store), and ends the allocation
// (scancel) however the job ends: success, failure, Ctrl-C, `barge down`.
// A controller that dies leaves it to Slurm's time limit and the hosts'
// watchdogs; `barge down` of the orphaned job cancels it.
//
// The store keeps what the allocation was (events of the job): "slurm_job"
// (the Slurm job id, written as soon as Slurm names it, so that `down` of a
// queued job can cancel it), "slurm_nodes" (the nodes and their addresses,
// so that down, exec and attach reach the same hosts) and "slurm_released".
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "cluster/plan.h"
#include "runner/controller/entry_points.h"
#include "runner/jobfile/job_spec.h"
#include "ssh/event_loop.h"
#include "ssh/executor.h"

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

// `spec` (a slurm: job, with its placeholder hosts) on `nodes`: host N is
// node N, its address the node's NodeAddr. Fails when the counts differ.
// With slurm.exclusive false, every container on node N gets the
// allocation's share of it as Docker limits, whatever the job's container
// blocks say: --gpus "device=<its GPU indices>" (no GPUs where it got none),
// --cpus <its CPU count>, --memory <its Mem, else slurm.mem_per_node>.
Status PlaceOnSlurmNodes(JobSpec& spec, const std::vector<SlurmNode>& nodes);

// What the store says of a job's allocation (its events).
struct RecordedAllocation {
  std::string slurm_id;          // "" when Slurm never named one
  std::vector<SlurmNode> nodes;  // empty until granted
  bool released = false;         // barge ended it (slurm_released)
};
class JobStore;
Result<RecordedAllocation> ReadRecordedAllocation(JobStore& store, const std::string& job_id);

// Where a slurm: job's Slurm commands run (salloc, squeue, scontrol,
// scancel). Each use (the allocation, the watch while the job runs, the
// release) opens it on a loop of its own, made with `time`. The default:
// this machine or slurm.login (ConnectSubmitHost) on a real loop; a unit
// test gives scripted commands on virtual loops.
struct SlurmSubmitSeam {
  ssh::EventLoop::TimeSource time = ssh::EventLoop::TimeSource::kReal;
  // Unset: ConnectSubmitHost(spec, loop).
  std::function<Result<std::unique_ptr<ssh::Executor>>(ssh::EventLoop*)> connect;
};

// `barge run` of a slurm: job (RunJob calls it): allocate, run, release.
// `run` runs the job on the concrete spec (a Controller, with the job's
// store record already made). While queued, squeue is asked every 3 s;
// past the job's `wait:` the allocation is cancelled and the job fails
// (kExitBargeFailure). While the job runs, the controller asks squeue every
// ControllerOptions::outside_every (10 s). However the job ends, the
// allocation is cancelled after the controller returned (its containers gone).
int RunSlurmJob(const JobSpec& spec, const cluster::PlanInput& input, const ControllerOptions& options,
                const std::function<int(const JobSpec&, const cluster::PlanInput&, const ControllerOptions&)>& run,
                const SlurmSubmitSeam& seam = {});

// `scancel ID` where the job's Slurm commands run (this machine or
// slurm.login); Ok when Slurm took it (an allocation that already ended
// included). Blocks up to 60 s.
Status CancelSlurmAllocation(const JobSpec& spec, const std::string& slurm_id);

}  // namespace barge::runner
