// `slurm:` in a job file (runner/jobfile/slurm_block.cc): the allocation's
// shape, one placeholder host per node, and the errors, each naming file,
// line and key.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runner/jobfile/job_file.h"
#include "tests/support/job_errors.h"

namespace barge::runner {
namespace {

using std::chrono::minutes;

LoadedJob Parse(const std::string& text) { return ParseJobText(text, "job.yaml", "/tmp"); }

std::vector<std::string> Errors(const std::string& text) {
  return barge::testing::RefusedWith(Parse(text), text);
}

constexpr const char* kHead = "name: train\nimage: busybox\n";

TEST(SlurmBlock, ReadsTheShapeAndGivesOnePlaceholderHostPerNode) {
  LoadedJob job = Parse(std::string(kHead) +
                        "slurm:\n"
                        "  partition: gpu\n"
                        "  nodes: 3\n"
                        "  gpus_per_node: 8\n"
                        "  time: 2h\n"
                        "  account: ml\n"
                        "  qos: high\n"
                        "  login: login.example.org\n"
                        "  extra: [--constraint=a100]\n");
  for (const JobFileError& e : job.errors) ADD_FAILURE() << e.ToString();
  ASSERT_TRUE(job.spec);
  ASSERT_TRUE(job.spec->slurm);
  const SlurmSpec& s = *job.spec->slurm;
  EXPECT_EQ(s.nodes, 3);
  EXPECT_EQ(s.time, minutes(120));
  EXPECT_EQ(s.partition, "gpu");
  EXPECT_EQ(s.gpus_per_node, 8);
  EXPECT_EQ(s.account, "ml");
  EXPECT_EQ(s.qos, "high");
  EXPECT_EQ(s.login, "login.example.org");
  EXPECT_TRUE(s.exclusive);
  EXPECT_EQ(s.extra, std::vector<std::string>{"--constraint=a100"});
  ASSERT_EQ(job.spec->hosts.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(job.spec->hosts[i].address, SlurmNodePlaceholder(i + 1));
    EXPECT_EQ(job.spec->hosts[i].gpus, 8);
  }
}

TEST(SlurmBlock, NodesAndTimeAreRequired) {
  EXPECT_EQ(Errors(std::string(kHead) + "slurm:\n  partition: gpu\n"),
            (std::vector<std::string>{
                "job.yaml:3:1: slurm: needs 'nodes' (how many nodes to allocate)",
                "job.yaml:3:1: slurm: needs 'time' (the allocation's time limit, e.g. time: 2h)"}));
}

TEST(SlurmBlock, OtherWaysToNameHostsAreRefused) {
  EXPECT_EQ(Errors(std::string(kHead) + "hosts: [10.0.0.1]\nslurm: {nodes: 2, time: 1h}\n"),
            (std::vector<std::string>{
                "job.yaml:3:1: hosts: not with 'slurm:' (line 4): the allocation's nodes are the job's hosts"}));
}

TEST(SlurmBlock, OptionsBargeSetsItselfCannotComeThroughExtra) {
  EXPECT_EQ(Errors(std::string(kHead) + "slurm:\n  nodes: 2\n  time: 1h\n  extra: [--nodes=4, -t10]\n"),
            (std::vector<std::string>{
                "job.yaml:6:11: slurm.extra[0]: --nodes is set by barge (slurm.nodes)",
                "job.yaml:6:22: slurm.extra[1]: -t is set by barge (slurm.time)"}));
}

TEST(SlurmBlock, BadValuesNameTheirKey) {
  EXPECT_EQ(Errors(std::string(kHead) + "slurm:\n  nodes: 0\n  time: 1h\n  partition: \"gpu; rm -rf /\"\n"
                                        "  cpus_per_node: 0\n  mem_per_node: 16 gigs\n  exclusive: no\n"),
            (std::vector<std::string>{
                "job.yaml:4:10: slurm.nodes: expected a number of nodes from 1 to 100000, got '0'",
                "job.yaml:6:14: slurm.partition: must be a Slurm name (letters, digits, _ . -; a comma list for "
                "several partitions)",
                "job.yaml:7:18: slurm.cpus_per_node: expected a number of CPUs from 1 to 65536, got '0'",
                "job.yaml:8:17: slurm.mem_per_node: invalid size '16 gigs' (expected e.g. 512m, 2g)",
                "job.yaml:9:14: slurm.exclusive: invalid value 'no' (expected true or false)"}));
}

TEST(SlurmBlock, SharedNodesTakeTheirShareAndContainersAskingGpusNeedGpusFromSlurm) {
  LoadedJob job = Parse(std::string(kHead) +
                        "slurm: {nodes: 2, time: 1h, exclusive: false, cpus_per_node: 4, mem_per_node: 8g}\n");
  for (const JobFileError& e : job.errors) ADD_FAILURE() << e.ToString();
  ASSERT_TRUE(job.spec && job.spec->slurm);
  EXPECT_FALSE(job.spec->slurm->exclusive);
  EXPECT_EQ(job.spec->slurm->cpus_per_node, 4);
  EXPECT_EQ(job.spec->slurm->mem_per_node, "8g");
  EXPECT_EQ(Errors(std::string(kHead) + "container: {gpus: all}\nslurm: {nodes: 2, time: 1h, exclusive: false}\n"),
            (std::vector<std::string>{
                "job.yaml:4:1: slurm: with exclusive: false a container gets only the GPUs Slurm gives its node, "
                "and container.gpus asks for GPUs: set slurm.gpus_per_node"}));
  LoadedJob with_gpus = Parse(std::string(kHead) + "container: {gpus: all}\n"
                                                  "slurm: {nodes: 2, time: 1h, exclusive: false, gpus_per_node: 2}\n");
  for (const JobFileError& e : with_gpus.errors) ADD_FAILURE() << e.ToString();
  EXPECT_TRUE(with_gpus.spec.has_value());
}

TEST(SlurmBlock, TheLoginHostMayCarryItsOwnUserAndPort) {
  LoadedJob job = Parse(std::string(kHead) + "slurm: {nodes: 1, time: 1h, login: alice@login1.example.org:2222}\n");
  for (const JobFileError& e : job.errors) ADD_FAILURE() << e.ToString();
  ASSERT_TRUE(job.spec && job.spec->slurm);
  EXPECT_EQ(job.spec->slurm->login, "login1.example.org");
  EXPECT_EQ(job.spec->slurm->login_user, "alice");
  EXPECT_EQ(job.spec->slurm->login_port, 2222);
  LoadedJob plain = Parse(std::string(kHead) + "slurm: {nodes: 1, time: 1h, login: login1}\n");
  ASSERT_TRUE(plain.spec && plain.spec->slurm);
  EXPECT_EQ(plain.spec->slurm->login_user, std::nullopt);
  EXPECT_EQ(plain.spec->slurm->login_port, std::nullopt);
  EXPECT_EQ(Errors(std::string(kHead) + "slurm: {nodes: 1, time: 1h, login: \"login1:99999\"}\n"),
            (std::vector<std::string>{"job.yaml:3:36: slurm.login: login host 'login1:99999': port must be from 1 "
                                      "to 65535, got 99999"}));
}

}  // namespace
}  // namespace barge::runner
