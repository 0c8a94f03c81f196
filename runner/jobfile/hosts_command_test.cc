#include "runner/jobfile/hosts_command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "runner/jobfile/job_file.h"
#include "tests/support/job_errors.h"

namespace barge::runner {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class HostsCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/barge-hostscmd-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  LoadedJob Parse(const std::string& yaml, const JobLayers& layers = {}) {
    return ParseJobText(yaml, "job.yaml", dir_, SecretValues::kRead, layers);
  }
  std::vector<std::string> Errors(const std::string& yaml) {
    return barge::testing::ErrorLines(Parse(yaml));
  }

  std::string dir_;
};

TEST_F(HostsCommandTest, ReturnsTheCommandsStdoutRunInTheGivenDirectory) {
  std::ofstream(dir_ + "/list") << "10.0.0.1\n";
  Result<std::string> out = RunHostsCommand("cat list; echo 10.0.0.2; echo noise >&2", dir_);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(*out, "10.0.0.1\n10.0.0.2\n");
}

TEST_F(HostsCommandTest, AFailureNamesTheCommandItsExitCodeAndTheLastLinesOfItsStderr) {
  Result<std::string> out = RunHostsCommand(
      "for i in 1 2 3 4 5 6 7; do echo line $i >&2; done; echo 10.0.0.1; exit 3", dir_);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(),
            "hosts_command `for i in 1 2 3 4 5 6 7; do echo line $i >&2; done; echo 10.0.0.1; exit "
            "3` failed with exit code 3; its stderr ends: line 3 | line 4 | line 5 | line 6 | line 7");
}

TEST_F(HostsCommandTest, TheStderrShownHasNoTerminalEscapes) {
  Result<std::string> out = RunHostsCommand("printf '\\033[31mError:\\033[0m no output\\n' >&2; exit 1", dir_);
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("; its stderr ends: Error: no output"));
  EXPECT_EQ(out.status().message().find('\033'), std::string::npos);
}

TEST_F(HostsCommandTest, ACommandRunningPastItsTimeoutIsKilledWithItsChildren) {
  const auto start = std::chrono::steady_clock::now();
  Result<std::string> out =
      RunHostsCommand("echo starting >&2; sleep 30 & sleep 30; echo late", dir_, std::chrono::seconds(1));
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(),
              HasSubstr("did not finish within 1 s and was killed; its stderr ends: starting"));
  EXPECT_LT(took, 5.0) << "bounded by the timeout, not by the background sleep";
}

TEST_F(HostsCommandTest, EmptyOutputIsAnError) {
  Result<std::string> out = RunHostsCommand("printf '\\n  \\n'; echo no hosts tagged >&2", dir_);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(),
            "hosts_command `printf '\\n  \\n'; echo no hosts tagged >&2` printed no hosts (exit "
            "code 0, empty output; its stderr ends: no hosts tagged)");
}

TEST_F(HostsCommandTest, LinesBecomeOneQuotedItemEachOnTheSameLine) {
  EXPECT_EQ(HostsCommandOutputAsYaml("10.0.0.1\n\n# comment\n  gpu-2 \r\nodd\"name\n"),
            "- \"10.0.0.1\"\n\n\n- \"gpu-2\"\n- \"odd\\\"name\"\n");
  EXPECT_EQ(HostsCommandOutputAsYaml("  [\"a\", {\"address\": \"b\"}]"), "  [\"a\", {\"address\": \"b\"}]");
}

TEST_F(HostsCommandTest, AJobsHostsComeFromTheCommandOneAddressPerLine) {
  LoadedJob job = Parse("name: x\nimage: i\nhosts_command: printf '10.0.0.1\\n10.0.0.2\\n'\n");
  ASSERT_TRUE(job.errors.empty()) << job.errors[0].ToString();
  ASSERT_EQ(job.spec->hosts.size(), 2u);
  EXPECT_EQ(job.spec->hosts[0].address, "10.0.0.1");
  EXPECT_EQ(job.spec->hosts[1].address, "10.0.0.2");
  EXPECT_EQ(job.spec->hosts_command, "printf '10.0.0.1\\n10.0.0.2\\n'");
  EXPECT_TRUE(job.spec->hosts_command_ran);
  ASSERT_TRUE(job.hosts_command.has_value());
  EXPECT_EQ(job.hosts_command->output, "10.0.0.1\n10.0.0.2\n");
}

