// barge: the command line. Parses arguments (CLI11), loads and validates the
// job file, and hands over to the plan printer or the Controller.
#include <csignal>
#include <spdlog/cfg/env.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <sys/wait.h>

#include <chrono>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>
#include <iostream>
#include <sstream>

#include "cluster/plan.h"
#include "runner/controller.h"
#include "runner/fd_limit.h"
#include "runner/job_file.h"
#include "runner/job_store.h"
#include "runner/jobs_cli.h"
#include "runner/logs_cli.h"
#include "container/timestamp.h"
#include "runner/units.h"
#include "runner/plan_printer.h"
#include "runner/state_dir.h"
#include "runner/ui/ui_cli.h"

namespace barge::runner {
namespace {

// Loads and validates `path`; prints every error and returns nullopt on failure.
std::optional<JobSpec> Load(const std::string& path, SecretValues secrets = SecretValues::kRead) {
  LoadedJob loaded = LoadJobFile(path, secrets);
  if (!loaded.errors.empty()) {
    for (const auto& e : loaded.errors) std::fprintf(stderr, "%s\n", e.ToString().c_str());
    std::fprintf(stderr, "barge: %zu error(s) in %s; nothing was started\n", loaded.errors.size(),
                 path.c_str());
    return std::nullopt;
  }
  return std::move(loaded.spec);
}

int Plan(const std::string& path) {
  std::optional<JobSpec> spec = Load(path);
  if (!spec) return kExitBargeFailure;
  Result<cluster::Plan> plan = cluster::MakePlan(MakePlanInput(*spec, NewJobId()));
  if (!plan.ok()) {
    std::fprintf(stderr, "%s: %s\n", path.c_str(), plan.status().message().c_str());
    return kExitBargeFailure;
  }
  std::fputs(FormatPlan(*spec, *plan).c_str(), stdout);
  return 0;
}

// The first line of a recorded spec names the job file, so that `barge
// down` can parse it again with relative paths resolved as at run time.
constexpr const char* kSpecFileComment = "# barge job file: ";

// Ok when barge may open a socket per host and a log file per node; an
// error before anything connects otherwise (main raised the soft limit).
Status CheckOpenFiles(const JobSpec& spec) {
  int ssh_hosts = 0, nodes = 0;
  for (const auto* list : {&spec.hosts, &spec.spare_hosts}) {
    for (const cluster::Host& h : *list) {
      ssh_hosts += h.is_local() ? 0 : 1;
      nodes += h.nodes;
    }
  }
  Result<OpenFileLimit> limit = RaiseOpenFileLimit();
  if (!limit.ok()) return limit.status();
  return CheckOpenFileLimit(ssh_hosts, nodes, *limit);
}

int Run(const std::string& path, bool detach) {
  std::optional<JobSpec> spec = Load(path);
  if (!spec) return kExitBargeFailure;
  if (Status s = CheckOpenFiles(*spec); !s.ok()) {
    std::fprintf(stderr, "barge: %s\n", s.message().c_str());
    return kExitBargeFailure;
  }
  const std::string job_id = NewJobId();
  cluster::PlanInput input = MakePlanInput(*spec, job_id);
  ControllerOptions options;
  options.state_dir = StateDir();
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  options.spec_text = kSpecFileComment + std::filesystem::absolute(path).string() + "\n" + text.str();
  if (!detach) return RunJob(*spec, input, options);

  // Detached: the same controller in a process of its own (its own session,
  // so closing the terminal does not stop it), writing to
  // runs/<id>/controller.log. We return once the job runs (or ended).
  const std::string run_dir = options.state_dir + "/runs/" + job_id;
  if (Status s = MakeDirs(run_dir); !s.ok()) {
    std::fprintf(stderr, "barge: %s\n", s.message().c_str());
    return kExitBargeFailure;
  }
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) {
    std::perror("barge: fork");
    return kExitBargeFailure;
  }
  if (pid == 0) {
    setsid();
    int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    int log_fd = open((run_dir + "/controller.log").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
    if (log_fd >= 0) {
      dup2(log_fd, STDOUT_FILENO);
      dup2(log_fd, STDERR_FILENO);
    }
    options.echo = false;
    std::_Exit(RunJob(*spec, input, options));
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(30);
  while (std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    Result<std::unique_ptr<JobStore>> store = JobStore::Open(options.state_dir);
    if (!store.ok()) continue;
    Result<JobRecord> job = (*store)->GetJob(job_id);
    if (!job.ok()) {
      if (waitpid(pid, nullptr, WNOHANG) == pid) break;  // died before recording
      continue;
    }
    if (job->status == JobStatus::kRunning) {
      std::printf("%s\n", job_id.c_str());
      return 0;
    }
    if (IsFinal(job->status)) {
      std::printf("%s\n", job_id.c_str());
      std::fprintf(stderr, "barge: job %s ended before running: %s (see %s/controller.log)\n",
                   job_id.c_str(), ToString(job->status), run_dir.c_str());
      return job->exit_code.value_or(kExitBargeFailure);
    }
  }
  std::fprintf(stderr, "barge: the detached controller of job %s did not report (see %s/controller.log)\n",
               job_id.c_str(), run_dir.c_str());
  return kExitBargeFailure;
}

// Parses the job file recorded for job `id` (see kSpecFileComment).
std::optional<JobSpec> RecordedSpec(const JobRecord& job) {
  std::string file = "job " + job.id;
  if (job.spec.rfind(kSpecFileComment, 0) == 0) {
    size_t eol = job.spec.find('\n');
    file = job.spec.substr(std::strlen(kSpecFileComment), eol - std::strlen(kSpecFileComment));
  }
  // Acting on a job's hosts needs no secret value, and the files and
  // variables the job read its secrets from may be gone by now.
  LoadedJob loaded = ParseJobText(job.spec, file, std::filesystem::path(file).parent_path().string(),
                                  SecretValues::kSkip);
  for (const auto& e : loaded.errors) std::fprintf(stderr, "%s\n", e.ToString().c_str());
  return std::move(loaded.spec);
}

// `barge down JOB`: the same teardown as completion. A live controller is
// asked (SIGTERM, like a first Ctrl-C) and waited for; for a job whose
// controller is gone, barge connects to its hosts itself.
int Down(const std::string& job_text) {
  const std::string state_dir = StateDir();
  Result<FoundJob> found = FindJob(state_dir, job_text);
  if (!found.ok()) {
    std::fprintf(stderr, "barge: %s\n", found.status().message().c_str());
    return kExitBargeFailure;
  }
  std::unique_ptr<JobStore>& store = found->store;
  JobRecord* job = &found->job;
  const std::string* id = &job->id;
  if (IsFinal(job->status) && job->status != JobStatus::kLost) {
    std::printf("job %s is already %s\n", id->c_str(), ToString(job->status));
    return 0;
  }
  if (!IsFinal(job->status) && ControllerAlive(job->controller_pid)) {
    std::printf("stopping job %s (controller pid %d)\n", id->c_str(), *job->controller_pid);
    kill(*job->controller_pid, SIGTERM);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(10);
    while (std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      Result<JobRecord> now = store->GetJob(*id);
      if (now.ok() && IsFinal(now->status)) {
        std::printf("job %s: %s\n", id->c_str(), ToString(now->status));
        return 0;
      }
    }
    std::fprintf(stderr, "barge: job %s did not stop within 10 minutes\n", id->c_str());
    return kExitBargeFailure;
  }
  // The controller is gone: tear down from the recorded job file.
  std::optional<JobSpec> spec = RecordedSpec(*job);
  if (!spec) return kExitBargeFailure;
  std::printf("job %s: its controller is gone; removing its containers\n", id->c_str());
  ControllerOptions options;
  options.state_dir = state_dir;
  return TearDownJob(*spec, MakePlanInput(*spec, *id), options);
}

// The Docker timestamp of the last stamped line of a node's log file.
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

// `barge attach JOB`: the merged stream of a running job, all of it, live.
// While its controller lives, the kept files are the stream (as `logs -f`);
// when the controller is gone, barge prints what the files kept, then
// streams from the hosts itself, from where the files stop.
int Attach(const std::string& job_text) {
  const std::string state_dir = StateDir();
  Result<FoundJob> found = FindJob(state_dir, job_text);
  if (!found.ok()) {
    std::fprintf(stderr, "barge: %s\n", found.status().message().c_str());
    return kExitBargeFailure;
  }
  std::unique_ptr<JobStore>& store = found->store;
  JobRecord* job = &found->job;
  const std::string* id = &job->id;
  if (IsFinal(job->status) && job->status != JobStatus::kLost) {
    std::fprintf(stderr, "barge: job %s has ended (%s); its output:\n", id->c_str(),
                 ToString(job->status));
    return LogsCommand(state_dir, *id, LogsOptions{}, stdout);
  }
  if (job->status != JobStatus::kLost) {
    LogsOptions follow;
    follow.follow = true;
    return LogsCommand(state_dir, *id, follow, stdout);
  }
  std::optional<JobSpec> spec = RecordedSpec(*job);
  if (!spec) return kExitBargeFailure;
  std::map<int, int64_t> kept;
  Result<std::vector<NodeRecord>> nodes = store->GetNodes(*id);
  if (nodes.ok()) {
    for (const auto& n : *nodes) {
      if (auto ns = LastKeptStamp(n.log_path)) kept[n.rank] = *ns;
    }
  }
  std::fprintf(stderr, "barge: job %s: its controller is gone; streaming from the hosts\n",
               id->c_str());
  if (LogsCommand(state_dir, *id, LogsOptions{}, stdout) != 0) return kExitBargeFailure;
  ControllerOptions options;
  options.state_dir = state_dir;
  return AttachToOrphan(*spec, MakePlanInput(*spec, *id), options, kept);
}

// `barge reap FILE | --hosts a,b`: removes barge containers of no running job.
int Reap(const std::string& file, const std::string& hosts) {
  std::optional<JobSpec> spec;
  if (!file.empty()) {
    spec = Load(file, SecretValues::kSkip);  // only its hosts are needed
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
  if (!spec) return kExitBargeFailure;
  const std::string state_dir = StateDir();
  Result<std::unique_ptr<JobStore>> store = JobStore::Open(state_dir);
  if (!store.ok()) {
    std::fprintf(stderr, "barge: %s\n", store.status().message().c_str());
    return kExitBargeFailure;
  }
  auto is_live = [&](const std::string& id) {
    Result<JobRecord> job = (*store)->GetJob(id);
    if (!job.ok()) return false;  // not a job of this store: an orphan here
    return !IsFinal(job->status) && ControllerAlive(job->controller_pid);
  };
  // Every host of the file is looked at, however many nodes the job has.
  for (auto& h : spec->hosts) h.nodes = 1;
  spec->roles.erase(cluster::kWorkerRole);
  ControllerOptions options;
  options.state_dir = state_dir;
  return ReapJobHosts(*spec, MakePlanInput(*spec, "reap"), options, is_live);
}

// `barge exec JOB --node RANK -- CMD...`.
int Exec(const std::string& job_text, int rank, const std::vector<std::string>& argv) {
  const std::string state_dir = StateDir();
  Result<FoundJob> found = FindJob(state_dir, job_text);
  if (!found.ok()) {
    std::fprintf(stderr, "barge: %s\n", found.status().message().c_str());
    return kExitBargeFailure;
  }
  JobRecord* job = &found->job;
  const std::string* id = &job->id;
  std::optional<JobSpec> spec = RecordedSpec(*job);
  if (!spec) return kExitBargeFailure;
  ControllerOptions options;
  options.state_dir = state_dir;
  return ExecInJobNode(*spec, MakePlanInput(*spec, *id), options, rank, argv);
}

}  // namespace
}  // namespace barge::runner

int main(int argc, char** argv) {
  // A closed terminal or pipe (`barge run | head`) must not kill the
  // controller mid-job: writes to it fail instead, and the job goes on (its
  // output is in the log files). Children get SIGPIPE back (local_executor).
  std::signal(SIGPIPE, SIG_IGN);
  // One socket per host and one log file per node stay open: take all the
  // descriptors the hard limit allows (run checks the job fits, see Run).
  (void)barge::runner::RaiseOpenFileLimit();
  auto logger = spdlog::stderr_color_mt("barge");
  spdlog::set_default_logger(logger);
  spdlog::set_level(spdlog::level::warn);
  spdlog::cfg::load_env_levels();  // SPDLOG_LEVEL=debug for diagnostics

  CLI::App app{"barge: run container jobs on raw hosts over SSH, no Kubernetes"};
  app.require_subcommand(1);
  std::string file;
  auto* plan = app.add_subcommand("plan", "Print, per host, the exact commands `run` would send; connects to nothing");
  plan->add_option("job", file, "job file (YAML)")->required();
  auto* run = app.add_subcommand("run", "Run the job: start every container, stream logs, tear down, exit with the head's code");
  run->add_option("job", file, "job file (YAML)")->required();
  bool detach = false;
  run->add_flag("-d,--detach", detach, "run the controller in the background; print the job id once it runs");
  auto* version = app.add_subcommand("version", "Print barge's version");

  barge::runner::ListOptions list;
  std::string status_filter, name_filter;
  auto* ls = app.add_subcommand("ls", "The summary table of jobs, newest first");
  ls->add_option("--status", status_filter, "only jobs with this status");
  ls->add_option("--name", name_filter, "only jobs with this name");
  ls->add_option("--limit", list.limit, "at most this many jobs")->check(CLI::NonNegativeNumber);
  ls->add_flag("--json", list.json, "one JSON array");
  std::string job;
  bool show_json = false;
  auto* show = app.add_subcommand("show", "One job: its nodes and its events");
  show->add_option("job", job, "job id, unique id prefix, or name (the latest job of that name)")->required();
  show->add_flag("--json", show_json, "JSON");
  bool show_timeline = false;
  show->add_flag("--timeline", show_timeline, "the timeline: one text bar per node, a letter per phase");
  std::string ui_listen = "127.0.0.1:8765", ui_token;
  auto* ui = app.add_subcommand("ui", "Serve the local web dashboard (jobs, timelines, live logs, stop)");
  ui->add_option("--listen", ui_listen, "HOST:PORT to listen on (default 127.0.0.1:8765; port 0 = any)");
  ui->add_option("--token", ui_token, "the access token (default: a new random one, printed in the URL)");
  auto* rm = app.add_subcommand("rm", "Remove a finished job's record, logs and artifacts");
  rm->add_option("job", job, "job id, unique id prefix, or name")->required();
  auto* down = app.add_subcommand("down", "Tear a job down now (same teardown as completion, hooks included)");
  down->add_option("job", job, "job id, unique id prefix, or name")->required();
  auto* attach = app.add_subcommand("attach", "Reattach the merged live stream of a running job");
  attach->add_option("job", job, "job id, unique id prefix, or name")->required();
  barge::runner::LogsOptions logs_options;
  auto* logs = app.add_subcommand("logs", "A job's output from its kept log files, all nodes merged by time; -f follows it live");
  logs->add_option("job", job, "job id, unique id prefix, or name (the latest job of that name)")->required();
  logs->add_flag("-f,--follow", logs_options.follow, "after what is there, print new lines until the job has ended");
  logs->add_option("--node", logs_options.node, "only the node of this rank");
  logs->add_option("--since", logs_options.since, "only lines from this time on: 2024-05-01T12:00:00Z, or a duration ago: 10m");
  logs->add_option("--tail", logs_options.tail, "only the last N lines (of what is already there, with -f)");
  logs->add_flag("-t,--timestamps", logs_options.timestamps, "start each line with Docker's timestamp");
  std::string reap_file, reap_hosts;
  auto* reap = app.add_subcommand("reap", "Remove every barge container on the hosts that belongs to no running job");
  reap->add_option("job_file", reap_file, "a job file whose hosts to look at");
  reap->add_option("--hosts", reap_hosts, "comma-separated hosts (ssh defaults from ~/.ssh/config)");
  int exec_rank = 0;
  std::vector<std::string> exec_argv;
  auto* exec = app.add_subcommand("exec", "Run a command inside a node's container: barge exec JOB --node RANK -- CMD...");
  exec->add_option("job", job, "job id, unique id prefix, or name")->required();
  exec->add_option("--node", exec_rank, "the node's rank (default 0, the head)");
  exec->add_option("command", exec_argv, "the command and its arguments")->required();
  std::string older_than;
  auto* prune = app.add_subcommand("prune", "Remove finished jobs older than a duration, with their files");
  prune->add_option("--older-than", older_than, "e.g. 30d, 12h")->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : barge::runner::kExitBargeFailure;
  }
  if (*version) {
    std::printf("barge 0.1.0\n");
    return 0;
  }
  if (*plan) return barge::runner::Plan(file);
  const std::string state_dir = barge::runner::StateDir();
  if (*ls) {
    if (!status_filter.empty()) list.status = status_filter;
    if (!name_filter.empty()) list.name = name_filter;
    return barge::runner::ListJobsCommand(state_dir, list, stdout);
  }
  if (*show && show_timeline) return barge::runner::ui::TimelineCommand(state_dir, job, stdout);
  if (*show) return barge::runner::ShowJobCommand(state_dir, job, show_json, stdout);
  if (*ui) {
    barge::runner::ui::UiOptions ui_options;
    ui_options.state_dir = state_dir;
    ui_options.token = ui_token;
    if (auto s = barge::runner::ui::ParseListen(ui_listen, &ui_options); !s.ok()) {
      std::fprintf(stderr, "barge: %s\n", s.message().c_str());
      return barge::runner::kExitBargeFailure;
    }
    return barge::runner::ui::UiCommand(ui_options, stdout);
  }
  if (*rm) return barge::runner::RemoveJobCommand(state_dir, job, stdout);
  if (*down) return barge::runner::Down(job);
  if (*attach) return barge::runner::Attach(job);
  if (*logs) return barge::runner::LogsCommand(state_dir, job, logs_options, stdout);
  if (*reap) {
    if (reap_file.empty() == reap_hosts.empty()) {
      std::fprintf(stderr, "barge: reap needs a job file or --hosts (one of them)\n");
      return barge::runner::kExitBargeFailure;
    }
    return barge::runner::Reap(reap_file, reap_hosts);
  }
  if (*exec) return barge::runner::Exec(job, exec_rank, exec_argv);
  if (*prune) {
    auto age = barge::runner::ParseDuration(older_than);
    if (!age.ok()) {
      std::fprintf(stderr, "barge: --older-than: %s\n", age.status().message().c_str());
      return barge::runner::kExitBargeFailure;
    }
    return barge::runner::PruneCommand(state_dir, *age, stdout);
  }
  return barge::runner::Run(file, detach);
}
