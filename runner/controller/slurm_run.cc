// slurm_run.h: allocate through Slurm's client commands, run the job on the
// nodes, release. The commands run on this machine or over one SSH session
// to slurm.login, each to its end on a loop of their own (the job's
// controller has not started yet, or has ended).
#include "runner/controller/slurm_run.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <sstream>

#include "cluster/gpu_slices.h"
#include "runner/console/signals.h"
#include "runner/controller/host_connector.h"
#include "runner/controller/srun_connector.h"
#include "runner/jobfile/redact.h"
#include "runner/remote/command_group.h"
#include "runner/remote/slurm.h"
#include "runner/store/host_faults.h"
#include "runner/store/job_store.h"
#include "runner/store/state_dir.h"
#include "ssh/event_loop.h"

namespace barge::runner {

using std::chrono::milliseconds;
using std::chrono::seconds;

std::string FormatSlurmNodes(const std::vector<SlurmNode>& nodes) {
  std::string out;
  for (const SlurmNode& n : nodes) out += (out.empty() ? "" : " ") + n.name + "=" + n.address;
  return out;
}

Result<std::vector<SlurmNode>> ParseSlurmNodes(const std::string& detail) {
  std::vector<SlurmNode> out;
  std::istringstream in(detail);
  std::string word;
  while (in >> word) {
    const size_t eq = word.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == word.size()) {
      return Status::Error("unexpected record of Slurm nodes: '" + detail + "'");
    }
    SlurmNode node;
    node.name = word.substr(0, eq);
    node.address = word.substr(eq + 1);
    out.push_back(std::move(node));
  }
  return out;
}

Status PlaceOnSlurmNodes(JobSpec& spec, const std::vector<SlurmNode>& nodes) {
  if (nodes.size() != spec.hosts.size()) {
    return Status::Error("Slurm gave " + std::to_string(nodes.size()) + " node(s), the job asked for " +
                         std::to_string(spec.hosts.size()));
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    spec.hosts[i].address = nodes[i].address;
    // What other nodes are told: Slurm's NodeAddr (no probe of how the
    // host was reached, which a job step cannot answer).
    spec.hosts[i].internal_address = nodes[i].address;
    spec.hosts[i].vars["SLURM_NODE"] = nodes[i].name;
  }
  if (!spec.slurm || spec.slurm->exclusive) return Status::Ok();
  // A shared node: no container block may widen what Slurm gave.
  spec.container.gpus.reset();
  for (auto& [name, role] : spec.roles) role.container.gpus.reset();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const SlurmNode& n = nodes[i];
    cluster::Host& host = spec.hosts[i];
    host.gpus = static_cast<int>(n.gpus.size());
    host.container.gpus.reset();
    if (!n.gpus.empty()) host.container.gpus = cluster::GpuDeviceValue(n.gpus);
    if (n.cpus > 0) host.container.cpus = std::to_string(n.cpus);
    if (n.mem_mb > 0) {
      host.container.memory = std::to_string(n.mem_mb) + "m";
    } else if (spec.slurm->mem_per_node) {
      host.container.memory = *spec.slurm->mem_per_node;
    }
  }
  return Status::Ok();
}

Result<RecordedAllocation> ReadRecordedAllocation(JobStore& store, const std::string& job_id) {
  Result<std::vector<EventRecord>> events = store.GetEvents(job_id);
  if (!events.ok()) return events.status();
  RecordedAllocation out;
  for (const EventRecord& e : *events) {
    if (e.kind == kSlurmJobEvent) out.slurm_id = e.detail;
    if (e.kind == kSlurmReleasedEvent) out.released = true;
    if (e.kind == kSlurmNodesEvent) {
      Result<std::vector<SlurmNode>> nodes = ParseSlurmNodes(e.detail);
      if (!nodes.ok()) return nodes.status();
      out.nodes = std::move(nodes).value();
    }
  }
  return out;
}

