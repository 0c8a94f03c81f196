// `barge down` and `barge attach`: a recorded job, through its live
// controller or, when that is gone, through its hosts.
#include <csignal>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sys/wait.h>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>
#include <ctime>
#include <set>
#include "cluster/plan.h"
#include "runner/console/exit_codes.h"
#include "runner/controller/entry_points.h"
#include "runner/controller/slurm_run.h"
#include "runner/controller/srun_connector.h"
#include "runner/jobfile/overrides.h"
#include "runner/jobfile/job_file.h"
#include "runner/store/job_lookup.h"
#include "runner/store/job_store.h"
#include "runner/cli/jobs_cli.h"
#include "runner/cli/logs_cli.h"
#include "container/timestamp.h"
#include "runner/store/state_dir.h"
#include "runner/cli/verbs.h"

namespace barge::runner {

namespace {

// A job that ended for good (one marked lost may still have containers).
bool HasEnded(const JobRecord& job) { return IsFinal(job.status) && job.status != JobStatus::kLost; }

}  // namespace

// `barge down JOB`: the same teardown as completion. A live controller is
// asked (SIGTERM, like a first Ctrl-C) and waited for, until `deadline`;
// for a job whose controller is gone (or goes while it is waited for
// without recording how the job ended), barge connects to its hosts itself.
int Down(const std::string& job_text, std::chrono::steady_clock::time_point deadline) {
  const std::string state_dir = StateDir();
  std::optional<FoundJob> found = FindJobOrSay(state_dir, job_text);
  if (!found) return kExitBargeFailure;
  std::unique_ptr<JobStore>& store = found->store;
  JobRecord* job = &found->job;
  const std::string* id = &job->id;
  if (HasEnded(*job)) {
    std::printf("job %s is already %s\n", id->c_str(), ToString(job->status));
    return 0;
  }
  if (!IsFinal(job->status) && ControllerAlive(job->controller_pid, job->controller_identity)) {
    std::printf("stopping job %s (controller pid %d)\n", id->c_str(), *job->controller_pid);
    std::fflush(stdout);
    const auto asked = std::chrono::steady_clock::now();
    // Checked again as it is signalled: the pid may name another process by now.
    bool gone = !SignalController(job->controller_pid, job->controller_identity, SIGTERM);
    while (!gone && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      Result<JobRecord> now = store->GetJob(*id);
      if (now.ok() && IsFinal(now->status)) {
        std::printf("job %s: %s\n", id->c_str(), ToString(now->status));
        return 0;
      }
      gone = !ControllerAlive(job->controller_pid, job->controller_identity);
    }
    if (!gone) {
      const long waited = static_cast<long>(
          std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - asked).count());
      std::fprintf(stderr,
                   "barge: job %s did not stop within %ld s of SIGTERM: its controller (pid %d) still runs; "
                   "`kill -9 %d`, then `barge down %s` removes its containers from here\n",
                   id->c_str(), waited, *job->controller_pid, *job->controller_pid, id->c_str());
      return kExitBargeFailure;
    }
    // The controller went without recording an end: the job is lost, and
    // its hosts are cleaned from here, as below.
    if (Status s = MarkLostIfControllerGone(*store, job); !s.ok()) {
      std::fprintf(stderr, "barge: %s\n", s.message().c_str());
      return kExitBargeFailure;
    }
    if (IsFinal(job->status) && job->status != JobStatus::kLost) {
      std::printf("job %s: %s\n", id->c_str(), ToString(job->status));
      return 0;
    }
  }
  // The controller is gone: tear down from the recorded job file.
  std::optional<JobSpec> spec = RecordedSpec(*job);
  if (!spec) return kExitBargeFailure;
  ControllerOptions options;
  options.state_dir = state_dir;
  std::optional<cluster::PlanInput> input = RecordedPlanInput(*spec, *id);
  if (!input) return kExitBargeFailure;
  if (!spec->slurm) {
    std::printf("job %s: its controller is gone; removing its containers\n", id->c_str());
    return TearDownJob(*spec, *input, options);
  }
  // A slurm: job: its containers (once it had nodes), then its allocation.
  Result<RecordedAllocation> allocation = ReadRecordedAllocation(*store, *id);
  if (!allocation.ok()) {
    std::fprintf(stderr, "barge: %s\n", allocation.status().message().c_str());
    return kExitBargeFailure;
  }
  int code = 0;
  if (!allocation->nodes.empty()) {
    std::printf("job %s: its controller is gone; removing its containers\n", id->c_str());
    if (spec->slurm->transport == SlurmSpec::Transport::kSrun) {
      // Job steps, while the allocation lasts (its nodes may refuse SSH).
      options.make_connector = [&](ssh::EventLoop* loop) -> std::unique_ptr<HostConnector> {
        return std::make_unique<SrunHostConnector>(loop, *spec, allocation->slurm_id);
      };
    }
    code = TearDownJob(*spec, *input, options);
  }
  if (!allocation->slurm_id.empty()) {
    Status cancelled = CancelSlurmAllocation(*spec, allocation->slurm_id);
    if (!cancelled.ok()) {
      std::fprintf(stderr, "barge: job %s: %s\n", id->c_str(), cancelled.message().c_str());
      return kExitBargeFailure;
    }
    (void)store->AddEvent(*id, kSlurmReleasedEvent, std::nullopt,
                          "scancel " + allocation->slurm_id + " (barge down)");
    std::printf("job %s: Slurm job %s cancelled\n", id->c_str(), allocation->slurm_id.c_str());
  }
  if (allocation->nodes.empty()) {
    // Queued when its controller went: nothing ran anywhere.
    if (Status s = store->SetStatus(*id, JobStatus::kCancelled, kExitInterrupted, "barge down while queued in Slurm");
        !s.ok()) {
      std::fprintf(stderr, "barge: %s\n", s.message().c_str());
      return kExitBargeFailure;
    }
  }
  return code;
}

