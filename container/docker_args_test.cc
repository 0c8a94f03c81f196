#include "container/docker_args.h"

#include <gtest/gtest.h>

namespace barge::container {
namespace {

// A spec with every option set, as the foundation issue's job file asks.
ContainerSpec FullSpec() {
  ContainerSpec spec;
  spec.name = "barge-hello-0a1b2c-0";
  spec.image = "barge/demo:local";
  spec.labels = {{"barge.job", "0a1b2c"}, {"barge.role", "head"}, {"barge.rank", "0"}};
  spec.env = {{"BARGE_NODE_RANK", "0"}, {"EPOCHS", "3"}};
  ContainerOptions& o = spec.options;
  o.shm_size = "1g";
  o.cap_add = std::vector<std::string>{"SYS_ADMIN", "SYS_PTRACE"};
  o.gpus = "all";
  o.ipc = "host";
  o.network = "host";
  o.memory = "512m";
  o.cpus = "1.5";
  o.ulimits = KeyValues{{"memlock", "-1"}, {"stack", "67108864"}};
  o.devices = std::vector<std::string>{"/dev/fuse"};
  o.volumes = std::vector<std::string>{"/data:/data:ro", "/scratch:/scratch"};
  o.env = KeyValues{{"EPOCHS", "3"}};
  o.run_options = std::vector<std::string>{"--security-opt", "apparmor=unconfined"};
  spec.command = std::vector<std::string>{"sh", "-c", "echo out; echo err >&2; exit 3"};
  return spec;
}

TEST(RunArgs, AFullSpecGivesEveryFlagInTheDocumentedOrder) {
  const Argv expected = {
      "run", "-d", "--name", "barge-hello-0a1b2c-0",
      "--label", "barge.job=0a1b2c", "--label", "barge.role=head", "--label", "barge.rank=0",
      "-e", "BARGE_NODE_RANK=0", "-e", "EPOCHS=3",
      "--shm-size", "1g",
      "--cap-add", "SYS_ADMIN", "--cap-add", "SYS_PTRACE",
      "--gpus", "all",
      "--ipc", "host",
      "--network", "host",
      "--memory", "512m",
      "--cpus", "1.5",
      "--ulimit", "memlock=-1", "--ulimit", "stack=67108864",
      "--device", "/dev/fuse",
      "-v", "/data:/data:ro", "-v", "/scratch:/scratch",
      "--security-opt", "apparmor=unconfined",
      "barge/demo:local",
      "sh", "-c", "echo out; echo err >&2; exit 3"};
  EXPECT_EQ(RunArgs(FullSpec()), expected);
}

TEST(RunArgs, AMinimalSpecIsRunDetachedWithNameAndImageOnly) {
  ContainerSpec spec;
  spec.name = "n";
  spec.image = "img:tag";
  EXPECT_EQ(RunArgs(spec), (Argv{"run", "-d", "--name", "n", "img:tag"}));
}

TEST(RunArgs, AnAbsentCommandPutsNothingAfterTheImage) {
  ContainerSpec spec = FullSpec();
  spec.command.reset();
  Argv argv = RunArgs(spec);
  EXPECT_EQ(argv.back(), "barge/demo:local");
  spec.command = std::vector<std::string>{};  // empty list: the same
  EXPECT_EQ(RunArgs(spec), argv);
}

TEST(RunArgs, CommandWordsFollowTheImageUnchanged) {
  ContainerSpec spec;
  spec.name = "n";
  spec.image = "img";
  spec.command = std::vector<std::string>{"python3", "-c", "print('a b')", "--", "$HOME", ""};
  EXPECT_EQ(RunArgs(spec), (Argv{"run", "-d", "--name", "n", "img", "python3", "-c",
                                 "print('a b')", "--", "$HOME", ""}));
}

TEST(RunArgs, EnvKeepsTheOrderItWasGivenIn) {
  ContainerSpec spec;
  spec.name = "n";
  spec.image = "img";
  spec.env = {{"Z", "1"}, {"A", "2"}, {"M", "with space=and equals"}, {"EMPTY", ""}};
  EXPECT_EQ(RunArgs(spec), (Argv{"run", "-d", "--name", "n", "-e", "Z=1", "-e", "A=2", "-e",
                                 "M=with space=and equals", "-e", "EMPTY=", "img"}));
}

TEST(RunArgs, TheEnvironmentComesFromSpecEnvAloneNotFromTheOptionsLayer) {
  ContainerSpec spec;
  spec.name = "n";
  spec.image = "img";
  spec.env = {{"A", "1"}};
  spec.options.env = KeyValues{{"B", "2"}};
  EXPECT_EQ(RunArgs(spec), (Argv{"run", "-d", "--name", "n", "-e", "A=1", "img"}));
}

TEST(RunArgs, AGpusValueWithDoubleQuotesPassesThroughUnchanged) {
  ContainerSpec spec;
  spec.name = "n";
  spec.image = "img";
  spec.options.gpus = "\"device=0,1\"";
  EXPECT_EQ(RunArgs(spec), (Argv{"run", "-d", "--name", "n", "--gpus", "\"device=0,1\"", "img"}));
}

TEST(RunArgs, ValuesArePassedThroughAsWritten) {
  ContainerSpec spec;
  spec.name = "n";
  spec.image = "registry.example:5000/team/img@sha256:abc";
  spec.options.shm_size = "20G";
  spec.options.ulimits = KeyValues{{"nofile", "1024:2048"}};
  Argv argv = RunArgs(spec);
  EXPECT_EQ(argv, (Argv{"run", "-d", "--name", "n", "--shm-size", "20G", "--ulimit",
                        "nofile=1024:2048", "registry.example:5000/team/img@sha256:abc"}));
}

TEST(RunArgs, RunOptionsGoVerbatimJustBeforeTheImage) {
  ContainerSpec spec;
  spec.name = "n";
  spec.image = "img";
  spec.options.volumes = std::vector<std::string>{"/a:/a"};
  spec.options.run_options = std::vector<std::string>{"--init", "--user=1000:1000"};
  spec.command = std::vector<std::string>{"true"};
  EXPECT_EQ(RunArgs(spec), (Argv{"run", "-d", "--name", "n", "-v", "/a:/a", "--init",
                                 "--user=1000:1000", "img", "true"}));
}

TEST(LogsArgs, FollowAndSinceAreOptionalAndTimestampsAlwaysOn) {
  EXPECT_EQ(LogsArgs("c", false, std::nullopt), (Argv{"logs", "--timestamps", "c"}));
  EXPECT_EQ(LogsArgs("c", true, std::nullopt), (Argv{"logs", "-f", "--timestamps", "c"}));
  EXPECT_EQ(LogsArgs("c", true, std::string("2026-11-22T04:39:02.789416658Z")),
            (Argv{"logs", "-f", "--timestamps", "--since", "2026-11-22T04:39:02.789416658Z", "c"}));
}

TEST(LifecycleArgs, WaitStopKillAndRemoveNameTheirContainers) {
  EXPECT_EQ(WaitArgs("c"), (Argv{"wait", "c"}));
  EXPECT_EQ(StopArgs({"c"}, 10), (Argv{"stop", "-t", "10", "c"}));
  EXPECT_EQ(StopArgs({"a", "b"}, 0), (Argv{"stop", "-t", "0", "a", "b"}));
  EXPECT_EQ(KillArgs({"c"}, "TERM"), (Argv{"kill", "-s", "TERM", "c"}));
  EXPECT_EQ(KillArgs({"a", "b"}, "KILL"), (Argv{"kill", "-s", "KILL", "a", "b"}));
  EXPECT_EQ(RemoveArgs({"a", "b"}, true), (Argv{"rm", "-f", "a", "b"}));
  EXPECT_EQ(RemoveArgs({"a"}, false), (Argv{"rm", "a"}));
}

TEST(QueryArgs, InspectVersionPsAndImageIdAskForMachineReadableOutput) {
  EXPECT_EQ(InspectArgs({"a", "b"}), (Argv{"inspect", "--type", "container", "a", "b"}));
  EXPECT_EQ(ImageInspectArgs("barge/test:local"),
            (Argv{"image", "inspect", "--format", "{{.Id}}", "barge/test:local"}));
  EXPECT_EQ(VersionArgs(), (Argv{"version", "--format", "{{.Server.Version}}"}));
  EXPECT_EQ(PsByLabelArgs("barge.job=0a1b2c"),
            (Argv{"ps", "-a", "--no-trunc", "--filter", "label=barge.job=0a1b2c", "--format",
                  "{{json .}}"}));
}

TEST(ImageArgs, SaveLoadAndPullMoveImages) {
  EXPECT_EQ(SaveArgs("barge/torch:local"), (Argv{"save", "barge/torch:local"}));
  EXPECT_EQ(LoadArgs(), (Argv{"load"}));
  EXPECT_EQ(PullArgs("debian:12"), (Argv{"pull", "debian:12"}));
}

}  // namespace
}  // namespace barge::container

namespace barge::container {
namespace {

TEST(GpuProbeArgs, RunsNvidiaSmiInTheJobsImageWithItsGpusAndLabels) {
  ContainerSpec spec;
  spec.name = "barge-x-1-0";
  spec.image = "img:1";
  spec.labels = {{"barge.job", "1"}};
  spec.options.gpus = "\"device=0,1\"";
  EXPECT_EQ(GpuProbeArgs(spec),
            (Argv{"run", "--rm", "--label", "barge.job=1", "--gpus", "\"device=0,1\"",
                  "--entrypoint", "nvidia-smi", "img:1", "-L"}));
}

}  // namespace
}  // namespace barge::container
