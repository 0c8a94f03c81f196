// barge: the command line. The CLI11 tree of verbs and their options;
// each verb is a function of runner/cli/ (verbs.h and the *_cli.h files).
#include <csignal>
#include <spdlog/cfg/env.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <signal.h>
#include <unistd.h>
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <ctime>
#include <set>
#include "barge_version.h"
#include "runner/cli/cli_docs.h"
#include "runner/console/color.h"
#include "runner/console/fd_limit.h"
#include "runner/jobfile/job_schema.h"
#include "runner/jobfile/overrides.h"
#include "runner/cli/jobs_cli.h"
#include "runner/cli/logs_cli.h"
#include "container/timestamp.h"
#include "runner/jobfile/units.h"
#include "runner/store/state_dir.h"
#include "runner/ui/ui_cli.h"
#include "runner/cli/array_cli.h"
#include "runner/jobfile/forward_spec.h"
#include "runner/cli/verbs.h"


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
  std::string array_file;  // --array (runner/array/)
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
  std::string ui_listen = "127.0.0.1:8765", ui_token, ui_token_file, ui_job_file, ui_hosts;
  auto* ui = app.add_subcommand("ui", "Serve the local web dashboard (jobs, arrays, hosts, timelines, live logs, stop)");
  ui->add_option("--listen", ui_listen, "HOST:PORT to listen on (default 127.0.0.1:8765; port 0 = any)");
  ui->add_option("--token-file", ui_token_file, "a file (mode 600) whose first line is the access token, at least 32 characters (else $BARGE_UI_TOKEN, else a new random one, printed in the URL)");
  ui->add_option("--job-file", ui_job_file, "the hosts page also asks this job file's hosts what they hold, as `barge hosts FILE`");
  ui->add_option("--hosts", ui_hosts, "the hosts page also asks these comma-separated hosts what they hold, as `barge hosts --hosts`");
  ui->add_option("--token", ui_token, "refused: a token on the command line is readable by every user; use --token-file")->group("");
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
  auto* reap = app.add_subcommand("reap", "Remove every barge container on the hosts that no live job owns (no live lease there, whoever's job)");
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
  std::string forward_socket;
  forward->add_option("--socket", forward_socket,
                      "serve on a unix socket at this path (mode 0600) instead of 127.0.0.1 (one REMOTE port)");
  barge::runner::TopOptions top_options;
  auto* top = app.add_subcommand("top", "Every node's CPU, memory, network and GPUs, refreshed every 2 s (Ctrl-C stops)");
  top->add_option("job", job, "job id, unique id prefix, or name")->required();
  top->add_flag("--once", top_options.once, "print one sample and exit");
  top->add_flag("--json", top_options.json, "with --once: the sample as JSON");
  std::string hosts_file_arg, hosts_list;
  bool hosts_json = false, hosts_gpus = false;
  auto* hosts = app.add_subcommand("hosts", "Each host's reservations and running barge containers, asked from the hosts");
  hosts->add_option("job_file", hosts_file_arg, "a job file whose hosts to look at");
  hosts->add_option("--hosts", hosts_list, "comma-separated hosts (ssh defaults from ~/.ssh/config)");
  hosts->add_flag("--json", hosts_json, "one JSON array, a host per entry");
  hosts->add_flag("--gpus", hosts_gpus,
                  "each host's GPUs as its driver sees them, their health (the preflight gate's rules) and topology");
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
  // Job arrays (runner/array/): an array of that name or id is looked for
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
    barge::Result<std::string> token = barge::runner::ui::ResolveToken(ui_token, ui_token_file);
    if (!token.ok()) {
      std::fprintf(stderr, "barge: %s\n", token.status().message().c_str());
      return barge::runner::kExitBargeFailure;
    }
    ui_options.token = *token;
    if (auto s = barge::runner::ui::ParseListen(ui_listen, &ui_options); !s.ok()) {
      std::fprintf(stderr, "barge: %s\n", s.message().c_str());
      return barge::runner::kExitBargeFailure;
    }
    if (auto s = barge::runner::ui::SetLiveHosts(ui_job_file, ui_hosts, &ui_options); !s.ok()) {
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
  if (*forward) return barge::runner::Forward(job, forward_ports, forward_rank, forward_socket);
  if (*top) return barge::runner::Top(job, top_options);
  if (*hosts) {
    if (hosts_file_arg.empty() == hosts_list.empty()) {
      std::fprintf(stderr, "barge: hosts needs a job file or --hosts (one of them)\n");
      return barge::runner::kExitBargeFailure;
    }
    return barge::runner::Hosts(hosts_file_arg, hosts_list, hosts_json, hosts_gpus);
  }
  if (*prune) {
    auto age = barge::runner::ParseDuration(older_than);
    if (!age.ok()) {
      std::fprintf(stderr, "barge: --older-than: %s\n", age.status().message().c_str());
      return barge::runner::kExitBargeFailure;
    }
    // Job arrays first (runner/array/): the members of arrays that stay are
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
