#include "cluster/mpi.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "base/shell_word.h"

#include <map>

#include "cluster/plan.h"

namespace barge::cluster {
namespace {

std::map<std::string, std::string> EnvOf(const NodePlan& n) {
  return {n.container.env.begin(), n.container.env.end()};
}

Host MakeHost(const std::string& address, int nodes = 1) {
  Host h;
  h.address = address;
  h.nodes = nodes;
  return h;
}

PlanInput MpiJob() {
  PlanInput in;
  in.job_id = "a1b2c3d4";
  in.job_name = "allreduce";
  in.image = "barge/mpi:local";
  in.command = std::vector<std::string>{"mpirun", "-np", "3", "python3", "allreduce.py"};
  in.container.network = "host";
  in.hosts = {MakeHost("10.77.0.1"), MakeHost("10.77.0.2"), MakeHost("10.77.0.3")};
  MpiOptions mpi;
  mpi.files_dir = "/tmp/barge-a1b2c3d4/mpi";
  in.mpi = mpi;
  return in;
}

TEST(MpiPlan, WorkersStartFirstGatedByTheirSshdThenTheHead) {
  Result<Plan> plan = MakePlan(MpiJob());
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_EQ(plan->stages.size(), 2u);
  EXPECT_EQ(plan->stages[0].name, "workers");
  EXPECT_EQ(plan->stages[0].ranks, (std::vector<int>{1, 2}));
  EXPECT_EQ(plan->stages[0].gate.kind, ReadinessProbe::Kind::kCommand);
  EXPECT_EQ(plan->stages[0].gate.command, MpiReadyCommand());
  EXPECT_EQ(plan->stages[1].name, "head");
  EXPECT_EQ(plan->stages[1].ranks, std::vector<int>{0});
}

TEST(MpiPlan, TheHeadRunsTheCommandAndWorkersRunOnlyTheImagesSshd) {
  Result<Plan> plan = MakePlan(MpiJob());
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->nodes[0].container.command->front(), "mpirun");
  const container::ContainerSpec& w = plan->nodes[1].container;
  ASSERT_TRUE(w.options.run_options);
  EXPECT_EQ((*w.options.run_options)[0], "--entrypoint");
  EXPECT_EQ((*w.options.run_options)[1], "/bin/sh");
  ASSERT_TRUE(w.command);
  ASSERT_EQ(w.command->size(), 2u);
  EXPECT_EQ((*w.command)[0], "-c");
  const std::string& script = (*w.command)[1];
  EXPECT_NE(script.find("exec /usr/sbin/sshd -D -e"), std::string::npos) << script;
  EXPECT_NE(script.find("-p 2222 -o ListenAddress=10.77.0.2"), std::string::npos) << script;
  EXPECT_NE(script.find("-o UsePAM=no"), std::string::npos);
  EXPECT_NE(script.find("-h /run/barge/ssh_host_ed25519_key"), std::string::npos);
  EXPECT_NE(script.find("-o AuthorizedKeysFile=/run/barge/authorized_keys"), std::string::npos);
  EXPECT_NE(script.find("PasswordAuthentication=no"), std::string::npos);
  EXPECT_NE(script.find("openssh-server"), std::string::npos);
}

TEST(MpiPlan, AWorkerChecksTheSshdUserAndMakesRunSshdOnlyWhenItRunsAsRoot) {
  // A non-root sshd has no privilege separation: it needs neither.
  const std::string script = MpiWorkerCommand(MpiNode{1, "10.77.0.2", 2222, "10.77.0.2", "1"})[1];
  const size_t root = script.find("if [ \"$(id -u)\" = 0 ]; then\n");
  const size_t user = script.find("while IFS=: read -r n _; do [ \"$n\" = sshd ] && u=1; done < /etc/passwd");
  const size_t dir = script.find("mkdir -p /run/sshd");
  const size_t end = script.find("fi\n", dir);
  ASSERT_NE(root, std::string::npos) << script;
  ASSERT_NE(user, std::string::npos) << script;
  ASSERT_NE(dir, std::string::npos) << script;
  ASSERT_NE(end, std::string::npos) << script;
  EXPECT_LT(root, user);
  EXPECT_LT(user, dir);
  EXPECT_LT(end, script.find("exec /usr/sbin/sshd")) << "sshd starts whatever the uid";
}

// A minimal image (cut from a package closure) may lack grep, cut, even
// sed: the worker's start uses none it does not name, and names the first
// one missing instead of blaming the sshd user.
TEST(MpiPlan, AWorkersStartNeedsNoGrepOrCutAndNamesAMissingTool) {
  const std::string script = MpiWorkerCommand(MpiNode{1, "10.77.0.2", 2222, "10.77.0.2", "1"})[1];
  EXPECT_EQ(script.find("grep"), std::string::npos) << script;
  EXPECT_EQ(script.find("cut "), std::string::npos) << script;
  EXPECT_EQ(MpiReadyCommand().find("grep"), std::string::npos) << MpiReadyCommand();
  EXPECT_EQ(MpiReadyCommand().find("cut "), std::string::npos) << MpiReadyCommand();
  // Under a PATH with no tools at all (the shell's built-ins remain).
  const std::string out = "/tmp/barge-mpi-tool-test-" + std::to_string(getpid());
  const std::string line = "PATH=/nonexistent /bin/sh -c " + ShellWord(script) + " 2>" + out;
  const int status = std::system(line.c_str());
  std::ifstream in(out);
  std::string said((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::remove(out.c_str());
  EXPECT_EQ(WEXITSTATUS(status), 127);
  EXPECT_NE(said.find("barge: this image has no 'id', which the MPI worker's start needs"), std::string::npos)
      << said;
  EXPECT_EQ(said.find("sshd' user"), std::string::npos) << said;
}

// The readiness gate, run by a real shell against a stand-in ssh-keyscan:
// ready when the scan shows the node's host key, not otherwise.
TEST(MpiPlan, TheReadinessGateMatchesTheHostKeyWithShellBuiltinsOnly) {
  const std::string dir = "/tmp/barge-mpi-gate-test-" + std::to_string(getpid());
  std::string cmd = MpiReadyCommand();
  const std::string key = std::string(kMpiHostKey) + ".pub";
  for (size_t at = cmd.find(key); at != std::string::npos; at = cmd.find(key, at + 1)) {
    cmd.replace(at, key.size(), dir + "/key.pub");
  }
  ASSERT_EQ(std::system(("mkdir -p " + dir + "/bin && echo 'ssh-ed25519 AAAAKEY1 root@x' > " + dir +
                         "/key.pub && printf '#!/bin/sh\\necho \"10.0.0.1 ssh-ed25519 $SCAN\"\\n' > " + dir +
                         "/bin/ssh-keyscan && chmod +x " + dir + "/bin/ssh-keyscan")
                            .c_str()),
            0);
  auto run = [&](const std::string& scan) {
    const std::string line = "SCAN=" + scan + " PATH=" + dir + "/bin /bin/sh -c " + ShellWord(cmd);
    return WEXITSTATUS(std::system(line.c_str()));
  };
  EXPECT_EQ(run("AAAAKEY1"), 0);
  EXPECT_NE(run("AAAAOTHER"), 0);
  std::system(("rm -rf " + dir).c_str());
}

TEST(MpiPlan, EveryNodeMountsItsOwnDirectoryReadOnlyAtRunBarge) {
  Result<Plan> plan = MakePlan(MpiJob());
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  for (const NodePlan& n : plan->nodes) {
    ASSERT_TRUE(n.container.options.volumes);
    EXPECT_EQ(n.container.options.volumes->back(),
              "/tmp/barge-a1b2c3d4/mpi/" + std::to_string(n.rank) + ":/run/barge:ro");
  }
}

TEST(MpiPlan, TheHeadGetsHostfileHorovodHostsAndTheSshConfigForMpirun) {
  Result<Plan> plan = MakePlan(MpiJob());
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  auto env = EnvOf(plan->nodes[0]);
  EXPECT_EQ(env["BARGE_MPI_HOSTFILE"], "/run/barge/hostfile");
  EXPECT_EQ(env["DSTACK_MPI_HOSTFILE"], "/run/barge/hostfile");
  EXPECT_EQ(env["BARGE_HOROVOD_HOSTS"], "10.77.0.1:1,10.77.0.2:1,10.77.0.3:1");
  EXPECT_EQ(env["OMPI_MCA_plm_rsh_args"], "-F /run/barge/ssh_config");
  EXPECT_EQ(env["OMPI_MCA_btl_tcp_if_include"], "10.77.0.0/30");
  EXPECT_EQ(env["OMPI_MCA_oob_tcp_if_include"], "10.77.0.0/30");
  EXPECT_EQ(env["OMPI_MCA_btl_vader_single_copy_mechanism"], "none");
  EXPECT_EQ(env["OMPI_ALLOW_RUN_AS_ROOT"], "1");
  EXPECT_EQ(env["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"], "1");
  EXPECT_EQ(EnvOf(plan->nodes[2])["BARGE_MPI_SSHD_PORT"], "2222");
  EXPECT_EQ(EnvOf(plan->nodes[2])["BARGE_MPI_SSHD_ADDR"], "10.77.0.3");
}

TEST(MpiPlan, TheUsersEnvOverridesAnMpiVariable) {
  PlanInput in = MpiJob();
  in.container.env = container::KeyValues{{"OMPI_MCA_btl_tcp_if_include", "eth0"}};
  Result<Plan> plan = MakePlan(in);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(EnvOf(plan->nodes[0])["OMPI_MCA_btl_tcp_if_include"], "eth0");
}

TEST(MpiPlan, SlotsComeFromSlotsPerNodeElseTheHostsGpusElseOne) {
  PlanInput in = MpiJob();
  in.hosts[1].gpus = 8;
  Result<Plan> plan = MakePlan(in);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(MpiHostfile(plan->mpi_nodes), "10.77.0.1 slots=1\n10.77.0.2 slots=8\n10.77.0.3 slots=1\n");
  in.mpi->slots_per_node = 4;
  plan = MakePlan(in);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(HorovodHosts(plan->mpi_nodes), "10.77.0.1:4,10.77.0.2:4,10.77.0.3:4");
}

TEST(MpiPlan, SlotsOfAHostWhoseGpusOnlyTheLiveHostKnowsAreAPlaceholder) {
  PlanInput in = MpiJob();
  in.container.gpus = "all";
  Result<Plan> plan = MakePlan(in);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_TRUE(plan->has_placeholders);
  EXPECT_EQ(plan->mpi_nodes[1].slots, "<gpus of 10.77.0.2>");
  in.detected_gpus = {{0, 2}, {1, 2}, {2, 2}};
  plan = MakePlan(in);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->mpi_nodes[1].slots, "2");
}

TEST(MpiPlan, NodesSharingAHostGetPortsOfTheirOwnAndAnAliasEach) {
  PlanInput in = MpiJob();
  in.hosts = {MakeHost("10.77.0.1"), MakeHost("10.77.0.2", 2)};
  Result<Plan> plan = MakePlan(in);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_EQ(plan->mpi_nodes.size(), 3u);
  EXPECT_EQ(plan->mpi_nodes[0].name, "10.77.0.1");
  EXPECT_EQ(plan->mpi_nodes[1].name, "barge-rank-1");
  EXPECT_EQ(plan->mpi_nodes[1].port, 2222);
  EXPECT_EQ(plan->mpi_nodes[2].name, "barge-rank-2");
  EXPECT_EQ(plan->mpi_nodes[2].port, 2223);
  const std::string config = MpiSshConfig(plan->mpi_nodes);
  EXPECT_NE(config.find("Host barge-rank-2\n  HostName 10.77.0.2\n  Port 2223\n"), std::string::npos)
      << config;
  const std::string known = MpiKnownHosts(plan->mpi_nodes, {{1, "ssh-ed25519 AAAA1"}, {2, "ssh-ed25519 AAAA2"}});
  EXPECT_EQ(known, "[10.77.0.2]:2222 ssh-ed25519 AAAA1\n[10.77.0.2]:2223 ssh-ed25519 AAAA2\n");
}

TEST(MpiFiles, TheClientConfigChecksHostKeysStrictlyAgainstOnlyTheJobsKnownHosts) {
  Result<Plan> plan = MakePlan(MpiJob());
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  const std::string config = MpiSshConfig(plan->mpi_nodes);
  EXPECT_NE(config.find("Host 10.77.0.2\n  HostName 10.77.0.2\n  Port 2222\n"), std::string::npos);
  EXPECT_EQ(config.find("Host 10.77.0.1\n"), std::string::npos) << "the head is not reached over ssh";
  EXPECT_NE(config.find("StrictHostKeyChecking yes"), std::string::npos);
  EXPECT_NE(config.find("UserKnownHostsFile /run/barge/known_hosts"), std::string::npos);
  EXPECT_NE(config.find("GlobalKnownHostsFile /dev/null"), std::string::npos);
  EXPECT_NE(config.find("BatchMode yes"), std::string::npos);
  EXPECT_NE(config.find("IdentityFile /run/barge/id_ed25519"), std::string::npos);
  // Host-specific blocks come before `Host *` (ssh takes the first value).
  EXPECT_LT(config.find("Host 10.77.0.3"), config.find("Host *"));
}

TEST(MpiFiles, KnownHostsLeavesOutAWorkerWithoutAKeyAndThePortForPort22) {
  std::vector<MpiNode> nodes = {{0, "10.0.0.1", 2222, "10.0.0.1", "1"},
                                {1, "10.0.0.2", 22, "10.0.0.2", "1"},
                                {2, "10.0.0.3", 2222, "10.0.0.3", "1"}};
  EXPECT_EQ(MpiKnownHosts(nodes, {{1, "ssh-ed25519 K1"}}), "10.0.0.2 ssh-ed25519 K1\n");
}

TEST(MpiFiles, CoveringCidrIsTheSmallestNetworkHoldingEveryAddress) {
  EXPECT_EQ(CoveringCidr({"10.77.0.1"}), "10.77.0.1/32");
  EXPECT_EQ(CoveringCidr({"10.77.0.1", "10.77.0.2", "10.77.0.3"}), "10.77.0.0/30");
  EXPECT_EQ(CoveringCidr({"10.0.0.5", "10.0.1.5"}), "10.0.0.0/23");
  EXPECT_EQ(CoveringCidr({"10.0.0.1", "192.168.0.1"}), "0.0.0.0/0");
  EXPECT_EQ(CoveringCidr({"10.0.0.1", "node-b"}), std::nullopt);
  EXPECT_EQ(CoveringCidr({}), std::nullopt);
}

TEST(MpiPlan, AJobWithoutMpiKeepsHeadThenWorkersAndNoMpiVariables) {
  PlanInput in = MpiJob();
  in.mpi.reset();
  Result<Plan> plan = MakePlan(in);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->stages[0].name, "head");
  EXPECT_TRUE(plan->mpi_nodes.empty());
  EXPECT_FALSE(EnvOf(plan->nodes[0]).contains("BARGE_MPI_HOSTFILE"));
}

}  // namespace
}  // namespace barge::cluster
