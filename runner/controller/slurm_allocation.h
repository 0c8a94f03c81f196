// SlurmAllocation: a slurm: job's allocation (slurm_run.h), a part of the
// job's Controller on the job's loop. Every Slurm command (salloc, squeue,
// scontrol, scancel) is a command of a CommandGroup on the submit host's
// executor (this machine, or one SSH session to slurm.login), started and
// answered on the loop; a wait for one is a wait of the loop (RunUntil), so
// that timers and streams go on meanwhile and a test's virtual clock
// drives it. Its messages are the controller's (Say: the observers), its
// records the job's (store events kSlurmJobEvent, kSlurmNodesEvent,
// kSlurmReleasedEvent, and the `waiting` status while queued).
//
// Threading: the loop's thread only.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "cluster/plan.h"
#include "runner/controller/host_connector.h"
#include "runner/controller/job_context.h"
#include "runner/controller/planner.h"
#include "runner/controller/slurm_run.h"
#include "runner/remote/command_group.h"
#include "ssh/executor.h"

namespace barge::runner::internal {

// The allocation ended under the running job (Watch): why, and whether as
// its time limit (the job then ends as timed out, else as failed).
struct OutsideEnd {
  std::string reason;
  bool timed_out = false;
};

// How often the Controller asks squeue while the job runs (Watch).
inline constexpr std::chrono::seconds kSlurmWatchEvery{10};

class SlurmAllocation : private JobPart {
 public:
  // How the submit host is reached on the loop; see ControllerOptions::
  // connect_slurm_submit.
  using SubmitConnect = std::function<Result<std::unique_ptr<ssh::Executor>>(ssh::EventLoop*)>;

  // The allocation of ctx->spec (its slurm: set). `connect` reaches the
  // submit host (unset: ConnectSubmitHost, this machine or slurm.login);
  // Allocate connects, and Release again if that session has died.
  SlurmAllocation(JobContext* ctx, SubmitConnect connect);
  ~SlurmAllocation();

  // Runs salloc until Slurm grants the allocation: the Slurm job id is
  // recorded (kSlurmJobEvent) and said as soon as salloc names it; while
  // queued, squeue is asked every 3 s and each change of the queue state
  // said and made the job's `waiting` status. Then scontrol names the
  // nodes and their addresses (kSlurmNodesEvent, said). Fails with the
  // reason, the allocation cancelled (kSlurmReleasedEvent) when Slurm had
  // named it: salloc failed, an interrupt (ctx.interrupts), salloc's output
  // past CommandGroup::kMaxOutputBytes, still queued past the job's
  // `wait:`, or nodes scontrol cannot name.
  [[nodiscard]] Status Allocate();
  // The grant into the facts of the plan (Planner::Allocated: the nodes
  // are the hosts, the containers labelled with the allocation), planned at
  // once. After Allocate succeeded.
  [[nodiscard]] Status Place(Planner* planner) const;
  // With slurm.transport srun: a connector that reaches the nodes as job
  // steps of the allocation (SrunHostConnector); null for ssh. After
  // Allocate succeeded.
  std::unique_ptr<HostConnector> StepConnector() const;

  // While the job runs: squeue every `every` (a timer: the loop is never
  // blocked), until the allocation is seen ended under the job (its time
  // limit, preemption, an admin's scancel): then `ended` runs once, from
  // the loop, with why (scontrol's record of how it ended, when squeue
  // knows it no more), and the watch stops. A squeue unanswered at the
  // next look, or failing, ends nothing. `ended` must not call Watch or
  // StopWatching. A second Watch replaces the first.
  void Watch(std::chrono::milliseconds every, std::function<void(OutsideEnd)> ended);
  void StopWatching();

  // On a failed job: each node the job found unusable (its engine, disk,
  // GPUs, session; or lost under the job), said with the command an
  // operator runs to drain it in Slurm; barge drains nothing itself.
  void SayDrainCommands();
  // scancel of the allocation (bounded: 60 s), recorded
  // (kSlurmReleasedEvent) and said; nothing when Slurm never named one or
  // it was cancelled already. Fails with why it could not be released.
  [[nodiscard]] Status Release();

  const std::string& id() const { return id_; }
  const std::vector<SlurmNode>& nodes() const { return nodes_; }

 private:
  // Where Slurm's commands run: the submit host, connected on first use
  // and again when its session has died.
  [[nodiscard]] Status Connect();
  // `line` on the submit host to its end, `limit` at most, the loop
  // running meanwhile. Fails when it did not end or its outcome is unknown
  // (its output past the bound included); an exit code is the caller's.
  Result<Outcome> RunToEnd(const std::string& line, std::chrono::milliseconds limit);
  // Salloc named the job: recorded and said.
  void NoteId(const std::string& id);
  // scancel while allocating (`why` in the record).
  void Cancel(const std::string& why);
  // One squeue while queued: a change of the queue state said.
  void LookAtQueue(CommandGroup& group, std::string* shown);
  // The nodes of the granted allocation, in Slurm's order, with addresses.
  Result<std::vector<SlurmNode>> AllocatedNodes();
  // The watch's look, and its end once Slurm says the allocation ended.
  void Look();
  void Ended(const std::string& state, const std::string& reason);

  SubmitConnect connect_;
  std::string label_;  // "this machine" or the login host
  std::unique_ptr<ssh::Executor> submit_;
  std::string id_;
  std::vector<SlurmNode> nodes_;
  bool released_ = false;
  // The watch: its timers and its questions, apart, so that each may be
  // cancelled from the other's callbacks. Last: they go before the
  // executor their commands run on.
  std::chrono::milliseconds every_{0};
  std::function<void(OutsideEnd)> ended_;
  CommandGroup ticks_{&ctx_.loop, &ctx_.redact};
  CommandGroup asks_{&ctx_.loop, &ctx_.redact};
};

}  // namespace barge::runner::internal
