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
#include <ctime>
#include <set>

#include "barge_version.h"
#include "cluster/plan.h"
#include "runner/cli_docs.h"
#include "runner/color.h"
#include "runner/controller.h"
#include "runner/fd_limit.h"
#include "runner/job_schema.h"
#include "runner/overrides.h"
#include "runner/redact.h"
#include "runner/job_file.h"
#include "runner/job_store.h"
#include "runner/job_text.h"
#include "runner/jobs_cli.h"
#include "runner/logs_cli.h"
#include "container/timestamp.h"
#include "runner/units.h"
#include "runner/host_address.h"
#include "runner/plan_printer.h"
#include "runner/state_dir.h"
#include "runner/ui/ui_cli.h"
#include "runner/fleet/array_cli.h"
#include "runner/window/forward_spec.h"

namespace barge::runner {
namespace {

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

// Parses `request` (its text as if read from request.file) with its
// overrides, the user's config.yaml and, for a rerun, the recorded hosts
// file; prints every error and returns nullopt on failure. `shown` is the
// job file's name in errors.
std::optional<LoadedJob> Load(const RunRequest& request, const std::string& shown,
                              SecretValues secrets = SecretValues::kRead,
                              bool run_hosts_command = true) {
  JobLayers layers;
  layers.run_hosts_command = run_hosts_command;
  layers.overrides = request.overrides;
  layers.config_file = DefaultConfigFile();
  layers.hosts_file = request.hosts_file;
  layers.hosts_command = request.hosts_command;
  LoadedJob loaded = ParseJobText(request.text, shown,
                                  std::filesystem::path(request.file).parent_path().string(),
                                  secrets, layers);
  if (!loaded.errors.empty()) {
    for (const auto& e : loaded.errors) std::fprintf(stderr, "%s\n", e.ToString().c_str());
    std::fprintf(stderr, "barge: %zu error(s) in %s%s; nothing was started\n", loaded.errors.size(),
                 shown.c_str(), request.overrides.empty() ? "" : " and its overrides");
    return std::nullopt;
  }
  return loaded;
}

// Reads the job file at `path` into a request with `overrides`.
std::optional<RunRequest> ReadRequest(const std::string& path, std::vector<Override> overrides) {
  RunRequest request;
  std::error_code ec;
  request.file = std::filesystem::absolute(path, ec).lexically_normal().string();
  std::ifstream in(path, std::ios::binary);
  if (!in || std::filesystem::is_directory(path, ec)) {
    std::fprintf(stderr, "%s: cannot read job file: %s\n", path.c_str(),
                 in ? "it is a directory" : std::strerror(errno));
    return std::nullopt;
  }
  std::stringstream text;
  text << in.rdbuf();
  request.text = text.str();
  if (request.text.size() > kMaxJobFileBytes) request.text.resize(kMaxJobFileBytes + 1);
  request.overrides = std::move(overrides);
  return request;
}

// The effect of the overrides, above the plan.
std::string OverridesBanner(const RunRequest& request) {
  if (request.overrides.empty()) return "";
  std::string out = "# overrides:";
  for (const Override& o : request.overrides) out += " " + o.Flag() + " " + o.Argument();
  return out + "\n";
}

int PlanOne(const std::string& path, const JobSpec& spec);

int Plan(const std::string& path, std::vector<Override> overrides, const std::string& array_file = "") {
  std::optional<RunRequest> request = ReadRequest(path, std::move(overrides));
  if (!request) return kExitBargeFailure;
  std::optional<LoadedJob> loaded = Load(*request, path);
  if (!loaded) return kExitBargeFailure;
  // A job array (runner/fleet/): each member's plan.
  Result<std::optional<fleet::ArrayParams>> array = fleet::ArrayParamsOf(*loaded->spec, array_file);
  if (!array.ok()) {
    std::fprintf(stderr, "barge: %s\n", array.status().message().c_str());
    return kExitBargeFailure;
  }
  std::fputs(OverridesBanner(*request).c_str(), stdout);
  if (*array) {
    return fleet::PlanArray(*loaded->spec, **array, [&](const JobSpec& member) { return PlanOne(path, member); });
  }
  return PlanOne(path, *loaded->spec);
}

// The plan of one job (or one array member).
int PlanOne(const std::string& path, const JobSpec& spec) {
  cluster::PlanInput input = MakePlanInput(spec, NewJobId());
  // Hosts named by an ssh config alias: the plan shows their HostName.
  const std::map<size_t, std::string> address_notes = AddressesFromSshConfig(spec, &input);
  Result<cluster::Plan> plan = cluster::MakePlan(input);
  if (!plan.ok()) {
    std::fprintf(stderr, "%s: %s\n", path.c_str(), plan.status().message().c_str());
    return kExitBargeFailure;
  }
  std::fputs(FormatPlan(spec, *plan, address_notes).c_str(), stdout);
  return 0;
}

// Runs `request`: records it in the store (how the job was run: the job
// file's text, the overrides, the hosts file as read), then the job.
// `--events json`: the job's events as JSON lines on stdout (container
// output then goes only to the per-node files, so stdout stays parseable),
// or into `events_file` (a path, /dev/fd/N included) with the output echoed
// as usual.
struct EventsOption {
  std::string format;      // "" or "json"
  std::string file;        // "" = stdout
};

int Run(RunRequest request, const std::string& shown, bool detach, const EventsOption& events = {},
        const std::string& array_file = "", bool wait = false) {
  std::optional<LoadedJob> loaded = Load(request, shown);
  if (!loaded) return kExitBargeFailure;
  JobSpec* spec = &*loaded->spec;
  request.hosts_file = loaded->hosts_file;
  request.hosts_command = loaded->hosts_command;
  if (Status s = CheckOpenFiles(*spec); !s.ok()) {
    std::fprintf(stderr, "barge: %s\n", s.message().c_str());
    return kExitBargeFailure;
  }
  // A job array (runner/fleet/): one member job per row, run by the array
  // controller.
  Result<std::optional<fleet::ArrayParams>> array = fleet::ArrayParamsOf(*spec, array_file);
  if (!array.ok()) {
    std::fprintf(stderr, "barge: %s; nothing was started\n", array.status().message().c_str());
    return kExitBargeFailure;
  }
  if (*array) {
    // --events: the array controller's own events (runner/fleet/array_events.h).
    std::FILE* array_events = nullptr;
    if (!events.format.empty() && events.format != "json") {
      std::fprintf(stderr, "barge: --events: unknown format '%s' (expected json)\n", events.format.c_str());
      return kExitBargeFailure;
    }
    if (!events.file.empty()) {
      array_events = std::fopen(events.file.c_str(), "a");
      if (!array_events) {
        std::fprintf(stderr, "barge: --events-file %s: %s\n", events.file.c_str(), std::strerror(errno));
        return kExitBargeFailure;
      }
    } else if (!events.format.empty()) {
      array_events = stdout;
    }
    const int code = fleet::RunArrayCommand(*spec, **array, Redactor(*spec)(RunRequestToJson(request)),
                                            kSpecFileComment + request.file + "\n" + request.text, detach,
                                            array_events);
    if (array_events && array_events != stdout) std::fclose(array_events);
    return code;
  }
  const std::string job_id = NewJobId();
  cluster::PlanInput input = MakePlanInput(*spec, job_id);
  ControllerOptions options;
  options.state_dir = StateDir();
  options.spec_text = kSpecFileComment + request.file + "\n" + request.text;
  options.wait = wait;
  {
    // Before the controller creates the job, so that even a job that dies
    // in preflight can be shown and run again.
    const Redactor redact(*spec);
    Result<std::unique_ptr<JobStore>> store = JobStore::Open(options.state_dir);
    Status recorded = store.ok() ? (*store)->SetRunRequest(job_id, redact(RunRequestToJson(request)))
                                 : store.status();
    if (!recorded.ok()) {
      std::fprintf(stderr, "barge: %s\n", recorded.message().c_str());
      return kExitBargeFailure;
    }
  }
  std::FILE* events_out = nullptr;
  if (!events.format.empty() || !events.file.empty()) {
    if (!events.format.empty() && events.format != "json") {
      std::fprintf(stderr, "barge: --events: unknown format '%s' (expected json)\n", events.format.c_str());
      return kExitBargeFailure;
    }
    if (events.file.empty()) {
      events_out = stdout;
      options.echo = false;
    } else {
      events_out = std::fopen(events.file.c_str(), "a");
      if (!events_out) {
        std::fprintf(stderr, "barge: --events-file %s: %s\n", events.file.c_str(), std::strerror(errno));
        return kExitBargeFailure;
      }
    }
    options.events = events_out;
  }
  if (!detach) {
    options.serve_forwards = true;
    const int code = RunJob(*spec, input, options);
    if (events_out && events_out != stdout) std::fclose(events_out);
    return code;
  }

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
    // Events on stdout go to the controller's log like everything else.
    if (options.events == stdout) options.events = nullptr;
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

// How job `job` was run: its recorded request, or, for a job recorded
// before requests were (schema version 3), its job file with no override.
std::optional<RunRequest> RecordedRequest(JobStore& store, const JobRecord& job) {
  Result<std::optional<std::string>> json = store.GetRunRequest(job.id);
  if (json.ok() && *json) {
    Result<RunRequest> request = RunRequestFromJson(**json);
    if (request.ok()) return *request;
    std::fprintf(stderr, "barge: job %s: %s\n", job.id.c_str(), request.status().message().c_str());
    return std::nullopt;
  }
  RunRequest request;
  request.file = "job " + job.id;
  request.text = job.spec;
  if (job.spec.rfind(kSpecFileComment, 0) == 0) {
    size_t eol = job.spec.find('\n');
    request.file = job.spec.substr(std::strlen(kSpecFileComment), eol - std::strlen(kSpecFileComment));
    request.text = eol == std::string::npos ? "" : job.spec.substr(eol + 1);
  }
  return request;
}

// `barge rerun JOB`: runs again what job JOB ran, from what was recorded:
// the job file's text, the overrides and the hosts file as read then.
// Secrets are read again, and `workdir:` and `files:` are shipped again
// from where they are now.
int Rerun(const std::string& job_text, bool detach) {
  Result<FoundJob> found = FindJob(StateDir(), job_text);
  if (!found.ok()) {
    std::fprintf(stderr, "barge: %s\n", found.status().message().c_str());
    return kExitBargeFailure;
  }
  std::optional<RunRequest> request = RecordedRequest(*found->store, found->job);
  if (!request) return kExitBargeFailure;
  found->store.reset();
  std::fprintf(stderr, "barge: running job %s again: %s\n", found->job.id.c_str(),
               request->CommandLine().c_str());
  const std::string shown = request->file;
  return Run(std::move(*request), shown, detach);
}

// A job array's recorded run request parsed again, for `barge rerun ARRAY
// --failed`; nullopt after printing why not.
std::optional<fleet::RecordedArrayJob> RecordedArrayJob(const std::string& json) {
  Result<RunRequest> request = RunRequestFromJson(json);
  if (!request.ok()) {
    std::fprintf(stderr, "barge: %s\n", request.status().message().c_str());
    return std::nullopt;
  }
  std::optional<LoadedJob> loaded = Load(*request, request->file);
  if (!loaded) return std::nullopt;
  return fleet::RecordedArrayJob{std::move(*loaded->spec), kSpecFileComment + request->file + "\n" + request->text};
}

// Parses the job as job `job` ran it (its recorded request: the job file,
// the overrides, the hosts file as read then), to act on its hosts.
std::optional<JobSpec> RecordedSpec(const JobRecord& job) {
  Result<std::unique_ptr<JobStore>> store = JobStore::Open(StateDir());
  if (!store.ok()) {
    std::fprintf(stderr, "barge: %s\n", store.status().message().c_str());
    return std::nullopt;
  }
  std::optional<RunRequest> request = RecordedRequest(**store, job);
  if (!request) return std::nullopt;
  // Acting on a job's hosts needs no secret value, and the files and
  // variables the job read its secrets from may be gone by now.
  // Nor does it run a hosts_command again: the hosts are what it printed then.
  std::optional<LoadedJob> loaded =
      Load(*request, request->file, SecretValues::kSkip, /*run_hosts_command=*/false);
  if (!loaded) return std::nullopt;
  return std::move(loaded->spec);
}

// `barge down JOB`: the same teardown as completion. A live controller is
// asked (SIGTERM, like a first Ctrl-C) and waited for, until `deadline`;
// for a job whose controller is gone (or goes while it is waited for
// without recording how the job ended), barge connects to its hosts itself.
int Down(const std::string& job_text,
         std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::now() + std::chrono::minutes(10)) {
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
    std::fflush(stdout);
    const auto asked = std::chrono::steady_clock::now();
    kill(*job->controller_pid, SIGTERM);
    bool gone = false;
    while (!gone && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      Result<JobRecord> now = store->GetJob(*id);
      if (now.ok() && IsFinal(now->status)) {
        std::printf("job %s: %s\n", id->c_str(), ToString(now->status));
        return 0;
      }
      gone = !ControllerAlive(job->controller_pid);
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
    // The job file's forward: entries, served by a child of this process
    // over its own sessions while the stream is followed.
    pid_t forwarder = -1;
    if (std::optional<JobSpec> spec = RecordedSpec(*job); spec && !spec->forward.empty()) {
      // No SQLite connection may cross a fork (its locks and WAL index are
      // per process: see fleet/array_runner.cc); this branch needs the
      // store no more.
      store.reset();
      std::fflush(nullptr);
      forwarder = fork();
      if (forwarder == 0) {
        ControllerOptions options;
        options.state_dir = state_dir;
        std::_Exit(ForwardJobPorts(*spec, MakePlanInput(*spec, *id), options, spec->forward));
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
  return AttachToOrphan(*spec, MakePlanInput(*spec, *id), options, kept, restarted_at_ns);
}

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

// `barge hosts JOBFILE | --hosts a,b [--json]`.
int Hosts(const std::string& file, const std::string& hosts, bool json) {
  std::optional<JobSpec> spec = HostsSpec(file, hosts);
  if (!spec) return kExitBargeFailure;
  ControllerOptions options;
  options.state_dir = StateDir();
  return ShowJobHosts(*spec, MakePlanInput(*spec, "hosts"), options, json);
}

// `barge reap FILE | --hosts a,b`: removes barge containers of no running job.
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
    if (!job.ok()) return false;  // not a job of this store: an orphan here
    return !IsFinal(job->status) && ControllerAlive(job->controller_pid);
  };
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

// A running job and its recorded spec, for the verbs that look into one
// (exec -i/-it, forward, top); nullopt after saying why not.
struct LiveJob {
  std::string id;
  JobSpec spec;
};
std::optional<LiveJob> FindLiveJob(const std::string& job_text, const char* verb) {
  Result<FoundJob> found = FindJob(StateDir(), job_text);
  if (!found.ok()) {
    std::fprintf(stderr, "barge: %s\n", found.status().message().c_str());
    return std::nullopt;
  }
  const JobRecord& job = found->job;
  if (IsFinal(job.status) && job.status != JobStatus::kLost) {
    std::fprintf(stderr, "barge: %s: job %s (%s) has ended (%s)\n", verb, job.id.c_str(),
                 job.name.c_str(), ToString(job.status));
    return std::nullopt;
  }
  std::optional<JobSpec> spec = RecordedSpec(job);
  if (!spec) return std::nullopt;
  return LiveJob{job.id, std::move(*spec)};
}

// `barge exec -i|-it JOB [--node RANK] -- CMD...`.
int ExecInteractive(const std::string& job_text, int rank, const std::vector<std::string>& argv,
                    bool tty) {
  std::optional<LiveJob> live = FindLiveJob(job_text, "exec");
  if (!live) return kExitBargeFailure;
  ControllerOptions options;
  options.state_dir = StateDir();
  return ExecInteractiveInJobNode(live->spec, MakePlanInput(live->spec, live->id), options, rank,
                                  argv, tty);
}

// `barge forward JOB [LOCAL:]REMOTE... [--node RANK]`: until Ctrl-C.
int Forward(const std::string& job_text, const std::vector<std::string>& ports, int rank) {
  std::vector<ForwardSpec> forwards;
  for (const std::string& p : ports) {
    Result<window::ForwardPorts> parsed = window::ParseForwardPorts(p);
    if (!parsed.ok()) {
      std::fprintf(stderr, "barge: forward: %s\n", parsed.status().message().c_str());
      return kExitBargeFailure;
    }
    forwards.push_back({parsed->local_port, parsed->remote_port, rank});
  }
  std::optional<LiveJob> live = FindLiveJob(job_text, "forward");
  if (!live) return kExitBargeFailure;
  ControllerOptions options;
  options.state_dir = StateDir();
  return ForwardJobPorts(live->spec, MakePlanInput(live->spec, live->id), options, forwards);
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
  return TopJob(live->spec, MakePlanInput(live->spec, live->id), options, top);
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
  app.require_subcommand(0, 1);
  app.fallthrough();  // --color after the subcommand too
  app.set_version_flag("--version", std::string("barge ") + BARGE_VERSION + " (commit " + BARGE_COMMIT + ")",
                       "print barge's version and commit");
  std::string color = "auto";
  std::vector<std::string> color_modes;
  for (const auto& [mode, name] : barge::runner::kColorModeNames) color_modes.emplace_back(name);
  app.add_option("--color", color, "when to colour the output: auto (a terminal, unless NO_COLOR is set), always, never")
      ->check(CLI::IsMember(color_modes));
  std::string file;
  // --set/--env/--hosts-file/--name, in the order given (the last one wins).
  std::vector<barge::runner::Override> overrides;
  std::vector<std::string> override_errors;
  auto add_overrides = [&](CLI::App* sub) {
    sub->add_option_function<std::string>(
           "--set",
           [&](const std::string& arg) {
             auto o = barge::runner::ParseSetOverride(arg);
             if (o.ok()) overrides.push_back(*o); else override_errors.push_back(o.status().message());
           },
           "set a job-file key: KEY.PATH=VALUE, a dotted path (list items by index: hosts.0.port) and a YAML flow value (roles.worker.count=3, container.cap_add=[SYS_ADMIN])")
        ->type_name("KEY=VALUE")
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
        ->trigger_on_parse();
    sub->add_option_function<std::string>(
           "--env",
           [&](const std::string& arg) {
             auto o = barge::runner::ParseEnvOverride(arg);
             if (o.ok()) overrides.push_back(*o); else override_errors.push_back(o.status().message());
           },
           "set an environment variable of every container: NAME=VALUE (not a name declared in secrets:)")
        ->type_name("NAME=VALUE")
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
        ->trigger_on_parse();
    sub->add_option_function<std::string>(
           "--hosts-file",
           [&](const std::string& path) {
             std::error_code ec;
             overrides.push_back({barge::runner::Override::Kind::kHostsFile, "",
                                  std::filesystem::absolute(path, ec).lexically_normal().string()});
           },
           "read the hosts from this file instead of the job file's hosts or hosts_file")
        ->type_name("FILE")
        ->trigger_on_parse();
    sub->add_option_function<std::string>(
           "--name", [&](const std::string& name) { overrides.push_back({barge::runner::Override::Kind::kName, "", name}); },
           "the job's name instead of the job file's")
        ->type_name("NAME")
        ->trigger_on_parse();
  };
  auto* plan = app.add_subcommand("plan", "Print, per host, the exact commands `run` would send; connects to nothing");
  plan->add_option("job_file", file, "job file (YAML)")->required();
  add_overrides(plan);
  std::string array_file;  // --array (runner/fleet/)
  plan->add_option("--array", array_file, "a job array: the plan of each member, one per row of this CSV or JSON-lines file")
      ->type_name("FILE");
  auto* run = app.add_subcommand("run", "Run the job: start every container, stream logs, tear down, exit with the head's code");
  run->add_option("job_file", file, "job file (YAML)")->required();
  add_overrides(run);
  bool detach = false;
  run->add_flag("-d,--detach", detach, "run the controller in the background; print the job id once it runs");
  run->add_option("--array", array_file, "run a job array: one member job per row of this CSV or JSON-lines file, each on its own hosts from the inventory")
      ->type_name("FILE");
  bool wait = false;
  run->add_flag("--wait", wait, "wait for hosts held by other jobs (up to the job's wait:, else 30m) instead of failing");
  barge::runner::EventsOption events;
  run->add_option("--events", events.format,
                  "json: one JSON object per job event (per-host phases, ready, exits, faults, finished), "
                  "on stdout (container output then only in the log files) or into --events-file")
      ->check(CLI::IsMember({"json"}));
  run->add_option("--events-file", events.file, "write the --events lines to this file (appended; /dev/fd/N for a descriptor)");
  std::string job;
  auto* rerun = app.add_subcommand("rerun", "Run a recorded job again: its job file's text, overrides and hosts as recorded; secrets, workdir and files read again from where they are now");
  rerun->add_option("job", job, "job id, unique id prefix, or name (the latest job of that name)")->required();
  rerun->add_flag("-d,--detach", detach, "run the controller in the background; print the job id once it runs");
  bool rerun_failed = false;
  rerun->add_flag("--failed", rerun_failed, "a job array: run again its members that failed or never started (without it: every member, as a new array)");
  auto* version = app.add_subcommand("version", "Print barge's version and commit");
  auto* schema = app.add_subcommand("schema", "Print the job file's JSON Schema (draft 2020-12), for editors and validators");
  std::string shell;
  auto* completion = app.add_subcommand("completion", "Print a shell completion script: barge completion bash|zsh|fish");
  completion->add_option("shell", shell, "bash, zsh or fish")->required()->check(CLI::IsMember({"bash", "zsh", "fish"}));
  auto* manpage = app.add_subcommand("manpage", "Print barge(1) in roff: barge manpage | man -l -");
  // Hidden (no group): what the completion scripts call.
  auto* complete_jobs = app.add_subcommand("__complete-jobs", "job ids and names, for completion")->group("");

  barge::runner::ListOptions list;
  std::string status_filter, name_filter;
  auto* ls = app.add_subcommand("ls", "The summary table of jobs, newest first");
  ls->add_option("--status", status_filter, "only jobs with this status");
  ls->add_option("--name", name_filter, "only jobs with this name");
  ls->add_option("--limit", list.limit, "at most this many jobs")->check(CLI::NonNegativeNumber);
  ls->add_flag("--json", list.json, "one JSON array");
  std::string ls_array;
  ls->add_option("array", ls_array, "a job array: list its members");
  bool show_json = false;
  auto* show = app.add_subcommand("show", "One job: how it was run, its nodes and its events");
  show->add_option("job", job, "job id, unique id prefix, or name (the latest job of that name)")->required();
  show->add_flag("--json", show_json, "one JSON object: the job, its run request, nodes and events");
  bool show_timeline = false;
  show->add_flag("--timeline", show_timeline, "the timeline: one text bar per node, a letter per phase");
  std::string ui_listen = "127.0.0.1:8765", ui_token;
  auto* ui = app.add_subcommand("ui", "Serve the local web dashboard (jobs, timelines, live logs, stop)");
  ui->add_option("--listen", ui_listen, "HOST:PORT to listen on (default 127.0.0.1:8765; port 0 = any)");
  ui->add_option("--token", ui_token, "the access token (default: a new random one, printed in the URL)");
  auto* rm = app.add_subcommand("rm", "Remove a finished job's record, logs and artifacts (a job array: every member's)");
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
  std::optional<int> logs_index;
  logs->add_option("--index", logs_index, "a job array: the member of this index (its last attempt)");
  std::string reap_file, reap_hosts;
  auto* reap = app.add_subcommand("reap", "Remove every barge container on the hosts that belongs to no running job");
  reap->add_option("job_file", reap_file, "a job file whose hosts to look at");
  reap->add_option("--hosts", reap_hosts, "comma-separated hosts (ssh defaults from ~/.ssh/config)");
  int exec_rank = 0;
  std::vector<std::string> exec_argv;
  bool exec_stdin = false, exec_tty = false;
  auto* exec = app.add_subcommand("exec", "Run a command inside a node's container: barge exec [-i|-it] JOB --node RANK -- CMD...");
  exec->add_option("job", job, "job id, unique id prefix, or name")->required();
  exec->add_option("--node", exec_rank, "the node's rank (default 0, the head)");
  exec->add_flag("-i,--interactive", exec_stdin, "pass barge's stdin to the command");
  exec->add_flag("-t,--tty", exec_tty, "give the command a terminal (with -i: an interactive shell)");
  exec->add_option("command", exec_argv, "the command and its arguments")->required();
  int forward_rank = 0;
  std::vector<std::string> forward_ports;
  auto* forward = app.add_subcommand("forward", "Reach a running job's node port at 127.0.0.1 until Ctrl-C: barge forward JOB [LOCAL:]REMOTE --node RANK");
  forward->add_option("job", job, "job id, unique id prefix, or name")->required();
  forward->add_option("ports", forward_ports, "[LOCAL:]REMOTE, e.g. 8265 or 16006:6006")->required();
  forward->add_option("--node", forward_rank, "the node's rank (default 0, the head)");
  barge::runner::TopOptions top_options;
  auto* top = app.add_subcommand("top", "Every node's CPU, memory, network and GPUs, refreshed every 2 s (Ctrl-C stops)");
  top->add_option("job", job, "job id, unique id prefix, or name")->required();
  top->add_flag("--once", top_options.once, "print one sample and exit");
  top->add_flag("--json", top_options.json, "with --once: the sample as JSON");
  std::string hosts_file_arg, hosts_list;
  bool hosts_json = false;
  auto* hosts = app.add_subcommand("hosts", "Each host's reservations and running barge containers, asked from the hosts");
  hosts->add_option("job_file", hosts_file_arg, "a job file whose hosts to look at");
  hosts->add_option("--hosts", hosts_list, "comma-separated hosts (ssh defaults from ~/.ssh/config)");
  hosts->add_flag("--json", hosts_json, "one JSON array, a host per entry");
  std::string older_than;
  auto* prune = app.add_subcommand("prune", "Remove finished jobs and job arrays older than a duration, with their files");
  prune->add_option("--older-than", older_than, "e.g. 30d, 12h")->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : barge::runner::kExitBargeFailure;
  }
  barge::runner::SetColorMode(
      barge::ValueOf(barge::runner::kColorModeNames, color).value_or(barge::runner::ColorMode::kAuto));
  logger->sinks().clear();
  logger->sinks().push_back(std::make_shared<spdlog::sinks::stderr_color_sink_mt>(
      barge::runner::UseColor(STDERR_FILENO) ? spdlog::color_mode::always : spdlog::color_mode::never));
  if (app.get_subcommands().empty()) {  // `barge` alone: the help
    std::fputs(app.help().c_str(), stdout);
    return 0;
  }
  if (!override_errors.empty()) {
    for (const auto& e : override_errors) std::fprintf(stderr, "%s\n", e.c_str());
    return barge::runner::kExitBargeFailure;
  }
  if (*version) {
    std::printf("barge %s (commit %s)\n", BARGE_VERSION, BARGE_COMMIT);
    return 0;
  }
  if (*schema) {
    std::fputs(barge::runner::JobSchemaJson().c_str(), stdout);
    return 0;
  }
  if (*completion) {
    auto script = barge::runner::CompletionScript(app, shell);
    if (!script.ok()) {
      std::fprintf(stderr, "barge: %s\n", script.status().message().c_str());
      return barge::runner::kExitBargeFailure;
    }
    std::fputs(script->c_str(), stdout);
    return 0;
  }
  if (*manpage) {
    // SOURCE_DATE_EPOCH, when set, dates the page (reproducible builds).
    std::time_t t = std::time(nullptr);
    if (const char* epoch = std::getenv("SOURCE_DATE_EPOCH")) t = std::strtoll(epoch, nullptr, 10);
    char date[16];
    std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&t));
    std::fputs(barge::runner::ManPage(app, BARGE_VERSION, date).c_str(), stdout);
    return 0;
  }
  if (*plan) return barge::runner::Plan(file, overrides, array_file);
  if (*complete_jobs) return barge::runner::CompleteJobs();
  const std::string state_dir = barge::runner::StateDir();
  // Job arrays (runner/fleet/): an array of that name or id is looked for
  // before a job.
  std::optional<std::string> array_id;
  if ((*rerun || *show || *logs || *down || *rm || (*ls && !ls_array.empty())) && !(*ls && ls_array.empty())) {
    auto found = barge::runner::fleet::FindArray(state_dir, *ls ? ls_array : job);
    if (!found.ok()) {
      std::fprintf(stderr, "barge: %s\n", found.status().message().c_str());
      return barge::runner::kExitBargeFailure;
    }
    array_id = *found;
  }
  if (*rerun && array_id) {
    return barge::runner::fleet::RerunArray(state_dir, *array_id, rerun_failed, detach, [](const std::string& json) {
      return barge::runner::RecordedArrayJob(json);
    });
  }
  if (*rerun && rerun_failed) {
    std::fprintf(stderr, "barge: --failed is for a job array; '%s' is not one\n", job.c_str());
    return barge::runner::kExitBargeFailure;
  }
  if (*rerun) return barge::runner::Rerun(job, detach);
  if (*ls && !ls_array.empty()) {
    if (!array_id) {
      std::fprintf(stderr, "barge: no job array matches '%s'\n", ls_array.c_str());
      return barge::runner::kExitBargeFailure;
    }
    return barge::runner::fleet::ListArrayMembers(state_dir, *array_id, stdout);
  }
  if (*ls) {
    if (!status_filter.empty()) list.status = status_filter;
    if (!name_filter.empty()) list.name = name_filter;
    if (barge::Status s = barge::runner::fleet::AddArraysToList(state_dir, &list); !s.ok()) {
      std::fprintf(stderr, "barge: %s\n", s.message().c_str());
      return barge::runner::kExitBargeFailure;
    }
    return barge::runner::ListJobsCommand(state_dir, list, stdout);
  }
  if (*show && array_id) return barge::runner::fleet::ShowArray(state_dir, *array_id, stdout, show_json);
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
  if (*rm && array_id) return barge::runner::fleet::RemoveArrayCommand(state_dir, *array_id, stdout);
  if (*rm) return barge::runner::RemoveJobCommand(state_dir, job, stdout);
  if (*down && array_id) {
    return barge::runner::fleet::DownArray(
        state_dir, *array_id,
        [](const std::string& id, std::chrono::steady_clock::time_point deadline) {
          return barge::runner::Down(id, deadline);
        });
  }
  if (*down) return barge::runner::Down(job);
  if (*attach) return barge::runner::Attach(job);
  if (*logs && (array_id || logs_index)) {
    if (!array_id || !logs_index) {
      std::fprintf(stderr, "barge: %s\n", array_id ? "a job array's logs need --index N (barge ls ARRAY lists its members)"
                                                     : "--index is for a job array");
      return barge::runner::kExitBargeFailure;
    }
    auto member = barge::runner::fleet::MemberJobId(state_dir, *array_id, *logs_index);
    if (!member.ok()) {
      std::fprintf(stderr, "barge: %s\n", member.status().message().c_str());
      return barge::runner::kExitBargeFailure;
    }
    return barge::runner::LogsCommand(state_dir, *member, logs_options, stdout);
  }
  if (*logs) return barge::runner::LogsCommand(state_dir, job, logs_options, stdout);
  if (*reap) {
    if (reap_file.empty() == reap_hosts.empty()) {
      std::fprintf(stderr, "barge: reap needs a job file or --hosts (one of them)\n");
      return barge::runner::kExitBargeFailure;
    }
    return barge::runner::Reap(reap_file, reap_hosts);
  }
  if (*exec && exec_tty && !exec_stdin) {
    std::fprintf(stderr, "barge: exec: -t needs -i (barge exec -it JOB -- bash)\n");
    return barge::runner::kExitBargeFailure;
  }
  if (*exec && exec_stdin) return barge::runner::ExecInteractive(job, exec_rank, exec_argv, exec_tty);
  if (*exec) return barge::runner::Exec(job, exec_rank, exec_argv);
  if (*forward) return barge::runner::Forward(job, forward_ports, forward_rank);
  if (*top) return barge::runner::Top(job, top_options);
  if (*hosts) {
    if (hosts_file_arg.empty() == hosts_list.empty()) {
      std::fprintf(stderr, "barge: hosts needs a job file or --hosts (one of them)\n");
      return barge::runner::kExitBargeFailure;
    }
    return barge::runner::Hosts(hosts_file_arg, hosts_list, hosts_json);
  }
  if (*prune) {
    auto age = barge::runner::ParseDuration(older_than);
    if (!age.ok()) {
      std::fprintf(stderr, "barge: --older-than: %s\n", age.status().message().c_str());
      return barge::runner::kExitBargeFailure;
    }
    // Job arrays first (runner/fleet/): the members of arrays that stay are
    // not pruned one by one.
    std::set<std::string> array_members;
    const int arrays_code = barge::runner::fleet::PruneArrays(state_dir, *age, stdout, stderr, &array_members);
    const int jobs_code = barge::runner::PruneCommand(state_dir, *age, stdout, stderr, array_members);
    return arrays_code != 0 ? arrays_code : jobs_code;
  }
  std::optional<barge::runner::RunRequest> request = barge::runner::ReadRequest(file, overrides);
  if (!request) return barge::runner::kExitBargeFailure;
  return barge::runner::Run(std::move(*request), file, detach, events, array_file, wait);
}