TEST_F(HostsCommandTest, AJsonListGivesHostEntriesOfTheSameShapeAsHosts) {
  std::ofstream(dir_ + "/hosts.json")
      << R"(["10.0.0.1", {"address": "10.0.0.2", "gpus": 8, "nodes": 2, "user": "ubuntu"}])";
  LoadedJob job = Parse("name: x\nimage: i\nhosts_command: cat hosts.json\n");
  ASSERT_TRUE(job.errors.empty()) << job.errors[0].ToString();
  ASSERT_EQ(job.spec->hosts.size(), 2u);
  EXPECT_EQ(job.spec->hosts[1].address, "10.0.0.2");
  EXPECT_EQ(job.spec->hosts[1].gpus, 8);
  EXPECT_EQ(job.spec->hosts[1].nodes, 2);
  EXPECT_EQ(job.spec->hosts[1].user, "ubuntu");
}

// Issue #40 (item 13): an inventory is code where it sets what runs on the
// hosts. A hosts_command's output may not set docker_command or container
// options unless the job file trusts it; a hosts_file, the user's own
// file, may (docs/design/security.md says so).
TEST_F(HostsCommandTest, ItsOutputMaySetDockerCommandOrContainerOnlyWhenTheJobFileTrustsIt) {
  std::ofstream(dir_ + "/hosts.json")
      << R"([{"address": "10.0.0.1", "docker_command": "sudo docker"},)" << "\n"
      << R"( {"address": "10.0.0.2", "container": {"volumes": ["/:/host"]}}])";
  LoadedJob refused = Parse("name: x\nimage: i\nhosts_command: cat hosts.json\n");
  ASSERT_EQ(refused.errors.size(), 2u);
  EXPECT_EQ(refused.errors[0].ToString().rfind("output of hosts_command (job.yaml:3):1:", 0), 0u)
      << refused.errors[0].ToString();
  EXPECT_NE(refused.errors[0].ToString().find(
                "hosts[0].docker_command: a hosts_command's output may not set docker_command (it runs as code on "
                "the host); set trust_hosts_command: true"),
            std::string::npos)
      << refused.errors[0].ToString();
  EXPECT_NE(refused.errors[1].ToString().find("hosts[1].container: a hosts_command's output may not set container"),
            std::string::npos)
      << refused.errors[1].ToString();

  LoadedJob trusted = Parse("name: x\nimage: i\nhosts_command: cat hosts.json\ntrust_hosts_command: true\n");
  ASSERT_TRUE(trusted.errors.empty()) << trusted.errors[0].ToString();
  EXPECT_EQ(trusted.spec->hosts[0].docker_command, "sudo docker");
  // Trusted before the command, too (keys are read in any order).
  LoadedJob first = Parse("name: x\nimage: i\ntrust_hosts_command: true\nhosts_command: cat hosts.json\n");
  EXPECT_TRUE(first.errors.empty()) << first.errors[0].ToString();
}

TEST_F(HostsCommandTest, TheRecordedOutputIsUsedAndTheCommandNeverRunsAgain) {
  // The command deletes its marker: a second run would fail.
  std::ofstream(dir_ + "/marker") << "";
  const std::string yaml =
      "name: x\nimage: i\nhosts_command: rm marker && echo 10.0.0.7\n";
  LoadedJob first = Parse(yaml);
  ASSERT_TRUE(first.errors.empty()) << first.errors[0].ToString();
  ASSERT_FALSE(fs::exists(dir_ + "/marker"));
  EXPECT_THAT(Errors(yaml), ElementsAre(HasSubstr("failed with exit code 1")));
  JobLayers layers;
  layers.hosts_command = first.hosts_command;
  LoadedJob again = Parse(yaml, layers);
  ASSERT_TRUE(again.errors.empty()) << again.errors[0].ToString();
  ASSERT_EQ(again.spec->hosts.size(), 1u);
  EXPECT_EQ(again.spec->hosts[0].address, "10.0.0.7");
  EXPECT_FALSE(again.spec->hosts_command_ran);
  // Through the store's JSON as well.
  RunRequest request;
  request.file = dir_ + "/job.yaml";
  request.text = yaml;
  request.hosts_command = first.hosts_command;
  Result<RunRequest> back = RunRequestFromJson(RunRequestToJson(request));
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_TRUE(back->hosts_command.has_value());
  EXPECT_EQ(back->hosts_command->command, "rm marker && echo 10.0.0.7");
  EXPECT_EQ(back->hosts_command->output, "10.0.0.7\n");
}

