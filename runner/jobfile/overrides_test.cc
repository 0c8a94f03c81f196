// Overrides, config.yaml defaults and a recorded hosts file laid over a job
// file (runner/jobfile/overrides.h, applied by ParseJobText).
#include "runner/jobfile/overrides.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "base/user_home.h"
#include "runner/jobfile/job_file.h"
#include "tests/support/scoped_env.h"

namespace barge::runner {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::Pair;

Override Set(const std::string& arg) {
  Result<Override> o = ParseSetOverride(arg);
  EXPECT_TRUE(o.ok()) << o.status().message();
  return o.ok() ? *o : Override{};
}
Override Env(const std::string& arg) {
  Result<Override> o = ParseEnvOverride(arg);
  EXPECT_TRUE(o.ok()) << o.status().message();
  return o.ok() ? *o : Override{};
}

constexpr const char* kJob = R"(name: train
image: busybox
container:
  shm_size: 1g
  env:
    A: "1"
hosts:
  - address: h1
    port: 22
  - h2
secrets:
  TOKEN: {env: HOME}
)";

class OverridesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/barge-overrides-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& relative, const std::string& text) {
    fs::path p = fs::path(dir_) / relative;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }
  // Only command-line overrides.
  static JobLayers Layers(std::vector<Override> overrides) {
    JobLayers layers;
    layers.overrides = std::move(overrides);
    return layers;
  }
  LoadedJob ParseWith(std::vector<Override> overrides, const std::string& text = kJob) {
    return Parse(Layers(std::move(overrides)), text);
  }
  std::vector<std::string> ErrorsWith(std::vector<Override> overrides, const std::string& text = kJob) {
    return Errors(Layers(std::move(overrides)), text);
  }

  LoadedJob Parse(const JobLayers& layers, const std::string& text = kJob) {
    return ParseJobText(text, "job.yaml", dir_, SecretValues::kRead, layers);
  }
  std::vector<std::string> Errors(const JobLayers& layers, const std::string& text = kJob) {
    LoadedJob job = Parse(layers, text);
    EXPECT_FALSE(job.spec.has_value());
    std::vector<std::string> lines;
    for (const JobFileError& e : job.errors) lines.push_back(e.ToString());
    return lines;
  }
  std::string dir_;
};

TEST(Override, SetTakesADottedPathAndAFlowValueAndSpellsItsKeyPathAsErrorsDo) {
  Override o = Set("hosts.0.port=2222");
  EXPECT_EQ(o.path, "hosts.0.port");
  EXPECT_EQ(o.value, "2222");
  EXPECT_EQ(o.KeyPath(), "hosts[0].port");
  EXPECT_EQ(o.Name(), "--set hosts.0.port");
  EXPECT_EQ(Set("container.cap_add=[SYS_ADMIN]").value, "[SYS_ADMIN]");
  EXPECT_EQ(Set("a.b=x=y").value, "x=y");
  EXPECT_EQ(Env("EPOCHS=5").KeyPath(), "container.env.EPOCHS");
}

TEST(Override, MalformedArgumentsAreRefusedWithTheFlagNamed) {
  EXPECT_EQ(ParseSetOverride("container.shm_size").status().message(),
            "--set container.shm_size: expected KEY.PATH=VALUE, e.g. --set container.shm_size=8g");
  EXPECT_FALSE(ParseSetOverride("a..b=1").ok());
  EXPECT_FALSE(ParseSetOverride("=1").ok());
  EXPECT_FALSE(ParseSetOverride("a b=1").ok());
  EXPECT_FALSE(ParseEnvOverride("1X=2").ok());
  EXPECT_FALSE(ParseEnvOverride("NOEQUALS").ok());
}

TEST_F(OverridesTest, SetAndEnvChangeTheSpecAndTheLastOneWins) {
  LoadedJob job = ParseWith({Set("container.shm_size=8g"), Set("hosts.0.port=2222"),
                          Set("container.cap_add=[SYS_ADMIN]"), Env("EPOCHS=5"), Env("A=2"),
                          Set("container.shm_size=4g"),
                          Override{Override::Kind::kName, "", "exp7"}});
  ASSERT_TRUE(job.spec) << job.errors[0].ToString();
  EXPECT_EQ(job.spec->name, "exp7");
  EXPECT_EQ(job.spec->container.shm_size, "4g");
  EXPECT_EQ(job.spec->hosts[0].port, 2222);
  EXPECT_THAT(*job.spec->container.cap_add, ElementsAre("SYS_ADMIN"));
  EXPECT_THAT(*job.spec->container.env, ElementsAre(Pair("A", "2"), Pair("EPOCHS", "5")));
}

