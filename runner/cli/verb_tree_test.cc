#include "runner/cli/verb_tree.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace barge::runner {
namespace {

// Every family on one tree, as main.cc wires it.
std::vector<VerbRunner> AddAll(CLI::App& app) {
  return {AddRunVerbs(app),   AddAboutVerbs(app, {"1.2.3", "abc123"}), AddListVerbs(app), AddUiVerb(app),
          AddRmVerb(app),     AddJobVerbs(app),   AddLogsVerb(app),  AddNodeVerbs(app), AddPruneVerb(app),
          AddUsageVerb(app)};
}

void Parse(CLI::App& app, std::vector<const char*> args) {
  args.insert(args.begin(), "barge");
  app.parse(static_cast<int>(args.size()), args.data());
}

// What the runners say: the one code returned, and how many runners returned one.
struct Ran {
  std::optional<int> code;
  int runners = 0;
};
Ran RunAll(const std::vector<VerbRunner>& verbs) {
  Ran ran;
  for (const VerbRunner& v : verbs) {
    if (std::optional<int> code = v()) {
      ran.code = code;
      ++ran.runners;
    }
  }
  return ran;
}

TEST(VerbTree, TheFamiliesAddEveryVerbInTheOrderTheHelpListsThem) {
  CLI::App app;
  const std::vector<VerbRunner> verbs = AddAll(app);
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    names.push_back(sub->get_name());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"plan", "run", "rerun", "version", "schema", "completion", "manpage",
                                             "__complete-jobs", "ls", "show", "ui", "rm", "down", "attach", "logs",
                                             "reap", "exec", "forward", "top", "hosts", "prune",
                                             "usage"}));
}

TEST(VerbTree, OnlyTheChosenVerbsFamilyRunsAndSaysWhyItRefuses) {
  CLI::App app;
  const std::vector<VerbRunner> verbs = AddAll(app);
  Parse(app, {"hosts"});
  testing::internal::CaptureStderr();
  const Ran ran = RunAll(verbs);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "barge: hosts needs a job file or --hosts (one of them)\n");
  EXPECT_EQ(ran.runners, 1);
  EXPECT_EQ(ran.code, 125);
}

TEST(VerbTree, NoRunnerRunsWhenNoVerbWasChosen) {
  CLI::App app;
  const std::vector<VerbRunner> verbs = AddAll(app);
  Parse(app, {});
  EXPECT_EQ(RunAll(verbs).runners, 0);
}

TEST(VerbTree, AMalformedOverrideStopsPlanBeforeItReadsTheJobFile) {
  CLI::App app;
  const std::vector<VerbRunner> verbs = AddAll(app);
  Parse(app, {"plan", "no-such-file.yaml", "--set", "bad"});
  testing::internal::CaptureStderr();
  const Ran ran = RunAll(verbs);
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "--set bad: expected KEY.PATH=VALUE, e.g. --set container.shm_size=8g\n");
  EXPECT_EQ(ran.code, 125);
}

TEST(VerbTree, ExecRefusesATerminalWithoutStdin) {
  CLI::App app;
  const std::vector<VerbRunner> verbs = AddAll(app);
  Parse(app, {"exec", "-t", "job1", "echo"});
  testing::internal::CaptureStderr();
  const Ran ran = RunAll(verbs);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "barge: exec: -t needs -i (barge exec -it JOB -- bash)\n");
  EXPECT_EQ(ran.code, 125);
}

TEST(VerbTree, VersionPrintsTheBuildItWasGiven) {
  CLI::App app;
  const std::vector<VerbRunner> verbs = AddAll(app);
  Parse(app, {"version"});
  testing::internal::CaptureStdout();
  const Ran ran = RunAll(verbs);
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "barge 1.2.3 (commit abc123)\n");
  EXPECT_EQ(ran.code, 0);
}

TEST(VerbTree, PruneRefusesADurationItCannotRead) {
  CLI::App app;
  const std::vector<VerbRunner> verbs = AddAll(app);
  Parse(app, {"prune", "--older-than", "xyz"});
  testing::internal::CaptureStderr();
  const Ran ran = RunAll(verbs);
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "barge: --older-than: invalid duration 'xyz' (expected e.g. 500ms, 10s, 5m, 1h30m, 1d)\n");
  EXPECT_EQ(ran.code, 125);
}

}  // namespace
}  // namespace barge::runner
