// barge's command tree, one family of verbs at a time. Each Add...Verbs
// function adds its verbs (CLI11 subcommands) and their options to `app`
// and returns the family's VerbRunner; main.cc calls them in the order
// `barge --help` lists the verbs, parses, and asks each runner in turn.
// The verbs themselves are the functions of verbs.h and the *_cli.h files;
// a family's *_tree.cc holds its options, the checks made on them, and the
// call.
//
// A runner owns the values its options are parsed into (the app keeps
// references to them): keep it until the app has parsed and it has run.
// Not thread-safe, as CLI11 is not.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "runner/console/exit_codes.h"

namespace barge::runner {

// After the parse: when one of the family's verbs was chosen, runs it and
// returns barge's exit code (the job's, or kExitBargeFailure, 125, for
// barge's own failures, after saying why on stderr); otherwise nullopt,
// having run and printed nothing.
using VerbRunner = std::function<std::optional<int>()>;

// What `barge version` and `barge manpage` say about this build.
struct BuildInfo {
  std::string version;
  std::string commit;
};

// plan, run, rerun (run_tree.cc).
VerbRunner AddRunVerbs(CLI::App& app);
// version, schema, completion, manpage and the hidden __complete-jobs
// (about_tree.cc). completion and manpage describe `app` as it is when they
// run, so `app` must outlive the runner.
VerbRunner AddAboutVerbs(CLI::App& app, BuildInfo build);
// ls, show (jobs_tree.cc).
VerbRunner AddListVerbs(CLI::App& app);
// ui, the dashboard (ui_tree.cc).
VerbRunner AddUiVerb(CLI::App& app);
// rm (jobs_tree.cc).
VerbRunner AddRmVerb(CLI::App& app);
// down, attach (job_tree.cc).
VerbRunner AddJobVerbs(CLI::App& app);
// logs (logs_tree.cc).
VerbRunner AddLogsVerb(CLI::App& app);
// reap, exec, forward, top, hosts (node_tree.cc).
VerbRunner AddNodeVerbs(CLI::App& app);
// prune (jobs_tree.cc).
VerbRunner AddPruneVerb(CLI::App& app);
// usage (jobs_tree.cc).
VerbRunner AddUsageVerb(CLI::App& app);

// The job array that `text` (an id or a name) names in `state_dir`, into
// `*array_id` (nullopt when none does): the verbs that take a job take an
// array first. False after saying on stderr why the lookup failed.
[[nodiscard]] bool FindArrayOrSay(const std::string& state_dir, const std::string& text,
                                  std::optional<std::string>* array_id);

}  // namespace barge::runner