TEST_F(OverridesTest, AnOverrideCreatesTheBlocksItNeeds) {
  LoadedJob job = ParseWith({Set("roles.worker.count=1"), Set("ssh.connect_timeout=3s")});
  ASSERT_TRUE(job.spec) << job.errors[0].ToString();
  EXPECT_EQ(job.spec->roles.at("worker").count, 1);
  EXPECT_EQ(job.spec->ssh.connect_timeout, std::chrono::seconds(3));
}

TEST_F(OverridesTest, AnErrorInAnOverrideNamesTheOverrideNotALine) {
  EXPECT_THAT(ErrorsWith({Set("container.shm_sise=8g")}),
              ElementsAre("--set container.shm_sise: unknown key; did you mean 'shm_size'?"));
  EXPECT_THAT(ErrorsWith({Set("hosts.0.port=abc")}),
              ElementsAre("--set hosts.0.port: expected a port number from 1 to 65535, got 'abc'"));
  EXPECT_THAT(ErrorsWith({Set("hosts.5.port=1")}),
              ElementsAre("--set hosts.5.port: 'hosts' is a list of 2 item(s); expected an index "
                          "from 0 to 1, got '5'"));
  EXPECT_THAT(ErrorsWith({Set("image.tag=1")}),
              ElementsAre("--set image.tag: 'image' is a single value in the job file, not a "
                          "mapping or a list"));
  EXPECT_THAT(ErrorsWith({Set("container.cap_add=[SYS_ADMIN")}),
              ElementsAre("--set container.cap_add: invalid YAML value '[SYS_ADMIN': end of "
                          "sequence flow not found"));
}

TEST_F(OverridesTest, AnErrorLeftInTheFileKeepsItsLine) {
  std::vector<std::string> errors =
      ErrorsWith({Set("container.shm_size=8g")}, std::string(kJob) + "stop_grace: soon\n");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].rfind("job.yaml:13:13: stop_grace: ", 0), 0u) << errors[0];
}

TEST_F(OverridesTest, ASecretsNameCannotBeGivenOnTheCommandLine) {
  const std::string why =
      "TOKEN is declared in secrets:; a value given on the command line would land in the job "
      "store, the plan and process lists (give the secret's file or variable instead)";
  EXPECT_THAT(ErrorsWith({Env("TOKEN=x")}), ElementsAre("--env TOKEN: " + why));
  EXPECT_THAT(ErrorsWith({Set("container.env.TOKEN=x")}), ElementsAre("--set container.env.TOKEN: " + why));
  EXPECT_THAT(ErrorsWith({Set("roles.head.container.env={TOKEN: x}")}),
              ElementsAre("--set roles.head.container.env: " + why));
  EXPECT_THAT(ErrorsWith({Set("secrets.TOKEN.env=PATH")}),
              ElementsAre("--set secrets.TOKEN.env: secrets cannot be set on the command line "
                          "(their values would land in the job store, the plan and process lists)"));
}

TEST_F(OverridesTest, HostsFileReplacesTheListedHostsAndItsErrorsNameIt) {
  const std::string hosts = Write("other/hosts.yaml", "- a1\n- address: a2\n  port: 2200\n");
  LoadedJob job = ParseWith({Override{Override::Kind::kHostsFile, "", hosts}});
  ASSERT_TRUE(job.spec) << job.errors[0].ToString();
  ASSERT_EQ(job.spec->hosts.size(), 2u);
  EXPECT_EQ(job.spec->hosts[1].address, "a2");
  ASSERT_TRUE(job.hosts_file);
  EXPECT_EQ(job.hosts_file->path, hosts);
  EXPECT_EQ(job.hosts_file->text, "- a1\n- address: a2\n  port: 2200\n");
  EXPECT_THAT(ErrorsWith({Override{Override::Kind::kHostsFile, "", dir_ + "/missing.yaml"}}),
              ElementsAre("--hosts-file: cannot read hosts file '" + dir_ +
                          "/missing.yaml': No such file or directory"));
}

