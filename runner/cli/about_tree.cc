// version, schema, completion, manpage and __complete-jobs on the command
// tree (verb_tree.h): what barge says about itself.
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <string>

#include "runner/cli/cli_docs.h"
#include "runner/cli/verb_tree.h"
#include "runner/console/exit_codes.h"
#include "runner/console/failure.h"
#include "runner/cli/verbs.h"
#include "runner/jobfile/job_schema.h"

namespace barge::runner {
namespace {

struct AboutVerbs {
  CLI::App* app = nullptr;
  BuildInfo build;
  CLI::App* version = nullptr;
  CLI::App* schema = nullptr;
  CLI::App* completion = nullptr;
  CLI::App* manpage = nullptr;
  CLI::App* complete_jobs = nullptr;
  std::string shell;

  std::optional<int> Run() const;
  int Completion() const;
  int ManPage() const;
};

std::optional<int> AboutVerbs::Run() const {
  if (*version) {
    std::printf("barge %s (commit %s)\n", build.version.c_str(), build.commit.c_str());
    return 0;
  }
  if (*schema) {
    std::fputs(JobSchemaJson().c_str(), stdout);
    return 0;
  }
  if (*completion) return Completion();
  if (*manpage) return ManPage();
  if (*complete_jobs) return CompleteJobs();
  return std::nullopt;
}

// `barge completion bash|zsh|fish`: the script for the whole tree.
int AboutVerbs::Completion() const {
  auto script = CompletionScript(*app, shell);
  if (!script.ok()) {
    std::fprintf(stderr, "barge: %s\n", script.status().message().c_str());
    return kExitBargeFailure;
  }
  std::fputs(script->c_str(), stdout);
  return 0;
}

// `barge manpage`: barge(1) in roff, dated today or, when set,
// SOURCE_DATE_EPOCH (reproducible builds).
int AboutVerbs::ManPage() const {
  std::time_t t = std::time(nullptr);
  if (const char* epoch = std::getenv("SOURCE_DATE_EPOCH")) t = std::strtoll(epoch, nullptr, 10);
  char date[16];
  std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&t));
  std::fputs(runner::ManPage(*app, build.version, date).c_str(), stdout);
  return 0;
}

}  // namespace

VerbRunner AddAboutVerbs(CLI::App& app, BuildInfo build) {
  auto v = std::make_shared<AboutVerbs>();
  v->app = &app;
  v->build = std::move(build);
  v->version = app.add_subcommand("version", "Print barge's version and commit");
  v->schema = app.add_subcommand("schema", "Print the job file's JSON Schema (draft 2020-12), for editors and validators");
  v->completion = app.add_subcommand("completion", "Print a shell completion script: barge completion bash|zsh|fish");
  v->completion->add_option("shell", v->shell, "bash, zsh or fish")->required()->check(CLI::IsMember({"bash", "zsh", "fish"}));
  v->manpage = app.add_subcommand("manpage", "Print barge(1) in roff: barge manpage | man -l -");
  // Hidden (no group): what the completion scripts call.
  v->complete_jobs = app.add_subcommand("__complete-jobs", "job ids and names, for completion")->group("");
  return [v] { return v->Run(); };
}

}  // namespace barge::runner
