// The job history on the command tree (verb_tree.h): ls, show, rm, prune, usage;
// each of a job or, where one is named, of a job array (usage: of every
// job). The verbs are jobs_cli.h's, usage_cli.h's and array_cli.h's.
#include <cstdio>
#include <memory>
#include <set>
#include <string>

#include "runner/cli/array_cli.h"
#include "runner/cli/jobs_cli.h"
#include "runner/cli/usage_cli.h"
#include "runner/cli/verb_tree.h"
#include "runner/console/exit_codes.h"
#include "runner/console/failure.h"
#include "runner/jobfile/units.h"
#include "runner/store/state_dir.h"
#include "runner/ui/ui_cli.h"

namespace barge::runner {
namespace {

struct ListVerbs {
  CLI::App* ls = nullptr;
  CLI::App* show = nullptr;
  ListOptions list;
  std::string status_filter, name_filter;
  std::string ls_array;
  std::string job;
  bool show_json = false;
  bool show_timeline = false;
  bool show_diagnostics = false;

  std::optional<int> Run();
  int Ls();
  int Show() const;
};

std::optional<int> ListVerbs::Run() {
  if (*ls) return Ls();
  if (*show) return Show();
  return std::nullopt;
}

// `barge ls [--status S] [--name N] [--limit N] [--json]`, or `barge ls
// ARRAY`: the array's members.
int ListVerbs::Ls() {
  const std::string state_dir = StateDir();
  if (!ls_array.empty()) {
    std::optional<std::string> array_id;
    if (!FindArrayOrSay(state_dir, ls_array, &array_id)) return kExitBargeFailure;
    if (!array_id) {
      std::fprintf(stderr, "barge: no job array matches '%s'\n", ls_array.c_str());
      return kExitBargeFailure;
    }
    return ListArrayMembers(state_dir, *array_id, stdout);
  }
  if (!status_filter.empty()) list.status = status_filter;
  if (!name_filter.empty()) list.name = name_filter;
  if (Status s = AddArraysToList(state_dir, &list); !s.ok()) {
    std::fprintf(stderr, "barge: %s\n", s.message().c_str());
    return kExitBargeFailure;
  }
  return ListJobsCommand(state_dir, list, stdout);
}

// `barge show JOB|ARRAY [--json] [--timeline]`.
int ListVerbs::Show() const {
  const std::string state_dir = StateDir();
  std::optional<std::string> array_id;
  if (!FindArrayOrSay(state_dir, job, &array_id)) return kExitBargeFailure;
  if (array_id) return ShowArray(state_dir, *array_id, stdout, show_json);
  if (show_timeline) return ui::TimelineCommand(state_dir, job, stdout);
  if (show_diagnostics) return ShowDiagnosticsCommand(state_dir, job, show_json, stdout);
  return ShowJobCommand(state_dir, job, show_json, stdout);
}

// `barge rm JOB|ARRAY`.
int RemoveJobOrArray(const std::string& job) {
  const std::string state_dir = StateDir();
  std::optional<std::string> array_id;
  if (!FindArrayOrSay(state_dir, job, &array_id)) return kExitBargeFailure;
  if (array_id) return RemoveArrayCommand(state_dir, *array_id, stdout);
  return RemoveJobCommand(state_dir, job, stdout);
}

// `barge prune --older-than D`: job arrays first (runner/array/), so that
// the members of arrays that stay are not pruned one by one.
int PruneJobsAndArrays(const std::string& older_than) {
  const std::string state_dir = StateDir();
  auto age = ParseDuration(older_than);
  if (!age.ok()) {
    std::fprintf(stderr, "barge: --older-than: %s\n", age.status().message().c_str());
    return kExitBargeFailure;
  }
  std::set<std::string> array_members;
  const int arrays_code = PruneArrays(state_dir, *age, stdout, stderr, &array_members);
  const int jobs_code = PruneCommand(state_dir, *age, stdout, stderr, array_members);
  return arrays_code != 0 ? arrays_code : jobs_code;
}

}  // namespace

VerbRunner AddListVerbs(CLI::App& app) {
  auto v = std::make_shared<ListVerbs>();
  v->ls = app.add_subcommand("ls", "The summary table of jobs, newest first");
  v->ls->add_option("--status", v->status_filter, "only jobs with this status");
  v->ls->add_option("--name", v->name_filter, "only jobs with this name");
  v->ls->add_option("--limit", v->list.limit, "at most this many jobs")->check(CLI::NonNegativeNumber);
  v->ls->add_flag("--json", v->list.json, "one JSON array");
  v->ls->add_option("array", v->ls_array, "a job array: list its members");
  v->show = app.add_subcommand("show", "One job: how it was run, its nodes, where its files went in object storage, and its events");
  v->show->add_option("job", v->job, "job id, unique id prefix, or name (the latest job of that name)")->required();
  v->show->add_flag("--json", v->show_json, "one JSON object: the job, its run request, nodes, events and uploads");
  v->show->add_flag("--timeline", v->show_timeline, "the timeline: one text bar per node, a letter per phase");
  v->show->add_flag("--diagnostics", v->show_diagnostics,
                    "the diagnostics bundles of its failed attempts: where, why, their files and sizes (with --json: as JSON)");
  return [v] { return v->Run(); };
}

VerbRunner AddRmVerb(CLI::App& app) {
  auto job = std::make_shared<std::string>();
  CLI::App* rm = app.add_subcommand("rm", "Remove a finished job's record, logs and artifacts (a job array: every member's)");
  rm->add_option("job", *job, "job id, unique id prefix, or name")->required();
  return [rm, job]() -> std::optional<int> {
    if (!*rm) return std::nullopt;
    return RemoveJobOrArray(*job);
  };
}

VerbRunner AddPruneVerb(CLI::App& app) {
  auto older_than = std::make_shared<std::string>();
  CLI::App* prune = app.add_subcommand("prune", "Remove finished jobs and job arrays older than a duration, with their files");
  prune->add_option("--older-than", *older_than, "e.g. 30d, 12h")->required();
  return [prune, older_than]() -> std::optional<int> {
    if (!*prune) return std::nullopt;
    return PruneJobsAndArrays(*older_than);
  };
}

VerbRunner AddUsageVerb(CLI::App& app) {
  auto options = std::make_shared<UsageOptions>();
  auto since = std::make_shared<std::string>();
  CLI::App* usage = app.add_subcommand("usage", "Host-hours and GPU-hours the jobs held, per user, job or host");
  usage->add_option("--since", *since, "only what was held after this time or duration ago (e.g. 7d, 2024-05-01T00:00:00Z)");
  usage->add_option("--by", options->by, "user (the default), job or host")
      ->check(CLI::IsMember({"user", "job", "host"}));
  usage->add_flag("--json", options->json, "one JSON object");
  return [usage, options, since]() -> std::optional<int> {
    if (!*usage) return std::nullopt;
    if (!since->empty()) options->since = *since;
    return UsageCommand(StateDir(), *options, stdout);
  };
}

}  // namespace barge::runner