TEST_F(HostsCommandTest, WithoutARecordAndNotAllowedToRunItIsAnErrorAndNothingRuns) {
  std::ofstream(dir_ + "/marker") << "";
  JobLayers layers;
  layers.run_hosts_command = false;
  LoadedJob job = Parse("name: x\nimage: i\nhosts_command: rm marker; echo a\n", layers);
  ASSERT_EQ(job.errors.size(), 1u);
  EXPECT_EQ(job.errors[0].ToString(),
            "job.yaml:3:16: hosts_command: hosts_command `rm marker; echo a`: its output was not "
            "recorded with the job, and it is not run again here");
  EXPECT_TRUE(fs::exists(dir_ + "/marker"));
}

TEST_F(HostsCommandTest, ItsFailureIsAnErrorAtTheKey) {
  EXPECT_THAT(Errors("name: x\nimage: i\nhosts_command: echo boom >&2; exit 4\n"),
              ElementsAre("job.yaml:3:16: hosts_command: hosts_command `echo boom >&2; exit 4` "
                          "failed with exit code 4; its stderr ends: boom"));
  EXPECT_THAT(Errors("name: x\nimage: i\nhosts_command: printf '#x'\n"),
              ElementsAre("job.yaml:3:16: hosts_command: hosts_command `printf '#x'` printed no "
                          "hosts (only blank lines and # comments)"));
  EXPECT_THAT(Errors("name: x\nimage: i\nhosts_command: echo '[]'\n"),
              ElementsAre(HasSubstr("printed no hosts (an empty list)")));
}

TEST_F(HostsCommandTest, ABadAddressInTheOutputIsReportedAtItsLine) {
  std::vector<std::string> errors =
      Errors("name: x\nimage: i\nhosts_command: printf '10.0.0.1\\n\\n-bad\\n'\n");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors[0], HasSubstr("output of hosts_command (job.yaml:3):3:3: hosts[1]: "));
}

TEST_F(HostsCommandTest, ItCannotBeGivenWithHostsOrAHostsFile) {
  EXPECT_THAT(Errors("name: x\nimage: i\nhosts: [a]\nhosts_command: echo b\n"),
              ElementsAre("job.yaml:4:1: hosts_command: give either 'hosts' or 'hosts_command', not both"));
  std::ofstream(dir_ + "/h.yaml") << "- a\n";
  EXPECT_THAT(Errors("name: x\nimage: i\nhosts_command: echo b\nhosts_file: h.yaml\n"),
              ElementsAre("job.yaml:3:1: hosts_command: give either 'hosts_file' or 'hosts_command', not both"));
}

TEST_F(HostsCommandTest, SettingHostsOnTheCommandLineReplacesTheCommandWhichDoesNotRun) {
  JobLayers layers;
  Result<Override> set = ParseSetOverride("hosts=[10.0.0.9]");
  ASSERT_TRUE(set.ok());
  layers.overrides = {*set};
  LoadedJob job = Parse("name: x\nimage: i\nhosts_command: exit 1\n", layers);
  ASSERT_TRUE(job.errors.empty()) << job.errors[0].ToString();
  EXPECT_EQ(job.spec->hosts[0].address, "10.0.0.9");
  EXPECT_FALSE(job.hosts_command.has_value());
}

}  // namespace
}  // namespace barge::runner
