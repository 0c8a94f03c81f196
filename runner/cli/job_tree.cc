// down and attach on the command tree (verb_tree.h); the verbs are
// job_verbs.cc's and, for a job array, array_cli.h's.
#include <chrono>
#include <memory>
#include <string>

#include "runner/cli/array_cli.h"
#include "runner/cli/verb_tree.h"
#include "runner/cli/verbs.h"
#include "runner/console/exit_codes.h"
#include "runner/console/failure.h"
#include "runner/store/state_dir.h"

namespace barge::runner {
namespace {

// `barge down JOB|ARRAY`.
int DownJobOrArray(const std::string& job) {
  const std::string state_dir = StateDir();
  std::optional<std::string> array_id;
  if (!FindArrayOrSay(state_dir, job, &array_id)) return kExitBargeFailure;
  if (array_id) {
    return DownArray(state_dir, *array_id,
                            [](const std::string& id, std::chrono::steady_clock::time_point deadline) {
                              return Down(id, deadline);
                            });
  }
  return Down(job);
}

}  // namespace

VerbRunner AddJobVerbs(CLI::App& app) {
  auto job = std::make_shared<std::string>();
  CLI::App* down = app.add_subcommand("down", "Tear a job down now (same teardown as completion, hooks included)");
  down->add_option("job", *job, "job id, unique id prefix, or name")->required();
  CLI::App* attach = app.add_subcommand("attach", "Reattach the merged live stream of a running job");
  attach->add_option("job", *job, "job id, unique id prefix, or name")->required();
  return [down, attach, job]() -> std::optional<int> {
    if (*down) return DownJobOrArray(*job);
    if (*attach) return Attach(*job);
    return std::nullopt;
  };
}

}  // namespace barge::runner
