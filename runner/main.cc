// barge: the command line. Parses arguments (CLI11), loads and validates the
// job file, and hands over to the plan printer or the Controller.
#include <spdlog/cfg/env.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cluster/plan.h"
#include "runner/controller.h"
#include "runner/job_file.h"
#include "runner/jobs_cli.h"
#include "runner/units.h"
#include "runner/plan_printer.h"
#include "runner/state_dir.h"

namespace barge::runner {
namespace {

// Loads and validates `path`; prints every error and returns nullopt on failure.
std::optional<JobSpec> Load(const std::string& path) {
  LoadedJob loaded = LoadJobFile(path);
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

int Run(const std::string& path) {
  std::optional<JobSpec> spec = Load(path);
  if (!spec) return kExitBargeFailure;
  cluster::PlanInput input = MakePlanInput(*spec, NewJobId());
  ControllerOptions options;
  options.state_dir = StateDir();
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  options.spec_text = text.str();
  return RunJob(*spec, input, options);
}

}  // namespace
}  // namespace barge::runner

int main(int argc, char** argv) {
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
  auto* rm = app.add_subcommand("rm", "Remove a finished job's record, logs and artifacts");
  rm->add_option("job", job, "job id, unique id prefix, or name")->required();
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
  if (*show) return barge::runner::ShowJobCommand(state_dir, job, show_json, stdout);
  if (*rm) return barge::runner::RemoveJobCommand(state_dir, job, stdout);
  if (*prune) {
    auto age = barge::runner::ParseDuration(older_than);
    if (!age.ok()) {
      std::fprintf(stderr, "barge: --older-than: %s\n", age.status().message().c_str());
      return barge::runner::kExitBargeFailure;
    }
    return barge::runner::PruneCommand(state_dir, *age, stdout);
  }
  return barge::runner::Run(file);
}
