// `host_groups:` in a job file (runner/jobfile/job_file.cc): each group's hosts
// (listed or from a hosts_file), its ssh settings laid over the job's (and
// the config file's), and the errors a group can have, each naming file,
// line and key.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "runner/jobfile/job_file.h"
#include "runner/jobfile/job_keys.h"
#include "tests/support/job_errors.h"

namespace barge::runner {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

class HostGroupsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/barge-hostgroups-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  void Write(const std::string& relative, const std::string& text) {
    std::ofstream(fs::path(dir_) / relative, std::ios::binary) << text;
  }
  LoadedJob Parse(const std::string& text, const JobLayers& layers = {}) {
    return ParseJobText(text, "job.yaml", dir_, SecretValues::kRead, layers);
  }
  std::vector<std::string> Errors(const std::string& text) {
    return barge::testing::RefusedWith(Parse(text), text);
  }

  std::string dir_;
};

constexpr const char* kHead = "name: sweep\nimage: busybox\n";

TEST_F(HostGroupsTest, GroupsKeepTheirHostsInFileOrderFromAListOrAHostsFile) {
  Write("eu.yaml", "- 10.0.1.1\n- {address: 10.0.1.2, nodes: 2}\n");
  LoadedJob job = Parse(std::string(kHead) +
                        "hosts: [10.0.0.1]\n"
                        "host_groups:\n"
                        "  us:\n"
                        "    hosts: [10.0.2.1, 10.0.2.2]\n"
                        "  eu:\n"
                        "    hosts_file: eu.yaml\n");
  for (const JobFileError& e : job.errors) ADD_FAILURE() << e.ToString();
  ASSERT_TRUE(job.spec);
  ASSERT_EQ(job.spec->host_groups.size(), 2u);
  const HostGroup& us = job.spec->host_groups[0];
  const HostGroup& eu = job.spec->host_groups[1];
  EXPECT_EQ(us.name, "us");
  ASSERT_EQ(us.hosts.size(), 2u);
  EXPECT_EQ(us.hosts[1].address, "10.0.2.2");
  EXPECT_EQ(us.hosts_file, "");
  EXPECT_EQ(eu.name, "eu");
  ASSERT_EQ(eu.hosts.size(), 2u);
  EXPECT_EQ(eu.hosts[1].address, "10.0.1.2");
  EXPECT_EQ(eu.hosts[1].nodes, 2);
  EXPECT_EQ(eu.hosts[1].line, 2);  // a line of eu.yaml
  EXPECT_EQ(eu.hosts_file, "eu.yaml");
  // The job's own inventory is untouched by its groups.
  ASSERT_EQ(job.spec->hosts.size(), 1u);
  EXPECT_EQ(job.spec->hosts[0].address, "10.0.0.1");
}

TEST_F(HostGroupsTest, EachGroupsHostsFileIsGivenAsReadAndARecordedOneIsReadInsteadOfTheDisk) {
  Write("eu.yaml", "- 10.0.1.1\n");
  Write("ap.yaml", "- 10.0.3.1\n");
  const std::string text = std::string(kHead) +
                           "host_groups:\n"
                           "  us: {hosts: [10.0.2.1]}\n"
                           "  eu: {hosts_file: eu.yaml}\n"
                           "  ap: {hosts_file: ap.yaml}\n";
  LoadedJob job = Parse(text);
  ASSERT_TRUE(job.spec);
  ASSERT_EQ(job.group_hosts_files.size(), 2u);
  EXPECT_EQ(job.group_hosts_files[0].path, dir_ + "/eu.yaml");
  EXPECT_EQ(job.group_hosts_files[0].text, "- 10.0.1.1\n");
  EXPECT_EQ(job.group_hosts_files[1].path, dir_ + "/ap.yaml");
  // A rerun (or a member job's down) reads the record of the same path; a
  // file without one is read from disk.
  Write("eu.yaml", "- 10.0.9.9\n");
  Write("ap.yaml", "- 10.0.8.8\n");
  JobLayers layers;
  layers.group_hosts_files = {job.group_hosts_files[0], {dir_ + "/other.yaml", "- 10.0.7.7\n"}};
  LoadedJob again = Parse(text, layers);
  ASSERT_TRUE(again.spec);
  EXPECT_EQ(again.spec->host_groups[1].hosts.at(0).address, "10.0.1.1");
  EXPECT_EQ(again.spec->host_groups[2].hosts.at(0).address, "10.0.8.8");
  EXPECT_EQ(again.group_hosts_files.at(0).text, "- 10.0.1.1\n");
  EXPECT_EQ(again.group_hosts_files.at(1).text, "- 10.0.8.8\n");
}