namespace {

// Where Slurm's commands run: this machine, or one SSH session to
// slurm.login. The loop is declared first: it outlives the executor.
struct SubmitHost {
  explicit SubmitHost(ssh::EventLoop::TimeSource time) : loop(time) {}
  ssh::EventLoop loop;
  std::unique_ptr<ssh::Executor> exec;
  std::string label;  // "this machine" or the login host
};

Result<std::unique_ptr<SubmitHost>> OpenSubmitHost(const JobSpec& spec, const SlurmSubmitSeam& seam) {
  auto submit = std::make_unique<SubmitHost>(seam.time);
  Result<std::unique_ptr<ssh::Executor>> exec =
      seam.connect ? seam.connect(&submit->loop) : ConnectSubmitHost(spec, &submit->loop);
  if (!exec.ok()) return exec.status();
  submit->exec = std::move(exec).value();
  submit->label = spec.slurm->login.empty() ? "this machine" : spec.slurm->login;
  return submit;
}

struct Ran {
  int code = -1;
  std::string out;
  std::string err;
};

// The last non-blank lines of `text` (at most `n`), joined by "; ".
std::string LastLines(const std::string& text, size_t n = 3) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") != std::string::npos) lines.push_back(line);
  }
  std::string out;
  for (size_t i = lines.size() > n ? lines.size() - n : 0; i < lines.size(); ++i) {
    out += (out.empty() ? "" : "; ") + lines[i];
  }
  return out;
}

// Runs `line` on the submit host to its end, `limit` at most. Its stdout
// and stderr are kept to CommandGroup::kMaxOutputBytes each (a broken or
// hostile login host must not fill the controller's memory): past that the
// command fails, naming the stream.
Result<Ran> RunToEnd(SubmitHost& submit, const std::string& line, milliseconds limit = seconds(60)) {
  std::optional<Outcome> outcome;
  CommandGroup group(&submit.loop);
  group.Run(*submit.exec, line, [&outcome](const Outcome& o) { outcome = o; });
  const auto deadline = submit.loop.Now() + limit;
  while (!outcome && submit.loop.Now() < deadline) submit.loop.Poll(milliseconds(100));
  if (!outcome) {
    return Status::Error("`" + line + "` on " + submit.label + " did not end within " +
                         std::to_string(std::chrono::duration_cast<seconds>(limit).count()) + " s");
  }
  if (!outcome->exit.known()) {
    return Status::Error("`" + line + "` on " + submit.label + ": " + outcome->exit.error);
  }
  return Ran{outcome->exit.code, std::move(outcome->out), std::move(outcome->err)};
}

void Say(const std::string& message) {
  std::fprintf(stderr, "barge: %s\n", message.c_str());
  std::fflush(stderr);
}

