// logs on the command tree (verb_tree.h); the verb is logs_cli.h's.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "runner/cli/array_cli.h"
#include "runner/cli/logs_cli.h"
#include "runner/cli/verb_tree.h"
#include "runner/console/exit_codes.h"
#include "runner/console/failure.h"
#include "runner/store/state_dir.h"

namespace barge::runner {
namespace {

struct LogsVerb {
  CLI::App* logs = nullptr;
  std::string job;
  LogsOptions options;
  std::optional<int> index;  // --index: a job array's member

  int Run() const;
};

// `barge logs JOB`, or `barge logs ARRAY --index N`: the member's last
// attempt.
int LogsVerb::Run() const {
  const std::string state_dir = StateDir();
  std::optional<std::string> array_id;
  if (!FindArrayOrSay(state_dir, job, &array_id)) return kExitBargeFailure;
  if (!array_id && !index) return LogsCommand(state_dir, job, options, stdout);
  if (!array_id || !index) {
    std::fprintf(stderr, "barge: %s\n", array_id ? "a job array's logs need --index N (barge ls ARRAY lists its members)"
                                                   : "--index is for a job array");
    return kExitBargeFailure;
  }
  auto member = MemberJobId(state_dir, *array_id, *index);
  if (!member.ok()) {
    std::fprintf(stderr, "barge: %s\n", member.status().message().c_str());
    return kExitBargeFailure;
  }
  return LogsCommand(state_dir, *member, options, stdout);
}

}  // namespace

VerbRunner AddLogsVerb(CLI::App& app) {
  auto v = std::make_shared<LogsVerb>();
  v->logs = app.add_subcommand("logs", "A job's output from its kept log files, all nodes merged by time; -f follows it live");
  v->logs->add_option("job", v->job, "job id, unique id prefix, or name (the latest job of that name)")->required();
  v->logs->add_flag("-f,--follow", v->options.follow, "after what is there, print new lines until the job has ended");
  v->logs->add_option("--node", v->options.node, "only the node of this rank");
  v->logs->add_option("--since", v->options.since, "only lines from this time on: 2024-05-01T12:00:00Z, or a duration ago: 10m");
  v->logs->add_option("--tail", v->options.tail, "only the last N lines (of what is already there, with -f)");
  v->logs->add_flag("-t,--timestamps", v->options.timestamps, "start each line with Docker's timestamp");
  v->logs->add_option("--index", v->index, "a job array: the member of this index (its last attempt)");
  return [v]() -> std::optional<int> {
    if (!*v->logs) return std::nullopt;
    return v->Run();
  };
}

}  // namespace barge::runner
