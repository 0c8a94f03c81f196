// SlurmAllocation (slurm_allocation.h): salloc, squeue, scontrol and
// scancel as commands on the job's loop.
#include "runner/controller/slurm_allocation.h"

#include <map>
#include <optional>
#include <utility>

#include "runner/controller/srun_connector.h"
#include "runner/remote/slurm.h"
#include "runner/store/host_faults.h"
#include "runner/store/job_store.h"

namespace barge::runner::internal {

SlurmAllocation::SlurmAllocation(JobContext* ctx, SubmitConnect connect)
    : JobPart(ctx),
      connect_(std::move(connect)),
      label_(ctx->spec.slurm->login.empty() ? "this machine" : ctx->spec.slurm->login) {
  if (!connect_) {
    connect_ = [spec = &ctx->spec](ssh::EventLoop* loop) { return ConnectSubmitHost(*spec, loop); };
  }
}

SlurmAllocation::~SlurmAllocation() = default;

Status SlurmAllocation::Connect() {
  if (submit_ && submit_->health().ok()) return Status::Ok();
  // No command of the watch may outlive the executor it runs on.
  StopWatching();
  submit_.reset();
  Result<std::unique_ptr<ssh::Executor>> exec = connect_(&ctx_.loop);
  if (!exec.ok()) return exec.status();
  submit_ = std::move(exec).value();
  return Status::Ok();
}

Result<Outcome> SlurmAllocation::RunToEnd(const std::string& line, milliseconds limit) {
  std::optional<Outcome> outcome;
  // Its stdout and stderr are kept to CommandGroup::kMaxOutputBytes each (a
  // broken or hostile login host must not fill the controller's memory):
  // past that the command fails, naming the stream.
  CommandGroup group(&ctx_.loop, &ctx_.redact);
  group.Run(*submit_, line, [&outcome](const Outcome& o) { outcome = o; });
  if (!RunUntil([&outcome] { return outcome.has_value(); }, Now() + limit)) {
    return Status::Error("`" + line + "` on " + label_ + " did not end within " +
                         std::to_string(std::chrono::duration_cast<seconds>(limit).count()) + " s");
  }
  if (!outcome->exit.known()) return Status::Error("`" + line + "` on " + label_ + ": " + outcome->exit.error);
  return std::move(*outcome);
}

void SlurmAllocation::NoteId(const std::string& id) {
  id_ = id;
  Event(kSlurmJobEvent, std::nullopt, id_);
  Say("job " + ctx_.job_id + " (" + ctx_.spec.name + "): Slurm job " + id_ + " submitted from " + label_);
}

void SlurmAllocation::Cancel(const std::string& why) {
  if (id_.empty() || released_) return;
  Result<Outcome> r = RunToEnd(slurm::ScancelLine(id_), seconds(60));
  const bool ok = r.ok() && r->exit.code == 0;
  released_ = true;
  Event(kSlurmReleasedEvent, std::nullopt,
        "scancel " + id_ + (why.empty() ? "" : " (" + why + ")") +
            (ok ? "" : ": " + (r.ok() ? SlurmErrorTail(r->err) : r.status().message())));
}

void SlurmAllocation::LookAtQueue(CommandGroup& group, std::string* shown) {
  group.Run(*submit_, slurm::SqueueLine(id_), [this, shown](const Outcome& o) {
    if (!o.ok()) return;
    Result<slurm::QueueState> state = slurm::ParseSqueue(o.out);
    if (!state.ok() || state->state != "PENDING") return;
    const std::string& partition = ctx_.spec.slurm->partition;
    const std::string text =
        "queued in " + (partition.empty() ? std::string("Slurm") : partition) + ": " + state->reason;
    if (text == *shown) return;
    *shown = text;
    Say(text + " (Slurm job " + id_ + ")");
    SetStatus(JobStatus::kWaiting, text + " (Slurm job " + id_ + ")");
  });
}

Status SlurmAllocation::Allocate() {
  if (Status s = Connect(); !s.ok()) return s;
  const std::string line = slurm::SallocLine(*ctx_.spec.slurm, ctx_.job_id, ctx_.spec.name);
  // salloc's state, on this frame: the groups below (destroyed first) drop
  // their callbacks when Allocate returns.
  std::optional<int> exit_code;
  std::string err;
  bool overflow = false;
  std::string shown;  // the last queue state said
  ssh::CommandCallbacks cb;
  // Bounded like every host command's output (CommandGroup): past it, the
  // allocation is cancelled and the job fails.
  auto keep = [this, &err, &overflow](std::string_view d) {
    if (err.size() + d.size() > CommandGroup::kMaxOutputBytes) {
      overflow = true;
      return;
    }
    err.append(d);
    if (id_.empty()) {
      if (std::optional<std::string> id = slurm::JobIdInSalloc(err)) NoteId(*id);
    }
  };
  cb.on_stderr = keep;
  cb.on_stdout = keep;
  cb.on_exit = [&exit_code, &err](const ssh::ExitStatus& s) {
    exit_code = s.code;
    if (!s.error.empty()) err.append(s.error + "\n");
  };
  CommandGroup queue(&ctx_.loop, &ctx_.redact);  // squeue, one at a time
  CommandGroup salloc(&ctx_.loop, &ctx_.redact);
  salloc.Stream(*submit_, line, std::move(cb));

  // Until salloc ends, an interrupt, the output bound, or the job's wait:
  // (counted once Slurm named the job: before that, nothing can be
  // cancelled). The queue is looked at 2 s in, then every 3 s.
  const Clock::time_point began = Now();
  const Clock::time_point wait_end = ctx_.spec.wait ? began + *ctx_.spec.wait : Clock::time_point::max();
  auto over = [&] {
    return exit_code.has_value() || overflow || ctx_.interrupts > 0 || (!id_.empty() && Now() >= wait_end);
  };
  Clock::time_point next_look = began + seconds(2);
  Clock::time_point asked = began;
  while (!RunUntil(over, next_look)) {
    next_look = Now() + seconds(3);
    if (id_.empty()) continue;
    if (!queue.idle() && Now() - asked < seconds(30)) continue;  // still asking
    queue.Cancel();  // unanswered for 30 s: asked again
    asked = Now();
    LookAtQueue(queue, &shown);
  }
  queue.Cancel();
  if (ctx_.interrupts > 0) {
    Cancel("interrupted while queued");
    return Status::Error("interrupted while queued in Slurm");
  }
  if (overflow) {
    Cancel("salloc's output passed the bound");
    return Status::Error("`" + line + "` on " + label_ + " wrote more than " +
                         std::to_string(CommandGroup::kMaxOutputBytes) +
                         " bytes, the most barge reads from a host command; cancelled");
  }
  if (!exit_code) {
    Cancel("still queued after wait:");
    return Status::Error("Slurm job " + id_ + " was still queued after " +
                         std::to_string(std::chrono::duration_cast<seconds>(*ctx_.spec.wait).count()) +
                         " s (wait:); cancelled");
  }
  if (*exit_code != 0 || id_.empty()) {
    const std::string why = SlurmErrorTail(err);
    Cancel("salloc failed");
    return Status::Error("Slurm did not grant the allocation: `" + line + "` on " + label_ + " exited " +
                         std::to_string(*exit_code) + (why.empty() ? "" : ": " + why));
  }
  Result<std::vector<SlurmNode>> got = AllocatedNodes();
  if (!got.ok()) {
    Cancel("");
    return got.status();
  }
  nodes_ = std::move(got).value();
  Event(kSlurmNodesEvent, std::nullopt, FormatSlurmNodes(nodes_));
  std::string listed;
  for (const SlurmNode& n : nodes_) listed += (listed.empty() ? "" : ", ") + n.name + " (" + n.address + ")";
  Say("Slurm job " + id_ + " granted " + std::to_string(nodes_.size()) + " node(s): " + listed);
  return Status::Ok();
}

Result<std::vector<SlurmNode>> SlurmAllocation::AllocatedNodes() {
  const std::string show_job = slurm::ShowJobLine(id_);
  Result<Outcome> shown = RunToEnd(show_job, seconds(60));
  if (!shown.ok()) return shown.status();
  if (shown->exit.code != 0) {
    return Status::Error("`" + show_job + "` failed (exit " + std::to_string(shown->exit.code) +
                         "): " + SlurmErrorTail(shown->err));
  }
  Result<slurm::JobInfo> info = slurm::ParseShowJob(shown->out);
  if (!info.ok()) return info.status();
  if (info->nodes.empty()) return Status::Error("Slurm job " + id_ + " has no nodes (" + info->state + ")");
  const std::string show_nodes = slurm::ShowNodesLine(info->node_list);
  Result<Outcome> nodes = RunToEnd(show_nodes, seconds(60));
  if (!nodes.ok()) return nodes.status();
  if (nodes->exit.code != 0) {
    return Status::Error("`" + show_nodes + "` failed (exit " + std::to_string(nodes->exit.code) +
                         "): " + SlurmErrorTail(nodes->err));
  }
  Result<std::map<std::string, std::string>> addresses = slurm::ParseNodeAddresses(nodes->out);
  if (!addresses.ok()) return addresses.status();
  std::vector<SlurmNode> out;
  for (const slurm::JobNode& n : info->nodes) {
    auto it = addresses->find(n.name);
    if (it == addresses->end()) return Status::Error("Slurm names no address for node " + n.name);
    out.push_back(SlurmNode{n.name, it->second, n.gpus, n.cpus, n.mem_mb});
  }
  return out;
}

Status SlurmAllocation::Place(Planner* planner) const {
  return planner->Allocated(*ctx_.spec.slurm, nodes_, id_);
}

std::unique_ptr<HostConnector> SlurmAllocation::StepConnector() const {
  if (ctx_.spec.slurm->transport != SlurmSpec::Transport::kSrun) return nullptr;
  return std::make_unique<SrunHostConnector>(&ctx_.loop, ctx_.spec, id_);
}

void SlurmAllocation::Watch(milliseconds every, std::function<void(OutsideEnd)> ended) {
  StopWatching();
  if (id_.empty() || !submit_) return;
  every_ = every;
  ended_ = std::move(ended);
  ticks_.After(every_, [this] { Look(); });
}

void SlurmAllocation::StopWatching() {
  ticks_.Cancel();
  asks_.Cancel();
  ended_ = nullptr;
}

void SlurmAllocation::Look() {
  // From a tick: a question still unanswered since the last look is one
  // Slurm did not answer, which ends nothing.
  asks_.Cancel();
  ticks_.After(every_, [this] { Look(); });
  asks_.Run(*submit_, slurm::SqueueLine(id_), [this](const Outcome& o) {
    if (!o.ok()) return;
    Result<slurm::QueueState> q = slurm::ParseSqueue(o.out);
    if (!q.ok()) return;
    if (q->state == "RUNNING" || q->state == "CONFIGURING" || q->state == "SUSPENDED") return;
    ticks_.Cancel();  // no more looks
    if (!q->state.empty() && q->state != "COMPLETING") {
      Ended(q->state, q->reason);
      return;
    }
    // Gone from the queue: its record says how it ended; squeue's answer
    // stands when scontrol does not answer within 20 s.
    const slurm::QueueState said = *q;
    ticks_.After(seconds(20), [this, said] {
      asks_.Cancel();
      Ended(said.state, said.reason);
    });
    asks_.Run(*submit_, slurm::ShowJobLine(id_), [this, said](const Outcome& shown) {
      ticks_.Cancel();
      slurm::QueueState end = said;
      if (shown.ok()) {
        if (Result<slurm::JobInfo> info = slurm::ParseShowJob(shown.out); info.ok()) {
          end.state = info->state;
          end.reason = info->reason;
        }
      }
      Ended(end.state, end.reason);
    });
  });
}

void SlurmAllocation::Ended(const std::string& state, const std::string& reason) {
  const std::string shown = state.empty() ? "no longer known to Slurm" : state;
  OutsideEnd end{"Slurm ended allocation " + id_ + " (" + shown +
                     (reason.empty() || reason == "None" ? "" : ", " + reason) + ")",
                 state == "TIMEOUT"};
  std::function<void(OutsideEnd)> ended = std::move(ended_);
  ended_ = nullptr;
  if (ended) ended(std::move(end));
}

void SlurmAllocation::SayDrainCommands() {
  if (!ctx_.store || nodes_.empty()) return;
  Result<std::vector<EventRecord>> events = ctx_.store->GetEvents(ctx_.job_id);
  Result<std::vector<PhaseRecord>> phases = ctx_.store->GetPhases(ctx_.job_id);
  if (!events.ok() || !phases.ok()) return;
  std::map<std::string, std::string> caused = HostCausedFailures(*events, *phases);
  for (const std::string& out : UnavailableHosts(*events)) caused.emplace(out, "its GPUs are unhealthy");
  for (const SlurmNode& n : nodes_) {
    auto it = caused.find(n.address);
    if (it == caused.end()) continue;
    // Its first line; Slurm keeps a reason short (the whole story is in
    // `barge show`).
    const std::string what = it->second.substr(0, it->second.find('\n'));
    std::string reason = "barge " + ctx_.job_id + ": " + what;
    if (reason.size() > 100) reason = reason.substr(0, 97) + "...";
    Say("node " + n.name + " (" + n.address + ") is unusable (" + what +
        "); to take it out of Slurm's service: " + slurm::DrainCommand(n.name, reason));
  }
}

Status SlurmAllocation::Release() {
  StopWatching();
  if (id_.empty() || released_) return Status::Ok();
  const std::string line = slurm::ScancelLine(id_);
  Status released = Connect();
  if (released.ok()) {
    Result<Outcome> r = RunToEnd(line, seconds(60));
    if (!r.ok()) {
      released = r.status();
    } else if (r->exit.code != 0) {
      released = Status::Error("`" + line + "` on " + label_ + " exited " + std::to_string(r->exit.code) + ": " +
                               SlurmErrorTail(r->err));
    }
  }
  released_ = true;
  Event(kSlurmReleasedEvent, std::nullopt, "scancel " + id_ + (released.ok() ? "" : ": " + released.message()));
  if (released.ok()) {
    Say("Slurm job " + id_ + " released");
  } else {
    Say("could not release Slurm job " + id_ + " (Slurm ends it at its time limit): " + released.message());
  }
  return released;
}

}  // namespace barge::runner::internal