// The Docker timestamp of the last stamped line of a node's log file.
namespace {

std::optional<int64_t> LastKeptStamp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::optional<int64_t> last;
  std::string line;
  while (std::getline(in, line)) {
    Result<int64_t> ns = container::ParseTimestamp(line.substr(0, line.find(' ')));
    if (ns.ok()) last = *ns;
  }
  return last;
}

}  // namespace

// `barge attach JOB`: the merged stream of a running job, all of it, live.
// While its controller lives, the kept files are the stream (as `logs -f`);
// when the controller is gone, barge prints what the files kept, then
// streams from the hosts itself, from where the files stop.
int Attach(const std::string& job_text) {
  const std::string state_dir = StateDir();
  std::optional<FoundJob> found = FindJobOrSay(state_dir, job_text);
  if (!found) return kExitBargeFailure;
  if (HasEnded(found->job)) {
    std::fprintf(stderr, "barge: job %s has ended (%s); its output:\n", found->job.id.c_str(),
                 ToString(found->job.status));
    return LogsCommand(state_dir, found->job.id, LogsOptions{}, stdout);
  }
  std::unique_ptr<JobStore>& store = found->store;
  JobRecord* job = &found->job;
  const std::string* id = &job->id;
  if (job->status != JobStatus::kLost) {
    LogsOptions follow;
    follow.follow = true;
    // The job file's forward: entries, served by a child of this process
    // over its own sessions while the stream is followed.
    pid_t forwarder = -1;
    std::optional<JobSpec> spec = RecordedSpec(*job);
    std::optional<cluster::PlanInput> input;
    if (spec && !spec->forward.empty()) input = RecordedPlanInput(*spec, *id);
    if (input) {
      // No SQLite connection may cross a fork (its locks and WAL index are
      // per process: see runner/array/array_runner.cc); this branch needs the
      // store no more.
      store.reset();
      std::fflush(nullptr);
      forwarder = fork();
      if (forwarder == 0) {
        ControllerOptions options;
        options.state_dir = state_dir;
        std::_Exit(ForwardJobPorts(*spec, *input, options, spec->forward));
      }
    }
    int code = LogsCommand(state_dir, *id, follow, stdout);
    if (forwarder > 0) {
      kill(forwarder, SIGTERM);
      waitpid(forwarder, nullptr, 0);
    }
    return code;
  }
  std::optional<JobSpec> spec = RecordedSpec(*job);
  if (!spec) return kExitBargeFailure;
  std::optional<cluster::PlanInput> input = RecordedPlanInput(*spec, *id);
  if (!input) return kExitBargeFailure;
  std::map<int, int64_t> kept;
  Result<std::vector<NodeRecord>> nodes = store->GetNodes(*id);
  if (nodes.ok()) {
    for (const auto& n : *nodes) {
      if (auto ns = LastKeptStamp(n.log_path)) kept[n.rank] = *ns;
    }
  }
  // The latest restart: the kept files' lines before it are an earlier
  // container's (AttachOrphan counts only the later ones).
  std::optional<int64_t> restarted_at_ns;
  if (Result<std::vector<EventRecord>> events = store->GetEvents(*id); events.ok()) {
    for (const EventRecord& e : *events) {
      if (e.kind == event::kRestarting) {
        restarted_at_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(e.at.time_since_epoch()).count();
      }
    }
  }
  std::fprintf(stderr, "barge: job %s: its controller is gone; streaming from the hosts\n",
               id->c_str());
  if (LogsCommand(state_dir, *id, LogsOptions{}, stdout) != 0) return kExitBargeFailure;
  ControllerOptions options;
  options.state_dir = state_dir;
  return AttachToOrphan(*spec, *input, options, kept, restarted_at_ns);
}

}  // namespace barge::runner