// The nodes of granted allocation `id`, in Slurm's order, with addresses.
Result<std::vector<SlurmNode>> AllocatedNodes(SubmitHost& submit, const std::string& id) {
  Result<Ran> shown = RunToEnd(submit, slurm::ShowJobLine(id));
  if (!shown.ok()) return shown.status();
  if (shown->code != 0) {
    return Status::Error("`" + slurm::ShowJobLine(id) + "` failed (exit " + std::to_string(shown->code) +
                         "): " + LastLines(shown->err));
  }
  Result<slurm::JobInfo> info = slurm::ParseShowJob(shown->out);
  if (!info.ok()) return info.status();
  if (info->nodes.empty()) return Status::Error("Slurm job " + id + " has no nodes (" + info->state + ")");
  Result<Ran> nodes = RunToEnd(submit, slurm::ShowNodesLine(info->node_list));
  if (!nodes.ok()) return nodes.status();
  if (nodes->code != 0) {
    return Status::Error("`" + slurm::ShowNodesLine(info->node_list) + "` failed (exit " +
                         std::to_string(nodes->code) + "): " + LastLines(nodes->err));
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

// Whether allocation `id` has ended under the job (and why), as far as
// Slurm answers: a Slurm that does not answer ends nothing.
std::optional<ControllerOptions::OutsideEnd> AllocationEnded(SubmitHost& submit, const std::string& id) {
  Result<Ran> q = RunToEnd(submit, slurm::SqueueLine(id), seconds(20));
  if (!q.ok() || q->code != 0) return std::nullopt;
  Result<slurm::QueueState> queued = slurm::ParseSqueue(q->out);
  if (!queued.ok()) return std::nullopt;
  std::string state = queued->state;
  if (state == "RUNNING" || state == "CONFIGURING" || state == "SUSPENDED") return std::nullopt;
  std::string reason = queued->reason;
  if (state.empty() || state == "COMPLETING") {
    // Gone from the queue: its record says how it ended.
    if (Result<Ran> shown = RunToEnd(submit, slurm::ShowJobLine(id), seconds(20)); shown.ok() && shown->code == 0) {
      if (Result<slurm::JobInfo> info = slurm::ParseShowJob(shown->out); info.ok()) {
        state = info->state;
        reason = info->reason;
      }
    }
  }
  if (state.empty()) state = "no longer known to Slurm";
  return ControllerOptions::OutsideEnd{
      "Slurm ended allocation " + id + " (" + state + (reason.empty() || reason == "None" ? "" : ", " + reason) + ")",
      state == "TIMEOUT"};
}

// The allocation while barge asks for it: salloc runs until Slurm grants it
// (or refuses, or it is cancelled).
class Allocation {
 public:
  Allocation(const JobSpec& spec, const std::string& job_id, JobStore* store, SubmitHost* submit)
      : spec_(spec), job_id_(job_id), store_(store), submit_(submit) {}

  // Waits for the grant. `interrupted` is polled; a wait: limit bounds the
  // time in the queue. Fails with the reason (the allocation cancelled).
  Status Wait(const int* interrupted) {
    auto exit_code = std::make_shared<std::optional<int>>();
    auto err = std::make_shared<std::string>();
    // Bounded like every host command's output (CommandGroup): past it,
    // the allocation is cancelled and the job fails.
    auto overflow = std::make_shared<bool>(false);
    auto keep = [err, overflow](std::string_view d) {
      if (err->size() + d.size() > CommandGroup::kMaxOutputBytes) {
        *overflow = true;
        return;
      }
      err->append(d);
    };
    ssh::CommandCallbacks cb;
    cb.on_stderr = keep;
    cb.on_stdout = keep;
    cb.on_exit = [exit_code, err](const ssh::ExitStatus& s) {
      *exit_code = s.code;
      if (!s.error.empty()) err->append(s.error + "\n");
    };
    const std::string line = slurm::SallocLine(*spec_.slurm, job_id_, spec_.name);
    Result<std::unique_ptr<ssh::Command>> cmd = submit_->exec->Start(line, std::move(cb));
    if (!cmd.ok()) return cmd.status();
    ssh::EventLoop& loop = submit_->loop;
    const auto began = loop.Now();
    auto next_look = began + seconds(2);
    std::string shown;  // the last queue line printed
    while (!exit_code->has_value()) {
      loop.Poll(milliseconds(200));
      if (id_.empty()) {
        if (std::optional<std::string> id = slurm::JobIdInSalloc(*err)) NoteId(*id);
      }
      if (*interrupted) {
        Cancel("interrupted while queued");
        return Status::Error("interrupted while queued in Slurm");
      }
      if (*overflow) {
        Cancel("salloc's output passed the bound");
        return Status::Error("`" + line + "` on " + submit_->label + " wrote more than " +
                             std::to_string(CommandGroup::kMaxOutputBytes) +
                             " bytes, the most barge reads from a host command; cancelled");
      }
      if (spec_.wait && loop.Now() - began > *spec_.wait && !id_.empty()) {
        Cancel("still queued after wait:");
        return Status::Error("Slurm job " + id_ + " was still queued after " +
                             std::to_string(std::chrono::duration_cast<seconds>(*spec_.wait).count()) +
                             " s (wait:); cancelled");
      }
      if (!id_.empty() && loop.Now() >= next_look) {
        next_look = loop.Now() + seconds(3);
        Result<Ran> q = RunToEnd(*submit_, slurm::SqueueLine(id_), seconds(30));
        if (!q.ok() || q->code != 0) continue;
        Result<slurm::QueueState> state = slurm::ParseSqueue(q->out);
        if (!state.ok() || state->state != "PENDING") continue;
        const std::string where = spec_.slurm->partition.empty() ? "Slurm" : spec_.slurm->partition;
        const std::string text = "queued in " + where + ": " + state->reason;
        if (text != shown) {
          shown = text;
          Say(text + " (Slurm job " + id_ + ")");
          (void)store_->SetStatus(job_id_, JobStatus::kWaiting, std::nullopt, text + " (Slurm job " + id_ + ")");
        }
      }
    }
    if (id_.empty()) {
      if (std::optional<std::string> id = slurm::JobIdInSalloc(*err)) NoteId(*id);
    }
    if (**exit_code != 0 || id_.empty()) {
      const std::string why = LastLines(*err);
      if (!id_.empty()) Cancel("salloc failed");
      return Status::Error("Slurm did not grant the allocation: `" + line + "` on " + submit_->label +
                           " exited " + std::to_string(**exit_code) + (why.empty() ? "" : ": " + why));
    }
    return Status::Ok();
  }

  const std::string& id() const { return id_; }

 private:
  void NoteId(const std::string& id) {
    id_ = id;
    (void)store_->AddEvent(job_id_, kSlurmJobEvent, std::nullopt, id_);
    Say("job " + job_id_ + " (" + spec_.name + "): Slurm job " + id_ + " submitted from " + submit_->label);
  }
  void Cancel(const std::string& why) {
    if (id_.empty()) return;
    Result<Ran> r = RunToEnd(*submit_, slurm::ScancelLine(id_), seconds(60));
    const bool ok = r.ok() && r->code == 0;
    (void)store_->AddEvent(job_id_, kSlurmReleasedEvent, std::nullopt,
                           "scancel " + id_ + " (" + why + ")" +
                               (ok ? "" : ": " + (r.ok() ? LastLines(r->err) : r.status().message())));
  }

  const JobSpec& spec_;
  const std::string job_id_;
  JobStore* store_;
  SubmitHost* submit_;
  std::string id_;
};

// A node the job found unusable (its own state: engine, disk, GPUs,
// session; or lost under the job) is named with the command an operator
// runs to take it out of Slurm's service; barge drains nothing itself.
void SayDrainCommands(JobStore& store, const std::string& job_id, const std::vector<SlurmNode>& nodes) {
  Result<std::vector<EventRecord>> events = store.GetEvents(job_id);
  Result<std::vector<PhaseRecord>> phases = store.GetPhases(job_id);
  if (!events.ok() || !phases.ok()) return;
  std::map<std::string, std::string> caused = HostCausedFailures(*events, *phases);
  for (const std::string& out : UnavailableHosts(*events)) caused.emplace(out, "its GPUs are unhealthy");
  for (const SlurmNode& n : nodes) {
    auto it = caused.find(n.address);
    if (it == caused.end()) continue;
    // Its first line; Slurm keeps a reason short (the whole story is in
    // `barge show`).
    const std::string what = it->second.substr(0, it->second.find('\n'));
    std::string reason = "barge " + job_id + ": " + what;
    if (reason.size() > 100) reason = reason.substr(0, 97) + "...";
    Say("node " + n.name + " (" + n.address + ") is unusable (" + what +
        "); to take it out of Slurm's service: " + slurm::DrainCommand(n.name, reason));
  }
}

}  // namespace

namespace {

Status CancelAllocation(const JobSpec& spec, const std::string& slurm_id, const SlurmSubmitSeam& seam) {
  Result<std::unique_ptr<SubmitHost>> submit = OpenSubmitHost(spec, seam);
  if (!submit.ok()) return submit.status();
  Result<Ran> r = RunToEnd(**submit, slurm::ScancelLine(slurm_id), seconds(60));
  if (!r.ok()) return r.status();
  if (r->code != 0) {
    return Status::Error("`" + slurm::ScancelLine(slurm_id) + "` on " + (*submit)->label + " exited " +
                         std::to_string(r->code) + ": " + LastLines(r->err));
  }
  return Status::Ok();
}

}  // namespace

Status CancelSlurmAllocation(const JobSpec& spec, const std::string& slurm_id) {
  return CancelAllocation(spec, slurm_id, {});
}

int RunSlurmJob(const JobSpec& spec, const cluster::PlanInput& input, const ControllerOptions& options,
                const std::function<int(const JobSpec&, const cluster::PlanInput&, const ControllerOptions&)>& run,
                const SlurmSubmitSeam& seam) {
  const std::string& job_id = input.job_id;
  Result<std::unique_ptr<JobStore>> opened = JobStore::Open(options.state_dir);
  if (!opened.ok()) {
    Say(opened.status().message());
    return kExitBargeFailure;
  }
  // Held while barge waits for Slurm, closed while the controller runs the
  // job (it has a connection of its own), opened again for the release.
  std::unique_ptr<JobStore> held = std::move(opened).value();
  JobStore& store = *held;
  // The job is in the store from the start: `barge ls` shows it queued and
  // `barge down` finds its Slurm job.
  {
    Result<cluster::Plan> plan = cluster::MakePlan(input);
    if (!plan.ok()) {
      Say(plan.status().message());
      return kExitBargeFailure;
    }
    JobRecord job;
    job.id = job_id;
    job.name = spec.name;
    job.spec = Redactor(spec)(options.spec_text);
    job.status = JobStatus::kWaiting;
    job.created = WallNow();
    job.controller_pid = static_cast<int>(getpid());
    job.nodes = static_cast<int>(plan->nodes.size());
    job.run_dir = RunDir(options.state_dir, job_id);
    if (Status s = store.CreateJob(job); !s.ok()) {
      Say(s.message());
      return kExitBargeFailure;
    }
    (void)store.SetStatus(job_id, JobStatus::kWaiting, std::nullopt, "for a Slurm allocation");
  }
  auto end = [&](JobStatus status, int code, const std::string& why) {
    if (!why.empty()) Say(why);
    (void)store.SetStatus(job_id, status, code, why);
    return code;
  };
  std::string slurm_id;
  std::vector<SlurmNode> nodes;
  {
    Result<std::unique_ptr<SubmitHost>> submit = OpenSubmitHost(spec, seam);
    if (!submit.ok()) return end(JobStatus::kFailed, kExitBargeFailure, submit.status().message());
    int interrupted = 0;
    SignalWatcher signals(&(*submit)->loop, [&interrupted](int) { ++interrupted; });
    Allocation allocation(spec, job_id, &store, submit->get());
    Status granted = allocation.Wait(&interrupted);
    if (!granted.ok()) {
      return interrupted ? end(JobStatus::kCancelled, kExitInterrupted, granted.message())
                         : end(JobStatus::kFailed, kExitBargeFailure, granted.message());
    }
    slurm_id = allocation.id();
    Result<std::vector<SlurmNode>> got = AllocatedNodes(**submit, slurm_id);
    if (!got.ok()) {
      Result<Ran> r = RunToEnd(**submit, slurm::ScancelLine(slurm_id));
      (void)store.AddEvent(job_id, kSlurmReleasedEvent, std::nullopt, "scancel " + slurm_id);
      return end(JobStatus::kFailed, kExitBargeFailure, got.status().message());
    }
    nodes = std::move(got).value();
  }
  (void)store.AddEvent(job_id, kSlurmNodesEvent, std::nullopt, FormatSlurmNodes(nodes));
  std::string shown;
  for (const SlurmNode& n : nodes) shown += (shown.empty() ? "" : ", ") + n.name + " (" + n.address + ")";
  Say("Slurm job " + slurm_id + " granted " + std::to_string(nodes.size()) + " node(s): " + shown);

  JobSpec placed = spec;
  int code = kExitBargeFailure;
  if (Status s = PlaceOnSlurmNodes(placed, nodes); !s.ok()) {
    code = end(JobStatus::kFailed, kExitBargeFailure, s.message());
  } else {
    cluster::PlanInput placed_input = MakePlanInput(placed, job_id);
    // A node's Slurm epilog finds the allocation's containers by this label
    // (samples/slurm/epilog.sh): a defence that outlives the controller.
    placed_input.extra_labels.emplace_back(cluster::kSlurmJobLabel, slurm_id);
    ControllerOptions with_record = options;
    with_record.job_created = true;
    // The allocation can end under the job (its time limit, preemption, an
    // admin's scancel): the job is then torn down (its containers run
    // outside Slurm's reach).
    Result<std::unique_ptr<SubmitHost>> opened_watch = OpenSubmitHost(spec, seam);
    std::shared_ptr<SubmitHost> watch;
    if (opened_watch.ok()) watch = std::move(opened_watch).value();
    if (watch) {
      with_record.outside_check = [watch, slurm_id]() -> std::optional<ControllerOptions::OutsideEnd> {
        return AllocationEnded(*watch, slurm_id);
      };
    } else {
      Say("cannot watch Slurm job " + slurm_id + " (" + opened_watch.status().message() +
          "): its end will not stop the job");
    }
    if (spec.slurm->transport == SlurmSpec::Transport::kSrun) {
      with_record.make_connector = [placed, slurm_id](ssh::EventLoop* loop) -> std::unique_ptr<HostConnector> {
        return std::make_unique<SrunHostConnector>(loop, placed, slurm_id);
      };
    }
    held.reset();
    code = run(placed, placed_input, with_record);
  }
  // However the job ended, the allocation goes with it.
  Status released = CancelAllocation(spec, slurm_id, seam);
  Result<std::unique_ptr<JobStore>> again = JobStore::Open(options.state_dir);
  if (code != 0 && again.ok()) SayDrainCommands(**again, job_id, nodes);
  Status noted = again.ok() ? (*again)->AddEvent(job_id, kSlurmReleasedEvent, std::nullopt,
                                                 "scancel " + slurm_id +
                                                     (released.ok() ? "" : ": " + released.message()))
                            : again.status();
  if (!noted.ok()) Say("warning: job store: " + noted.message());
  if (released.ok()) {
    Say("Slurm job " + slurm_id + " released");
  } else {
    Say("could not release Slurm job " + slurm_id + " (Slurm ends it at its time limit): " + released.message());
  }
  return code;
}

}  // namespace barge::runner
