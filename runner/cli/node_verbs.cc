// The verbs that look at hosts or into a running job's nodes: `barge
// hosts`, `reap`, `exec` (plain, -i, -it), `forward`, `top`, and the
// job-id completion helper.
#include <csignal>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sys/wait.h>
#include <algorithm>
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
#include "runner/jobfile/overrides.h"
#include "runner/jobfile/job_file.h"
#include "runner/store/job_store.h"
#include "runner/cli/jobs_cli.h"
#include "runner/store/state_dir.h"
#include "runner/jobfile/forward_spec.h"
#include "runner/cli/verbs.h"

namespace barge::runner {

// The hosts of a job file (its other keys unchecked beyond parsing), or a
// throwaway job over comma-separated `hosts` with the ssh defaults, every
// host with one node: for the verbs that look at hosts (reap, hosts).
std::optional<JobSpec> HostsSpec(const std::string& file, const std::string& hosts) {
  std::optional<JobSpec> spec;
  if (!file.empty()) {
    std::optional<RunRequest> request = ReadRequest(file, {});
    if (!request) return std::nullopt;
    std::optional<LoadedJob> loaded = Load(*request, file, SecretValues::kSkip);  // only its hosts
    if (loaded) spec = std::move(loaded->spec);
  } else {
    // A throwaway job over the listed hosts, with the ssh defaults.
    std::string yaml = "name: reap\nimage: none\nhosts:\n";
    std::stringstream list(hosts);
    for (std::string h; std::getline(list, h, ',');) {
      if (!h.empty()) yaml += "  - " + h + "\n";
    }
    LoadedJob loaded = ParseJobText(yaml, "--hosts", ".");
    for (const auto& e : loaded.errors) std::fprintf(stderr, "%s\n", e.ToString().c_str());
    spec = std::move(loaded.spec);
  }
  if (!spec) return std::nullopt;
  // Every host of the file is looked at, however many nodes the job has.
  for (auto& h : spec->hosts) h.nodes = 1;
  spec->roles.erase(cluster::kWorkerRole);
  return spec;
}

// The specs whose hosts `hosts` and `reap` look at: the job's own hosts
// (when it has any) and each host group's, reached with that group's ssh
// settings, each with its label ("" for the job's own, "group NAME").
std::vector<std::pair<std::string, JobSpec>> HostsSpecs(const JobSpec& spec) {
  std::vector<std::pair<std::string, JobSpec>> out;
  if (!spec.hosts.empty() || spec.host_groups.empty()) out.emplace_back("", spec);
  for (const HostGroup& g : spec.host_groups) {
    JobSpec s = spec;
    s.host_groups.clear();
    s.hosts = g.hosts;
    for (auto& h : s.hosts) h.nodes = 1;
    s.ssh = g.ssh;
    s.hosts_file = g.hosts_file;
    s.hosts_command.clear();
    s.hosts_command_ran = false;
    out.emplace_back("group " + g.name, std::move(s));
  }
  return out;
}

// `barge hosts JOBFILE | --hosts a,b [--json] [--gpus] [--forgive HOST]`:
// the job's hosts and every host group's, in one table (or JSON), with
// their failure records; with --gpus, their GPUs; with --forgive, HOST's
// record is forgiven first.
int Hosts(const std::string& file, const std::string& hosts, bool json, bool gpus, const std::string& forgive) {
  std::optional<JobSpec> spec = HostsSpec(file, hosts);
  if (!spec) return kExitBargeFailure;
  ControllerOptions options;
  options.state_dir = StateDir();
  options.hosts_gpus = gpus;
  options.hosts_forgive = forgive;
  std::vector<HostView> views;
  int code = 0;
  for (const auto& [label, s] : HostsSpecs(*spec)) {
    if (ListJobHosts(s, MakePlanInput(s, "hosts"), options, label, &views) != 0) code = kExitBargeFailure;
  }
  if (!forgive.empty() && std::none_of(views.begin(), views.end(), [](const HostView& v) { return v.forgiven; })) {
    std::fprintf(stderr, "barge: --forgive %s: not one of the hosts listed (or not reached): nothing forgiven\n",
                 forgive.c_str());
    code = kExitBargeFailure;
  }
  if (json) {
    std::printf("%s\n", HostsJson(views).dump(2).c_str());
  } else {
    std::fputs((gpus ? HostsGpuTable(views) : HostsTable(views)).c_str(), stdout);
  }
  std::fflush(stdout);
  return code;
}

// `barge reap FILE | --hosts a,b`: removes the barge containers on the
// job's hosts and every host group's that no live job owns.
int Reap(const std::string& file, const std::string& hosts) {
  std::optional<JobSpec> spec = HostsSpec(file, hosts);
  if (!spec) return kExitBargeFailure;
  const std::string state_dir = StateDir();
  Result<std::unique_ptr<JobStore>> store = JobStore::Open(state_dir);
  if (!store.ok()) {
    std::fprintf(stderr, "barge: %s\n", store.status().message().c_str());
    return kExitBargeFailure;
  }
  auto is_live = [&](const std::string& id) {
    Result<JobRecord> job = (*store)->GetJob(id);
    if (!job.ok()) return false;  // not a job of this store
    return !IsFinal(job->status) && ControllerAlive(job->controller_pid, job->controller_identity);
  };
  ControllerOptions options;
  options.state_dir = state_dir;
  int code = 0;
  for (const auto& [label, s] : HostsSpecs(*spec)) {
    if (!label.empty()) std::printf("%s:\n", label.c_str());
    if (ReapJobHosts(s, MakePlanInput(s, "reap"), options, is_live) != 0) code = kExitBargeFailure;
  }
  return code;
}

// `barge exec JOB --node RANK -- CMD...`.
int Exec(const std::string& job_text, int rank, const std::vector<std::string>& argv) {
  const std::string state_dir = StateDir();
  std::optional<FoundJob> found = FindJobOrSay(state_dir, job_text);
  if (!found) return kExitBargeFailure;
  JobRecord* job = &found->job;
  const std::string* id = &job->id;
  std::optional<JobSpec> spec = RecordedSpec(*job);
  if (!spec) return kExitBargeFailure;
  std::optional<cluster::PlanInput> input = RecordedPlanInput(*spec, *id);
  if (!input) return kExitBargeFailure;
  ControllerOptions options;
  options.state_dir = state_dir;
  return ExecInJobNode(*spec, *input, options, rank, argv);
}

// A running job and its recorded spec, for the verbs that look into one
// (exec -i/-it, forward, top); nullopt after saying why not.
namespace {

struct LiveJob {
  std::string id;
  JobSpec spec;
  cluster::PlanInput input;  // RecordedPlanInput
};
std::optional<LiveJob> FindLiveJob(const std::string& job_text, const char* verb) {
  std::optional<FoundJob> found = FindJobOrSay(StateDir(), job_text);
  if (!found) return std::nullopt;
  const JobRecord& job = found->job;
  if (IsFinal(job.status) && job.status != JobStatus::kLost) {
    std::fprintf(stderr, "barge: %s: job %s (%s) has ended (%s)\n", verb, job.id.c_str(),
                 job.name.c_str(), ToString(job.status));
    return std::nullopt;
  }
  std::optional<JobSpec> spec = RecordedSpec(job);
  if (!spec) return std::nullopt;
  std::optional<cluster::PlanInput> input = RecordedPlanInput(*spec, job.id);
  if (!input) return std::nullopt;
  return LiveJob{job.id, std::move(*spec), std::move(*input)};
}

}  // namespace

// `barge exec -i|-it JOB [--node RANK] -- CMD...`.
int ExecInteractive(const std::string& job_text, int rank, const std::vector<std::string>& argv,
                    bool tty) {
  std::optional<LiveJob> live = FindLiveJob(job_text, "exec");
  if (!live) return kExitBargeFailure;
  ControllerOptions options;
  options.state_dir = StateDir();
  return ExecInteractiveInJobNode(live->spec, live->input, options, rank,
                                  argv, tty);
}

// `barge forward JOB [LOCAL:]REMOTE... [--node RANK] [--socket PATH]`:
// until Ctrl-C.
int Forward(const std::string& job_text, const std::vector<std::string>& ports, int rank,
            const std::string& socket_path) {
  if (!socket_path.empty() && ports.size() != 1) {
    std::fprintf(stderr, "barge: forward: --socket serves one port: give one REMOTE port\n");
    return kExitBargeFailure;
  }
  std::vector<ForwardSpec> forwards;
  for (const std::string& p : ports) {
    Result<ForwardPorts> parsed = ParseForwardPorts(p);
    if (!parsed.ok()) {
      std::fprintf(stderr, "barge: forward: %s\n", parsed.status().message().c_str());
      return kExitBargeFailure;
    }
    forwards.push_back({parsed->local_port, parsed->remote_port, rank, socket_path});
  }
  std::optional<LiveJob> live = FindLiveJob(job_text, "forward");
  if (!live) return kExitBargeFailure;
  ControllerOptions options;
  options.state_dir = StateDir();
  return ForwardJobPorts(live->spec, live->input, options, forwards);
}

// `barge top JOB [--once] [--json]`.
int Top(const std::string& job_text, TopOptions top) {
  std::optional<LiveJob> live = FindLiveJob(job_text, "top");
  if (!live) return kExitBargeFailure;
  ControllerOptions options;
  options.state_dir = StateDir();
  if (top.json && !top.once) {
    std::fprintf(stderr, "barge: top: --json prints one sample: add --once\n");
    return kExitBargeFailure;
  }
  return TopJob(live->spec, live->input, options, top);
}

// `barge __complete-jobs`: the store's job ids, then their names, one a
// line, for the completion scripts. Prints nothing when there is no store.
int CompleteJobs() {
  const std::string state_dir = StateDir();
  std::error_code ec;
  if (!std::filesystem::exists(state_dir + "/barge.db", ec)) return 0;
  Result<std::unique_ptr<JobStore>> store = JobStore::Open(state_dir);
  if (!store.ok()) return 0;
  Result<std::vector<JobRecord>> jobs = (*store)->ListJobs();
  if (!jobs.ok()) return 0;
  std::set<std::string> names;
  for (const JobRecord& j : *jobs) {
    std::printf("%s\n", j.id.c_str());
    names.insert(j.name);
  }
  for (const std::string& n : names) std::printf("%s\n", n.c_str());
  return 0;
}

}  // namespace barge::runner