TEST_F(HostGroupsTest, AGroupsSshKeysWinAndTheOthersAreTheJobsAndTheConfigFilesWhichTheJobOverrides) {
  Write("config.yaml", "ssh:\n  port: 2222\n  dead_after: 7s\n  engine_misses: 9\n");
  JobLayers layers;
  layers.config_file = dir_ + "/config.yaml";
  LoadedJob job = Parse(std::string(kHead) +
                            "ssh:\n"
                            "  user: alice\n"
                            "  connect_timeout: 5s\n"
                            "  dead_after: 3s\n"
                            "host_groups:\n"
                            "  plain:\n"
                            "    hosts: [10.0.2.1]\n"
                            "  jumped:\n"
                            "    hosts: [10.0.3.1]\n"
                            "    ssh:\n"
                            "      user: bob\n"
                            "      port: 22\n"
                            "      proxy_jump: root@10.0.0.9:2200\n",
                        layers);
  for (const JobFileError& e : job.errors) ADD_FAILURE() << e.ToString();
  ASSERT_TRUE(job.spec);
  const SshSettings& plain = job.spec->host_groups[0].ssh;
  const SshSettings& jumped = job.spec->host_groups[1].ssh;
  // Without an ssh: of its own a group has the job's settings, config included.
  EXPECT_EQ(plain.user, "alice");
  EXPECT_EQ(plain.port, 2222);
  EXPECT_EQ(plain.dead_after, seconds(3));
  EXPECT_EQ(plain.engine_misses, 9);
  EXPECT_TRUE(plain.proxy_jump.empty());
  EXPECT_TRUE(job.spec->host_groups[0].ssh_keys.empty());
  // The group's keys win; the rest fall back to the job's (and the config's).
  EXPECT_EQ(jumped.user, "bob");
  EXPECT_EQ(jumped.port, 22);
  EXPECT_EQ(jumped.proxy_jump, std::vector<std::string>{"root@10.0.0.9:2200"});
  EXPECT_EQ(jumped.connect_timeout, seconds(5));
  EXPECT_EQ(jumped.dead_after, seconds(3));
  EXPECT_EQ(jumped.engine_misses, 9);
  EXPECT_EQ(job.spec->host_groups[1].ssh_keys, (std::vector<std::string>{"user", "port", "proxy_jump"}));
  // The job's own settings do not change.
  EXPECT_EQ(job.spec->ssh.user, "alice");
  EXPECT_EQ(job.spec->ssh.port, 2222);
  EXPECT_TRUE(job.spec->ssh.proxy_jump.empty());
}

TEST_F(HostGroupsTest, AGroupWithNeitherHostsNorHostsFileOrWithBothIsAnErrorAtItsKey) {
  Write("eu.yaml", "- 10.0.1.1\n");
  EXPECT_EQ(Errors(std::string(kHead) +
                   "host_groups:\n"
                   "  a:\n"
                   "    ssh: {user: bob}\n"
                   "  b:\n"
                   "    hosts: [10.0.2.1]\n"
                   "    hosts_file: eu.yaml\n"),
            (std::vector<std::string>{
                "job.yaml:4:3: host_groups.a: the group has no hosts; give 'hosts:' or 'hosts_file:'",
                "job.yaml:8:5: host_groups.b.hosts_file: give either 'hosts' or 'hosts_file', not both"}));
  EXPECT_EQ(Errors(std::string(kHead) + "host_groups:\n  a:\n    hosts: []\n"),
            std::vector<std::string>{"job.yaml:5:12: host_groups.a.hosts: no hosts; a host group needs at least one"});
  EXPECT_EQ(Errors(std::string(kHead) + "host_groups: {}\n"),
            std::vector<std::string>{
                "job.yaml:3:14: host_groups: expected a mapping of NAME: {hosts: [...] | hosts_file: PATH, ssh: "
                "{...}}, got an empty mapping"});
}