TEST_F(OverridesTest, ARecordedHostsFileIsReadInsteadOfTheDisk) {
  const std::string hosts = Write("hosts.yaml", "- now-on-disk\n");
  JobLayers layers;
  layers.hosts_file = RecordedHostsFile{hosts, "- as-recorded-1\n- as-recorded-2\n"};
  LoadedJob job = Parse(layers, "name: t\nimage: busybox\nhosts_file: hosts.yaml\n");
  ASSERT_TRUE(job.spec) << job.errors[0].ToString();
  ASSERT_EQ(job.spec->hosts.size(), 2u);
  EXPECT_EQ(job.spec->hosts[0].address, "as-recorded-1");
}

TEST_F(OverridesTest, ConfigFileFillsInOnlyWhatTheJobFileLeavesUnset) {
  JobLayers layers;
  layers.config_file = Write("config/barge/config.yaml",
                             "ssh:\n  user: alice\n  port: 2222\n  connect_timeout: 3s\n");
  LoadedJob job = Parse(layers, std::string(kJob) + "ssh:\n  port: 22\n");
  ASSERT_TRUE(job.spec) << job.errors[0].ToString();
  EXPECT_EQ(job.spec->ssh.user, "alice");
  EXPECT_EQ(job.spec->ssh.port, 22);  // the job file wins
  EXPECT_EQ(job.spec->ssh.connect_timeout, std::chrono::seconds(3));
  // An override wins over both.
  layers.overrides = {Set("ssh.user=bob")};
  job = Parse(layers);
  ASSERT_TRUE(job.spec);
  EXPECT_EQ(job.spec->ssh.user, "bob");
}

TEST_F(OverridesTest, ConfigFileGivesTheHostRecordRuleADefaultAndNothingElseOfHealth) {
  JobLayers layers;
  layers.config_file = Write("config/barge/config.yaml", "health:\n  host_failures: 3\n  host_window: 2h\n");
  LoadedJob job = Parse(layers, std::string(kJob) + "health:\n  host_window: 6h\n");
  ASSERT_TRUE(job.spec) << job.errors[0].ToString();
  EXPECT_EQ(job.spec->health.host_failures, 3);
  EXPECT_EQ(job.spec->health.host_window, std::chrono::hours(6));  // the job file wins
  layers.config_file = Write("config.yaml", "health:\n  every: 1m\n");
  EXPECT_THAT(Errors(layers), ElementsAre(layers.config_file +
                                          ":2:3: health.every: only health.host_failures and health.host_window "
                                          "have a default in config.yaml"));
}

TEST_F(OverridesTest, ConfigFileErrorsNameItsFileLineAndKey) {
  JobLayers layers;
  layers.config_file = Write("config.yaml", "ssh:\n  usr: alice\n  port: x\nimage: no\n");
  EXPECT_THAT(Errors(layers),
              ElementsAre(layers.config_file + ":2:3: ssh.usr: unknown key; did you mean 'user'?",
                          layers.config_file + ":3:9: ssh.port: expected a port number from 1 to 65535, got 'x'",
                          layers.config_file + ":4:1: image: unknown key (expected ssh or health)"));
  layers.config_file = dir_ + "/absent.yaml";
  EXPECT_TRUE(Parse(layers).spec);
}

// config.yaml's place, each rule with the other variables set aside.
class DefaultConfigFileTest : public ::testing::Test {
 protected:
  void SetUp() override { UserHomeForTesting() = "/passwd-home"; }
  void TearDown() override { UserHomeForTesting().clear(); }
  testing::ScopedEnv xdg_config_home_{"XDG_CONFIG_HOME", std::nullopt};
  testing::ScopedEnv home_{"HOME", "/home/u"};
};

TEST_F(DefaultConfigFileTest, AnAbsoluteXdgConfigHomeHoldsIt) {
  testing::ScopedEnv xdg("XDG_CONFIG_HOME", "/x/config");
  EXPECT_EQ(DefaultConfigFile(), "/x/config/barge/config.yaml");
}

