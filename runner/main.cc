// barge: the command line. main wires the CLI11 tree from the verb
// families of runner/cli/ (verb_tree.h: each adds its verbs and options and
// runs the one chosen), parses, and dispatches; the verbs themselves are
// runner/cli/'s (verbs.h and the *_cli.h files).
#include <csignal>
#include <spdlog/cfg/env.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <signal.h>
#include <unistd.h>
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>
#include "barge_version.h"
#include "runner/cli/verb_tree.h"
#include "runner/console/color.h"
#include "runner/console/exit_codes.h"
#include "runner/console/failure.h"
#include "runner/console/fd_limit.h"

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
  // In the order `barge --help` lists the verbs.
  const std::vector<barge::runner::VerbRunner> verbs = {
      barge::runner::AddRunVerbs(app),                                  // plan, run, rerun
      barge::runner::AddAboutVerbs(app, {BARGE_VERSION, BARGE_COMMIT}),  // version ... __complete-jobs
      barge::runner::AddListVerbs(app),                                 // ls, show
      barge::runner::AddUiVerb(app),
      barge::runner::AddRmVerb(app),
      barge::runner::AddJobVerbs(app),  // down, attach
      barge::runner::AddLogsVerb(app),
      barge::runner::AddNodeVerbs(app),  // reap, exec, forward, top, hosts
      barge::runner::AddPruneVerb(app),
      barge::runner::AddUsageVerb(app),
  };
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
  for (const barge::runner::VerbRunner& run_verb : verbs) {
    if (std::optional<int> code = run_verb()) return *code;
  }
  return barge::runner::kExitBargeFailure;  // not reached: every verb has a runner
}
