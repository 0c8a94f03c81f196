// `barge plan`, `barge run`, `barge rerun`: a job file (or a recorded run
// request) loaded with its overrides, checked, planned or run.
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
#include "runner/console/fd_limit.h"
#include "runner/jobfile/overrides.h"
#include "runner/jobfile/redact.h"
#include "runner/jobfile/job_file.h"
#include "runner/store/job_store.h"
#include "runner/jobfile/job_text.h"
#include "runner/cli/jobs_cli.h"
#include "runner/remote/host_address.h"
#include "runner/cli/plan_printer.h"
#include "runner/store/state_dir.h"
#include "runner/cli/array_cli.h"
#include "runner/array/member_record.h"
#include "runner/cli/verbs.h"
#include "runner/console/detach.h"

namespace barge::runner {


namespace {

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

}  // namespace

// Parses `request` (its text as if read from request.file) with its
// overrides, the user's config.yaml and, for a rerun, the recorded hosts
// file; prints every error and returns nullopt on failure. `shown` is the
// job file's name in errors.
std::optional<LoadedJob> Load(const RunRequest& request, const std::string& shown, SecretValues secrets,
                              bool run_hosts_command) {
  JobLayers layers;
  layers.run_hosts_command = run_hosts_command;
  layers.overrides = request.overrides;
  layers.config_file = DefaultConfigFile();
  layers.hosts_file = request.hosts_file;
  layers.group_hosts_files = request.group_hosts_files;
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

namespace {

// The effect of the overrides, above the plan.
std::string OverridesBanner(const RunRequest& request) {
  if (request.overrides.empty()) return "";
  std::string out = "# overrides:";
  for (const Override& o : request.overrides) out += " " + o.Flag() + " " + o.Argument();
  return out + "\n";
}

}  // namespace


namespace {

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

}  // namespace

int Plan(const std::string& path, std::vector<Override> overrides, const std::string& array_file) {
  std::optional<RunRequest> request = ReadRequest(path, std::move(overrides));
  if (!request) return kExitBargeFailure;
  std::optional<LoadedJob> loaded = Load(*request, path);
  if (!loaded) return kExitBargeFailure;
  // A job array (runner/array/): each member's plan.
  Result<std::optional<array::ArrayParams>> array = ArrayParamsOf(*loaded->spec, array_file);
  if (!array.ok()) {
    std::fprintf(stderr, "barge: %s\n", array.status().message().c_str());
    return kExitBargeFailure;
  }
  std::fputs(OverridesBanner(*request).c_str(), stdout);
  if (*array) {
    return PlanArray(*loaded->spec, **array, [&](const JobSpec& member) { return PlanOne(path, member); });
  }
  return PlanOne(path, *loaded->spec);
}


namespace {

// Where `--events` / `--events-file` send the events: nullptr when neither
// was given, stdout for `--events json` alone, else the file opened for
// appending (the caller closes it). nullopt after printing why not (an
// unknown format, a file that cannot be opened).
std::optional<std::FILE*> OpenEvents(const EventsOption& events) {
  if (events.format.empty() && events.file.empty()) return nullptr;
  if (!events.format.empty() && events.format != "json") {
    std::fprintf(stderr, "barge: --events: unknown format '%s' (expected json)\n", events.format.c_str());
    return std::nullopt;
  }
  if (events.file.empty()) return stdout;
  std::FILE* out = std::fopen(events.file.c_str(), "a");
  if (!out) {
    std::fprintf(stderr, "barge: --events-file %s: %s\n", events.file.c_str(), std::strerror(errno));
    return std::nullopt;
  }
  return out;
}

// The job file as the job store records it: its path on a comment line,
// then its text.
std::string RecordedSpecText(const RunRequest& request) {
  return kSpecFileComment + request.file + "\n" + request.text;
}

// A job array (runner/array/): one member job per row, run by the array
// controller; `--events` are the array controller's own events
// (runner/array/array_events.h). Returns the array's exit code.
int RunArray(const JobSpec& spec, const array::ArrayParams& array, const RunRequest& request, bool detach,
             const EventsOption& events) {
  std::optional<std::FILE*> array_events = OpenEvents(events);
  if (!array_events) return kExitBargeFailure;
  const int code = RunArrayCommand(spec, array, Redactor(spec)(RunRequestToJson(request)),
                                          RecordedSpecText(request), detach, *array_events);
  if (*array_events && *array_events != stdout) std::fclose(*array_events);
  return code;
}

// Records in the store at `state_dir` how job `job_id` was run (`request`,
// redacted), before the controller creates the job, so that even a job that
// dies in preflight can be shown and run again. An error names what failed.
[[nodiscard]] Status RecordRunRequest(const std::string& state_dir, const std::string& job_id,
                                      const JobSpec& spec, const RunRequest& request) {
  const Redactor redact(spec);
  Result<std::unique_ptr<JobStore>> store = JobStore::Open(state_dir);
  return store.ok() ? (*store)->SetRunRequest(job_id, redact(RunRequestToJson(request))) : store.status();
}

// After SpawnDetached: waits (up to 30 minutes) until the detached
// controller `pid` of job `job_id` records the job as running or ended.
// Running: prints the job id and returns 0. Ended before running: prints the
// id, says so and returns the job's exit code. The controller dead before
// recording the job, or silent for 30 minutes: says so and returns
// kExitBargeFailure. `run_dir` holds the controller's log, named in errors.
int WaitUntilRunning(const std::string& state_dir, const std::string& job_id, pid_t pid,
                     const std::string& run_dir) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(30);
  while (std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    Result<std::unique_ptr<JobStore>> store = JobStore::Open(state_dir);
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

// Detached: the same controller in a process of its own (its own session,
// so closing the terminal does not stop it), writing to
// runs/<id>/controller.log, with no echo and no events on stdout (they go
// to that log like everything else). Returns once the job runs (or ended):
// WaitUntilRunning's code, or kExitBargeFailure when the run directory
// cannot be made or the process cannot be spawned.
int RunDetached(const JobSpec& spec, const cluster::PlanInput& input, const std::string& job_id,
                ControllerOptions options) {
  const std::string run_dir = RunDir(options.state_dir, job_id);
  if (Status s = MakeDirs(run_dir); !s.ok()) {
    std::fprintf(stderr, "barge: %s\n", s.message().c_str());
    return kExitBargeFailure;
  }
  Result<pid_t> spawned = SpawnDetached(run_dir + "/controller.log", [&] {
    options.echo = false;
    if (options.events == stdout) options.events = nullptr;
    return RunJob(spec, input, options);
  });
  if (!spawned.ok()) {
    std::fprintf(stderr, "barge: %s\n", spawned.status().message().c_str());
    return kExitBargeFailure;
  }
  return WaitUntilRunning(options.state_dir, job_id, *spawned, run_dir);
}

}  // namespace

// Runs `request`: records it in the store (how the job was run: the job
// file's text, the overrides, the hosts file as read), then the job.
// `--events json`: the job's events as JSON lines on stdout (container
// output then goes only to the per-node files, so stdout stays parseable),
// or into `events_file` (a path, /dev/fd/N included) with the output echoed
// as usual.
int Run(RunRequest request, const std::string& shown, bool detach, const EventsOption& events,
        const std::string& array_file, bool wait) {
  std::optional<LoadedJob> loaded = Load(request, shown);
  if (!loaded) return kExitBargeFailure;
  JobSpec* spec = &*loaded->spec;
  request.hosts_file = loaded->hosts_file;
  request.group_hosts_files = loaded->group_hosts_files;
  request.hosts_command = loaded->hosts_command;
  if (Status s = CheckOpenFiles(*spec); !s.ok()) {
    std::fprintf(stderr, "barge: %s\n", s.message().c_str());
    return kExitBargeFailure;
  }
  Result<std::optional<array::ArrayParams>> array = ArrayParamsOf(*spec, array_file);
  if (!array.ok()) {
    std::fprintf(stderr, "barge: %s; nothing was started\n", array.status().message().c_str());
    return kExitBargeFailure;
  }
  if (*array) return RunArray(*spec, **array, request, detach, events);
  const std::string job_id = NewJobId();
  cluster::PlanInput input = MakePlanInput(*spec, job_id);
  ControllerOptions options;
  options.state_dir = StateDir();
  options.spec_text = RecordedSpecText(request);
  options.wait = wait;
  if (Status recorded = RecordRunRequest(options.state_dir, job_id, *spec, request); !recorded.ok()) {
    std::fprintf(stderr, "barge: %s\n", recorded.message().c_str());
    return kExitBargeFailure;
  }
  std::optional<std::FILE*> events_out = OpenEvents(events);
  if (!events_out) return kExitBargeFailure;
  options.events = *events_out;
  // JSON lines on stdout: the containers' output goes only to the files.
  if (options.events == stdout) options.echo = false;
  if (detach) return RunDetached(*spec, input, job_id, std::move(options));
  options.serve_forwards = true;
  const int code = RunJob(*spec, input, options);
  if (options.events && options.events != stdout) std::fclose(options.events);
  return code;
}

namespace {

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

}  // namespace

// `barge rerun JOB`: runs again what job JOB ran, from what was recorded:
// the job file's text, the overrides and the hosts file as read then.
// Secrets are read again, and `workdir:` and `files:` are shipped again
// from where they are now.
std::optional<FoundJob> FindJobOrSay(const std::string& state_dir, const std::string& job_text) {
  Result<FoundJob> found = FindJob(state_dir, job_text);
  if (!found.ok()) {
    std::fprintf(stderr, "barge: %s\n", found.status().message().c_str());
    return std::nullopt;
  }
  return std::move(found).value();
}

int Rerun(const std::string& job_text, bool detach) {
  std::optional<FoundJob> found = FindJobOrSay(StateDir(), job_text);
  if (!found) return kExitBargeFailure;
  std::optional<RunRequest> request = RecordedRequest(*found->store, found->job);
  if (!request) return kExitBargeFailure;
  // A member job's rerun runs the array's job file as recorded; the new job
  // is no member of the array.
  request->member.reset();
  found->store.reset();
  std::fprintf(stderr, "barge: running job %s again: %s\n", found->job.id.c_str(),
               request->CommandLine().c_str());
  const std::string shown = request->file;
  return Run(std::move(*request), shown, detach);
}

// A job array's recorded run request parsed again, for `barge rerun ARRAY
// --failed`; nullopt after printing why not.
std::optional<RecordedArrayJob> LoadRecordedArrayJob(const std::string& json) {
  Result<RunRequest> request = RunRequestFromJson(json);
  if (!request.ok()) {
    std::fprintf(stderr, "barge: %s\n", request.status().message().c_str());
    return std::nullopt;
  }
  std::optional<LoadedJob> loaded = Load(*request, request->file);
  if (!loaded) return std::nullopt;
  return RecordedArrayJob{std::move(*loaded->spec), RecordedSpecText(*request)};
}

// Parses the job as job `job` ran it (its recorded request: the job file,
// the overrides, the hosts files as read then), to act on its hosts; a job
// array's member job as its member (its hosts, its host group's ssh).
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
  if (!request->member) return std::move(loaded->spec);
  // A job array's member: its own hosts, with its host group's ssh
  // settings, as the array controller gave them (runner/array/member_record.h).
  Result<JobSpec> member = array::RecordedMemberSpec(StateDir(), *loaded->spec, *request->member);
  if (!member.ok()) {
    std::fprintf(stderr, "barge: job %s: %s\n", job.id.c_str(), member.status().message().c_str());
    return std::nullopt;
  }
  return std::move(member).value();
}

std::optional<cluster::PlanInput> RecordedPlanInput(const JobSpec& spec, const std::string& job_id) {
  cluster::PlanInput input = MakePlanInput(spec, job_id);
  if (!spec.slurm) return input;
  // The allocation's nodes, as the store recorded them (none while queued:
  // the placeholder hosts stay).
  Result<std::unique_ptr<JobStore>> store = JobStore::Open(StateDir());
  Result<RecordedAllocation> allocation =
      store.ok() ? ReadRecordedAllocation(**store, job_id) : Result<RecordedAllocation>(store.status());
  Status placed = allocation.ok() ? Status::Ok() : allocation.status();
  if (placed.ok() && !allocation->nodes.empty()) placed = PlaceOnSlurmNodes(*spec.slurm, allocation->nodes, &input);
  if (!placed.ok()) {
    std::fprintf(stderr, "barge: job %s: %s\n", job_id.c_str(), placed.message().c_str());
    return std::nullopt;
  }
  return input;
}

}  // namespace barge::runner