TEST_F(DefaultConfigFileTest, ARelativeXdgConfigHomeIsIgnoredAsTheXdgSpecSays) {
  testing::ScopedEnv xdg("XDG_CONFIG_HOME", "relative/config");
  EXPECT_EQ(DefaultConfigFile(), "/home/u/.config/barge/config.yaml");
}

TEST_F(DefaultConfigFileTest, TheDefaultIsUnderHomeNotThePasswdEntrysHome) {
  EXPECT_EQ(DefaultConfigFile(), "/home/u/.config/barge/config.yaml");
}

TEST_F(DefaultConfigFileTest, WithHomeUnsetTheDefaultIsUnderThePasswdEntrysHome) {
  testing::ScopedEnv home("HOME", std::nullopt);
  EXPECT_EQ(DefaultConfigFile(), "/passwd-home/.config/barge/config.yaml");
}

TEST(RunRequest, RoundTripsThroughJsonAndPrintsAsACommandLine) {
  RunRequest r;
  r.file = "/jobs/my job.yaml";
  r.text = "name: t\nimage: busybox\n";
  r.overrides = {Set("container.shm_size=8g"), Env("MSG=it's here"),
                 Override{Override::Kind::kName, "", "exp7"}};
  r.hosts_file = RecordedHostsFile{"/jobs/hosts.yaml", "- h1\n"};
  Result<RunRequest> back = RunRequestFromJson(RunRequestToJson(r));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->file, r.file);
  EXPECT_EQ(back->text, r.text);
  ASSERT_EQ(back->overrides.size(), 3u);
  EXPECT_EQ(back->overrides[1].Argument(), "MSG=it's here");
  EXPECT_EQ(back->hosts_file->text, "- h1\n");
  EXPECT_EQ(back->CommandLine(),
            "barge run '/jobs/my job.yaml' --set container.shm_size=8g --env 'MSG=it'\\''s here' "
            "--name exp7");
  EXPECT_FALSE(RunRequestFromJson("[]").ok());
  EXPECT_FALSE(RunRequestFromJson(R"({"file": "a", "text": "b", "overrides": [{"flag": "--x", "argument": ""}]})").ok());
}

TEST(RunRequest, KeepsTheGroupsHostsFilesAndWhichMemberOfAnArrayItRan) {
  RunRequest r;
  r.file = "/jobs/sweep.yaml";
  r.text = "name: t\n";
  EXPECT_EQ(RunRequestToJson(r).find("member"), std::string::npos);
  EXPECT_EQ(RunRequestToJson(r).find("group_hosts_files"), std::string::npos);
  r.group_hosts_files = {{"/jobs/a.yaml", "- h1\n"}, {"/jobs/b.yaml", "- h2\n- h3\n"}};
  r.member = RunRequest::Member{"abcd1234", 3, {1, 0}};
  Result<RunRequest> back = RunRequestFromJson(RunRequestToJson(r));
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->group_hosts_files.size(), 2u);
  EXPECT_EQ(back->group_hosts_files[1].path, "/jobs/b.yaml");
  EXPECT_EQ(back->group_hosts_files[1].text, "- h2\n- h3\n");
  ASSERT_TRUE(back->member);
  EXPECT_EQ(back->member->array_id, "abcd1234");
  EXPECT_EQ(back->member->index, 3);
  EXPECT_EQ(back->member->hosts, (std::vector<size_t>{1, 0}));
  // Without them (a request recorded before they were): none.
  Result<RunRequest> old = RunRequestFromJson(R"({"file": "a", "text": "b", "overrides": [], "hosts_file": null})");
  ASSERT_TRUE(old.ok());
  EXPECT_TRUE(old->group_hosts_files.empty());
  EXPECT_FALSE(old->member);
  EXPECT_FALSE(RunRequestFromJson(R"({"file": "a", "text": "b", "overrides": [], "member": {"array": "x"}})").ok());
  EXPECT_FALSE(RunRequestFromJson(R"({"file": "a", "text": "b", "overrides": [], "group_hosts_files": [1]})").ok());
}

}  // namespace
}  // namespace barge::runner
