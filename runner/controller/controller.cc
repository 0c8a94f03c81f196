// The flow of one job, top-down: Run records the job and calls Execute,
// which connects, logs in, preflights and uploads once, then runs attempts
// (Launch: plan, launch stages, run until the head ends) until the job
// succeeds, fails, is interrupted, times out, or a fault is not restartable.
// Also the plumbing every phase uses.
#include "runner/console/exit_codes.h"
#include "runner/controller/controller.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <regex>
#include <string>

#include <unistd.h>

#include "runner/logs/log_sink.h"
#include "runner/store/job_store.h"
#include "runner/store/state_dir.h"

namespace barge::runner::internal {

Controller::Controller(const JobSpec& spec, const cluster::PlanInput& input,
                       const ControllerOptions& options, ssh::EventLoop* loop,
                       HostConnector* connector, JobObserver* observer)
    : JobOwner(spec, input, options, loop, connector), JobPart(&job_context_) {
  if (observer) ctx_.observer.Add(observer);
  ctx_.observer.Add(&records_);  // notes the host-caused failures it sees
}

Controller::~Controller() {
  // Nothing of this controller may run on the loop after it: commands and
  // their callbacks go with the groups, timers are cancelled, buffered
  // phase spans are written.
  ctx_.timers.CancelAll();
  streams_.DropApiCalls();
  attempt_.commands.Cancel();
  ctx_.job_commands.Cancel();
  ctx_.observer.Flush();
}

int Controller::Run() {
  if (Status s = MakeFirstPlan(); !s.ok()) {
    Say(s.message());
    return kExitBargeFailure;
  }
  if (Status s = OpenStore(); !s.ok()) {
    Say(s.message());
    return kExitBargeFailure;
  }
  JobRecord job;
  job.id = plan_.job_id;
  job.name = plan_.job_name;
  // The job file never holds a secret's value (they come from files and
  // the environment); masked all the same.
  job.spec = ctx_.redact(ctx_.options.spec_text);
  // A slurm: job waits for its allocation first (AllocateSlurm).
  job.status = ctx_.spec.slurm ? JobStatus::kWaiting : JobStatus::kPreflight;
  job.created = WallNow();
  job.controller_pid = static_cast<int>(getpid());
  job.nodes = static_cast<int>(plan_.nodes.size());
  job.run_dir = RunDir(ctx_.options.state_dir, plan_.job_id);
  if (Status s = ctx_.store->CreateJob(job); !s.ok()) {
    Say(s.message());
    return kExitBargeFailure;
  }
  if (!ctx_.spec.notify.empty()) {
    webhooks_ = std::make_unique<WebhookObserver>(ctx_.spec.notify, plan_.job_id, plan_.job_name);
    ctx_.observer.Add(webhooks_.get());
  }
  int code = ctx_.spec.slurm ? AllocateSlurm() : 0;
  if (code == 0) {
    ctx_.observer.JobEvent(ToString(JobStatus::kPreflight), std::nullopt, "", slurm_ ? WallNow() : job.created);
    code = Execute();
  }
  records_.WriteRecords();  // on the hosts it failed on, while the sessions are open
  login_.Logout();
  holds_.ReleaseHolds();
  leases_.DisarmWatchdogs();

  JobStatus final_status = JobStatus::kFailed;
  std::string detail = final_detail_;
  if (code == kExitInterrupted && ctx_.interrupts > 0) {
    final_status = JobStatus::kCancelled;
    detail = "interrupted";
  } else if (timed_out_) {
    final_status = JobStatus::kTimedOut;
  } else if (code == 0 && final_detail_.empty()) {
    final_status = JobStatus::kSucceeded;
  } else if (final_detail_.empty()) {
    detail = "head exited with code " + std::to_string(code);
  }
  ctx_.observer.Flush();
  Record(ctx_.store->SetStatus(plan_.job_id, final_status, code, ctx_.redact(detail)));
  ctx_.observer.JobEvent(ToString(final_status), std::nullopt, ctx_.redact(detail), WallNow());
  // However the job ended, its Slurm allocation goes, after its containers.
  if (slurm_) {
    if (code != 0) slurm_->SayDrainCommands();
    (void)slurm_->Release();
  }
  // The last notices: after the teardown, bounded.
  if (webhooks_) {
    webhooks_->Finish(kNotifyDrain);
    for (const std::string& line : webhooks_->TakeFailures()) Say("warning: notify: " + line);
  }
  return code;
}

int Controller::AllocateSlurm() {
  SetStatus(JobStatus::kWaiting, "for a Slurm allocation");
  slurm_ = std::make_unique<SlurmAllocation>(&job_context_, ctx_.options.connect_slurm_submit);
  if (Status s = slurm_->Allocate(); !s.ok()) {
    return Fail(s.message(), ctx_.interrupts > 0 ? kExitInterrupted : kExitBargeFailure);
  }
  // The grant is a fact of the plan: the nodes are the hosts (the
  // validated spec is not edited).
  if (Status s = slurm_->Place(&planner_); !s.ok()) return Fail(s.message(), kExitBargeFailure);
  if ((slurm_steps_ = slurm_->StepConnector())) ctx_.connector = slurm_steps_.get();
  Record(ctx_.store->SetStatus(ctx_.job_id, JobStatus::kPreflight));
  return 0;
}

int Controller::Execute() {
  // forward: ports are bound before anything connects: a busy one stops
  // the job before it starts.
  if (ctx_.options.serve_forwards && !ctx_.spec.forward.empty()) {
    if (Status s = forwarding_.Bind(ctx_.spec.forward, "forward"); !s.ok()) return Fail(s.message(), kExitBargeFailure);
  }
  // Hosts that cannot be reached are reported with the other hosts'
  // preflight problems, in one table.
  if (Status s = connections_.Connect(); !s.ok() && hosts_.connect_errors.empty()) return Fail(s.message(), kExitBargeFailure);
  ctx_.loop.Poll(milliseconds(0));  // deliver a signal that came during the connects
  if (ctx_.interrupts > 0) return kExitInterrupted;
  // registry: every host logs in before preflight checks or pulls images.
  if (Status s = login_.Login(hosts_.All()); !s.ok()) {
    return Fail(s.message(), ctx_.interrupts > 0 ? kExitInterrupted : kExitBargeFailure);
  }
  if (Status s = preflight_.Run(hosts_.Connected()); !s.ok()) {
    return Fail(s.message(), ctx_.interrupts > 0 ? kExitInterrupted : kExitBargeFailure);
  }
  // Unhealthy GPUs out of what their hosts offer, a spare in place of an
  // unhealthy host, or the job stops here.
  if (Status s = GateGpus(); !s.ok()) {
    return Fail(s.message(), ctx_.interrupts > 0 ? kExitInterrupted : kExitBargeFailure);
  }
  if (Status s = mpi_.MpiPreflight(hosts_.Connected()); !s.ok()) {
    return Fail(s.message(), ctx_.interrupts > 0 ? kExitInterrupted : kExitBargeFailure);
  }
  // Every host the job's, or none (runner/controller/holds.cc).
  if (Status s = holds_.SecureHolds(); !s.ok()) {
    return Fail(s.message(), ctx_.interrupts > 0 ? kExitInterrupted : kExitBargeFailure);
  }
  const std::string run_dir = RunDir(ctx_.options.state_dir, plan_.job_id);
  if (Status s = MakeDirs(run_dir); !s.ok()) return Fail(s.message(), kExitBargeFailure);
  for (const cluster::LaunchStage& stage : plan_.stages) {
    if (stage.gate.kind != cluster::ReadinessProbe::Kind::kLog) continue;
    try {
      std::regex check(stage.gate.log_regex, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      return Fail("roles.head.ready.log: invalid regex: " + std::string(e.what()), kExitBargeFailure);
    }
  }
  if (Status s = uploads_.Upload(hosts_.All()); !s.ok()) return Fail(s.message(), kExitBargeFailure);

  for (;;) {
    // Live hosts may have filled in GPU counts; restarts change hosts: the
    // plan is made again for every attempt.
    if (Status s = Launch(); !s.ok()) {
      // No partial launch: whatever started is removed (after a keep).
      const int code = Fail(s.message(), ctx_.interrupts > 0 ? kExitInterrupted : kExitBargeFailure);
      diagnostics_.Collect("the launch failed: " + s.message());
      keep_.KeepFailedJob();
      teardown_.Run(ctx_.interrupts < 2);
      return code;
    }
    if (outside_end_ && ctx_.interrupts == 0) {
      // Ended from outside (its Slurm allocation went): as timed out or failed.
      const int code = outside_end_->timed_out ? kExitTimedOut : kExitBargeFailure;
      timed_out_ = outside_end_->timed_out;
      Fail(outside_end_->reason + ": stopping the job", code);
      teardown_.Run(true);
      return code;
    }
    if (timed_out_) {
      Fail("the job reached its timeout (" +
               std::to_string(std::chrono::duration_cast<seconds>(*ctx_.spec.timeout).count()) +
               " s): stopping it",
           kExitTimedOut);
      diagnostics_.Collect("the job reached its timeout");
      teardown_.Run(ctx_.interrupts < 2);
      return ctx_.interrupts > 0 ? kExitInterrupted : kExitTimedOut;
    }
    if (ctx_.interrupts > 0) {
      teardown_.Run(ctx_.interrupts < 2);
      return kExitInterrupted;
    }
    NodeState& head = *attempt_.nodes[0];
    if (!attempt_.fault && head.phase == NodePhase::kExited) {
      const int code = head.exit_code ? *head.exit_code : Fail("the head's exit code is unknown", kExitBargeFailure);
      if (code != 0) diagnostics_.Collect("the head exited: " + head.end_reason);
      if (code != 0) keep_.KeepFailedJob();
      teardown_.Run(ctx_.interrupts < 2);
      return code;
    }
    // A fault ended the attempt.
    const Fault fault = attempt_.fault.value_or(Fault{Cause::kHostLost, head.host->name, "the head's host is lost"});
    const bool again = faults_.Restartable(fault);
    diagnostics_.Collect(std::string(Faults::CauseName(fault.cause)) + ": " + fault.detail);
    const int code = again ? 0 : FailForFault(fault);
    if (!again) keep_.KeepFailedJob();
    teardown_.Run(/*graceful=*/ctx_.interrupts < 2, /*final=*/!again);
    if (!again) return code;
    ++attempt_.restart_count;
    const std::string why = std::string(Faults::CauseName(fault.cause)) + ": " +
                            fault.detail.substr(0, fault.detail.find('\n'));
    const std::string note = ctx_.redact("restart " + std::to_string(attempt_.restart_count) + " of " +
                                     std::to_string(ctx_.spec.restart->max_restarts) + " after " + why);
    Record(ctx_.store->NoteRestart(plan_.job_id, note));
    ctx_.observer.JobEvent(event::kRestarting, std::nullopt, note, WallNow());
    Say("restarting the job (restart " + std::to_string(attempt_.restart_count) + " of " +
        std::to_string(ctx_.spec.restart->max_restarts) + ") in " +
        std::to_string(std::chrono::duration_cast<milliseconds>(ctx_.spec.restart->backoff).count() / 1000.0).substr(0, 4) +
        " s");
    RunUntil([&] { return ctx_.interrupts > 0; }, Now() + ctx_.spec.restart->backoff);
    if (ctx_.interrupts == 0) {
      // GPUs found unhealthy while it ran are out (gpu_watch.h), then spares.
      Status s = gpu_watch_.TakeOut();
      if (s.ok()) s = ReplaceHosts();
      if (!s.ok()) {
        attempt_.tearing_down = true;
        teardown_.RunTeardownHooks();
        return Fail("job failed: " + why + "; cannot restart: " + s.message(), kExitBargeFailure);
      }
    }
    if (ctx_.interrupts > 0) {
      teardown_.RunTeardownHooks();
      return kExitInterrupted;
    }
  }
}

int Controller::FailForFault(const Fault& fault) {
  if (fault.cause == Cause::kNodeFailed && fault.rank == 0) return Fail("job failed: " + fault.detail, fault.exit_code);
  // Why not restarted goes after the detail's first line (a hang's detail
  // goes on with a line per rank).
  const size_t eol = std::min(fault.detail.find('\n'), fault.detail.size());
  std::string msg = "job failed: " + fault.detail.substr(0, eol);
  const bool hang = fault.cause == Cause::kHang;
  if (hang && ctx_.spec.progress->on_hang == OnHang::kStop) {
    msg += " (progress.on_hang: stop)";
  } else if (hang && !ctx_.spec.restart) {
    msg += " (progress.on_hang: restart, but the job has no restart: block)";
  } else if (ctx_.spec.restart) {
    msg += attempt_.restart_count >= ctx_.spec.restart->max_restarts
               ? " (no restarts left: max_restarts " + std::to_string(ctx_.spec.restart->max_restarts) + ")"
               : std::string(" (restart.on does not list ") + Faults::CauseName(fault.cause) + ")";
  }
  return Fail(msg + fault.detail.substr(eol), hang ? kExitHung : kExitBargeFailure);
}

Status Controller::Launch() {
  // The plan of this attempt: made again only when a fact changed since the
  // last (the restart count, a spare, what preflight found). A plan no
  // node pointed into is dropped when replaced (every node's env names all
  // N nodes: O(N^2) bytes); the earlier attempts' stay valid.
  planner_.Restarted(attempt_.restart_count);
  if (Status s = planner_.Update(); !s.ok()) return s;
  planner_.InUse();
  // The previous attempt is over: its streams and watches go, and its state
  // stays valid for anything that still points at it.
  attempt_.commands.Cancel();
  streams_.DropApiCalls();
  artifacts_.NewAttempt();
  for (auto& n : attempt_.nodes) n->retired = true;
  for (auto& n : attempt_.nodes) attempt_.old_nodes.push_back(std::move(n));
  attempt_.nodes.clear();
  if (attempt_.sink) attempt_.old_sinks.push_back(std::move(attempt_.sink));
  attempt_.fault.reset();
  attempt_.tearing_down = false;

  const std::string run_dir = RunDir(ctx_.options.state_dir, plan_.job_id);
  std::vector<LogSink::Node> sink_nodes = MakeNodeStates();
  Result<std::unique_ptr<LogSink>> sink = LogSink::Open(run_dir, sink_nodes, ctx_.options.echo, ctx_.options.stdio);
  if (!sink.ok()) return sink.status();
  attempt_.sink = std::move(sink).value();
  if (ctx_.options.progress) {
    Progress* progress = ctx_.options.progress;
    attempt_.sink->set_echo_guard([progress] { progress->Clear(); }, [progress] { progress->Redraw(); });
  }
  if (attempt_.restart_count == 0) {
    Say("job " + plan_.job_id + " (" + plan_.job_name + "): " + std::to_string(attempt_.nodes.size()) +
        " node(s); logs in " + run_dir);
  }

  SetStatus(JobStatus::kStarting);
  faults_.StartMonitors();
  if (Status s = stages_.RunStages(); !s.ok()) return s;
  SetStatus(JobStatus::kRunning, std::to_string(attempt_.nodes.size()) + " node(s)" +
                                     (attempt_.restart_count ? ", restart " + std::to_string(attempt_.restart_count) : ""));
  if (attempt_.restart_count == 0) artifacts_.ScheduleArtifacts();
  progress_.Start();
  gpu_watch_.Start();
  // forward: (window.cc) while the attempt runs; a forward that cannot go
  // on is reported and stops, the job does not.
  forwarding_.Serve(attempt_.commands, [this](const Status& why) { Say(why.message()); });

  // Running: until the head's main process exits, a fault, an interrupt or
  // the timeout.
  NodeState& head = *attempt_.nodes[0];
  const Clock::time_point deadline =
      ctx_.spec.timeout ? started_ + *ctx_.spec.timeout : Clock::time_point::max();
  // A slurm: job's allocation can end under it (its time limit,
  // preemption, an admin's scancel): the job is then torn down (its
  // containers run outside Slurm's reach).
  if (slurm_) slurm_->Watch(kSlurmWatchEvery, [this](OutsideEnd end) { outside_end_ = std::move(end); });
  bool ended = RunUntil(
      [&] {
        return head.phase == NodePhase::kExited || head.phase == NodePhase::kLost ||
               attempt_.fault.has_value() || ctx_.interrupts > 0 || outside_end_.has_value();
      },
      deadline);
  if (slurm_) slurm_->StopWatching();
  if (!ended) timed_out_ = true;
  forwarding_.Stop();
  return Status::Ok();
}

// --- The Controller's own plumbing.

void Controller::Interrupt(int signo) {
  ++ctx_.interrupts;
  Say(std::string(ctx_.interrupts == 1 ? "interrupted (signal " : "interrupted again (signal ") +
      std::to_string(signo) + (ctx_.interrupts == 1 ? "): stopping the job" : "): killing the job"));
}

}  // namespace barge::runner::internal
