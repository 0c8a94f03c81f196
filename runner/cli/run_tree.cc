// plan, run, rerun on the command tree (verb_tree.h); the verbs are
// run_verbs.cc's.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "runner/cli/array_cli.h"
#include "runner/cli/verb_tree.h"
#include "runner/console/exit_codes.h"
#include "runner/console/failure.h"
#include "runner/cli/verbs.h"
#include "runner/jobfile/overrides.h"
#include "runner/store/state_dir.h"

namespace barge::runner {
namespace {

// The values of plan's, run's and rerun's options.
struct RunVerbs {
  CLI::App* plan = nullptr;
  CLI::App* run = nullptr;
  CLI::App* rerun = nullptr;
  std::string file;
  // --set/--env/--hosts-file/--name, in the order given (the last one wins).
  std::vector<Override> overrides;
  std::vector<std::string> override_errors;
  std::string array_file;  // --array (runner/array/)
  bool detach = false;
  bool wait = false;
  EventsOption events;
  std::string job;
  bool rerun_failed = false;

  std::optional<int> Run();
  int Rerun();
};

// --set, --env, --hosts-file and --name on `sub`, each into `v`'s overrides
// as it is parsed (a malformed one into its errors).
void AddOverrideOptions(CLI::App* sub, const std::shared_ptr<RunVerbs>& v) {
  sub->add_option_function<std::string>(
         "--set",
         [v](const std::string& arg) {
           auto o = ParseSetOverride(arg);
           if (o.ok()) v->overrides.push_back(*o); else v->override_errors.push_back(o.status().message());
         },
         "set a job-file key: KEY.PATH=VALUE, a dotted path (list items by index: hosts.0.port) and a YAML flow value (roles.worker.count=3, container.cap_add=[SYS_ADMIN])")
      ->type_name("KEY=VALUE")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
      ->trigger_on_parse();
  sub->add_option_function<std::string>(
         "--env",
         [v](const std::string& arg) {
           auto o = ParseEnvOverride(arg);
           if (o.ok()) v->overrides.push_back(*o); else v->override_errors.push_back(o.status().message());
         },
         "set an environment variable of every container: NAME=VALUE (not a name declared in secrets:)")
      ->type_name("NAME=VALUE")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
      ->trigger_on_parse();
  sub->add_option_function<std::string>(
         "--hosts-file",
         [v](const std::string& path) {
           std::error_code ec;
           v->overrides.push_back({Override::Kind::kHostsFile, "",
                                   std::filesystem::absolute(path, ec).lexically_normal().string()});
         },
         "read the hosts from this file instead of the job file's hosts or hosts_file")
      ->type_name("FILE")
      ->trigger_on_parse();
  sub->add_option_function<std::string>(
         "--name", [v](const std::string& name) { v->overrides.push_back({Override::Kind::kName, "", name}); },
         "the job's name instead of the job file's")
      ->type_name("NAME")
      ->trigger_on_parse();
}

std::optional<int> RunVerbs::Run() {
  if (!*plan && !*run && !*rerun) return std::nullopt;
  if (!override_errors.empty()) {
    for (const auto& e : override_errors) std::fprintf(stderr, "%s\n", e.c_str());
    return kExitBargeFailure;
  }
  if (*plan) return runner::Plan(file, overrides, array_file);
  if (*rerun) return Rerun();
  std::optional<RunRequest> request = ReadRequest(file, overrides);
  if (!request) return kExitBargeFailure;
  return runner::Run(std::move(*request), file, detach, events, array_file, wait);
}

// `barge rerun JOB|ARRAY [--failed]`: an array of that name or id is looked
// for before a job.
int RunVerbs::Rerun() {
  const std::string state_dir = StateDir();
  std::optional<std::string> array_id;
  if (!FindArrayOrSay(state_dir, job, &array_id)) return kExitBargeFailure;
  if (array_id) {
    return RerunArray(state_dir, *array_id, rerun_failed, detach,
                             [](const std::string& json) { return LoadRecordedArrayJob(json); });
  }
  if (rerun_failed) {
    std::fprintf(stderr, "barge: --failed is for a job array; '%s' is not one\n", job.c_str());
    return kExitBargeFailure;
  }
  return runner::Rerun(job, detach);
}

}  // namespace

VerbRunner AddRunVerbs(CLI::App& app) {
  auto v = std::make_shared<RunVerbs>();
  v->plan = app.add_subcommand("plan", "Print, per host, the exact commands `run` would send; connects to nothing");
  v->plan->add_option("job_file", v->file, "job file (YAML)")->required();
  AddOverrideOptions(v->plan, v);
  v->plan->add_option("--array", v->array_file, "a job array: the plan of each member, one per row of this CSV or JSON-lines file")
      ->type_name("FILE");
  v->run = app.add_subcommand("run", "Run the job: start every container, stream logs, tear down, exit with the head's code");
  v->run->add_option("job_file", v->file, "job file (YAML)")->required();
  AddOverrideOptions(v->run, v);
  v->run->add_flag("-d,--detach", v->detach, "run the controller in the background; print the job id once it runs");
  v->run->add_option("--array", v->array_file, "run a job array: one member job per row of this CSV or JSON-lines file, each on its own hosts from the inventory")
      ->type_name("FILE");
  v->run->add_flag("--wait", v->wait, "wait for hosts held by other jobs (up to the job's wait:, else 30m) instead of failing");
  v->run->add_option("--events", v->events.format,
                     "json: one JSON object per job event (per-host phases, ready, exits, faults, finished), "
                     "on stdout (container output then only in the log files) or into --events-file")
      ->check(CLI::IsMember({"json"}));
  v->run->add_option("--events-file", v->events.file, "write the --events lines to this file (appended; /dev/fd/N for a descriptor)");
  v->rerun = app.add_subcommand("rerun", "Run a recorded job again: its job file's text, overrides and hosts as recorded; secrets, workdir and files read again from where they are now");
  v->rerun->add_option("job", v->job, "job id, unique id prefix, or name (the latest job of that name)")->required();
  v->rerun->add_flag("-d,--detach", v->detach, "run the controller in the background; print the job id once it runs");
  v->rerun->add_flag("--failed", v->rerun_failed, "a job array: run again its members that failed or never started (without it: every member, as a new array)");
  return [v] { return v->Run(); };
}

}  // namespace barge::runner