TEST_F(HostGroupsTest, AHostInTwoGroupsOrInAGroupAndTheJobsHostsIsAnErrorNamingBothPlaces) {
  Write("eu.yaml", "- 10.0.1.1\n- 10.0.2.1\n");
  EXPECT_EQ(Errors(std::string(kHead) +
                   "hosts: [10.0.0.1]\n"
                   "host_groups:\n"
                   "  us:\n"
                   "    hosts: [10.0.2.1, 10.0.0.1]\n"
                   "  eu:\n"
                   "    hosts_file: eu.yaml\n"),
            (std::vector<std::string>{
                "job.yaml:6:23: host_groups.us.hosts[1]: host '10.0.0.1' port 22 is in hosts already (job.yaml line "
                "3); a host belongs to one pool",
                "eu.yaml:2:3: host_groups.eu.hosts[1]: host '10.0.2.1' port 22 is in group 'us' already (job.yaml "
                "line 6); a host belongs to one pool"}));
  // The same address on another port (the group's ssh.port) is another host.
  LoadedJob other_port = Parse(std::string(kHead) +
                               "host_groups:\n"
                               "  a: {hosts: [10.0.2.1]}\n"
                               "  b: {hosts: [10.0.2.1], ssh: {port: 2200}}\n");
  for (const JobFileError& e : other_port.errors) ADD_FAILURE() << e.ToString();
}

TEST_F(HostGroupsTest, AGroupTooSmallForOneMembersRolesOrHostsPerMemberIsAnError) {
  EXPECT_EQ(Errors(std::string(kHead) +
                   "hosts: [10.0.0.1, 10.0.0.2, 10.0.0.3]\n"
                   "roles: {worker: {count: 2}}\n"
                   "host_groups:\n"
                   "  small:\n"
                   "    hosts: [10.0.2.1, {address: 10.0.2.2}]\n"
                   "  big:\n"
                   "    hosts: [{address: 10.0.3.1, nodes: 3}]\n"),
            std::vector<std::string>{
                "job.yaml:6:3: host_groups.small: group 'small' provides 2 node(s), but a member's head and 2 "
                "worker(s) need 3 (add hosts to the group, or raise a host's 'nodes:')"});
  EXPECT_EQ(Errors(std::string(kHead) +
                   "hosts: [10.0.0.1, 10.0.0.2]\n"
                   "hosts_per_member: 2\n"
                   "host_groups:\n"
                   "  one: {hosts: [10.0.2.1]}\n"),
            std::vector<std::string>{
                "job.yaml:6:3: host_groups.one: group 'one' has 1 host(s), but each member takes hosts_per_member: 2"});
}

TEST_F(HostGroupsTest, BadNamesUnknownKeysTheLocalEngineAndBadSshKeysAreErrorsAtTheirKeys) {
  EXPECT_EQ(Errors(std::string(kHead) +
                   "host_groups:\n"
                   "  -eu: {hosts: [10.0.1.1]}\n"
                   "  us: {hosts: [local], ssh: {proxy_jump: 'a b'}}\n"
                   "  ap: {hosts: [10.0.3.1], hots_file: x}\n"),
            (std::vector<std::string>{
                "job.yaml:4:3: host_groups.-eu: invalid group name '-eu' (letters, digits, '_', '.', '-'; starting "
                "with a letter or digit; at most 63)",
                "job.yaml:5:16: host_groups.us.hosts[0]: the local engine cannot be in a host group (rows without a "
                "host_group use the job's own hosts)",
                "job.yaml:5:42: host_groups.us.ssh.proxy_jump: jump host 'a b': invalid host address 'a b': a space "
                "is not allowed in a host name",
                "job.yaml:6:27: host_groups.ap.hots_file: unknown key; did you mean 'hosts_file'?"}));
}

TEST_F(HostGroupsTest, TheSchemaListsHostGroupsWithTheKeysOfAGroup) {
  std::vector<KeyInfo> keys = JobFileKeys();
  auto it = std::find_if(keys.begin(), keys.end(), [](const KeyInfo& k) { return k.key == "host_groups"; });
  ASSERT_NE(it, keys.end());
  EXPECT_EQ(it->doc.type, KeyType::kBlockMap);
  ASSERT_NE(it->doc.keys, nullptr);
  std::vector<std::string> names;
  for (const KeyInfo& k : it->doc.keys()) names.emplace_back(k.key);
  EXPECT_EQ(names, (std::vector<std::string>{"hosts", "hosts_file", "ssh"}));
}

}  // namespace
}  // namespace barge::runner
