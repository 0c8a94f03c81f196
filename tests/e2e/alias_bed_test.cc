// Hosts named by their ssh config alias, on the test bed, through the real
// CLI: every node is told IP addresses (never an alias), the workers reach
// the head at $MASTER_ADDR, and every place that names a host keeps the
// user's name. The ssh config is a realistic one (an Include of a config.d
// file defining the aliases, one behind ProxyJump, plus ControlMaster,
// HashKnownHosts with a hashed known_hosts, Match exec and IgnoreUnknown),
// given through ssh.config_file.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "runner/store/job_store.h"
#include "ssh/quote.h"
#include "tests/support/bed_env.h"
#include "tests/support/bed_job.h"

namespace fs = std::filesystem;
using barge::ssh::ShellQuote;
using barge::testing::CliOutcome;
using barge::testing::GetBed;
using barge::testing::JobContainers;
using barge::testing::JobDir;
using barge::testing::JobIdIn;
using barge::testing::ReadWholeFile;
using barge::testing::RunShell;

namespace {

const barge::testing::BedHost& BedHostNamed(const std::string& name) {
  for (const auto& h : GetBed().hosts) {
    if (h.name == name) return h;
  }
  ADD_FAILURE() << "the bed has no host " << name;
  static barge::testing::BedHost none;
  return none;
}

class AliasTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto& bed = GetBed();
    ASSERT_GE(bed.hosts.size(), 3u) << "the bed needs 3 namespace hosts";
    ASSERT_FALSE(bed.jump_target.address.empty())
        << "the bed has no jump target (tests/bed/bed.sh _jump_target adds it)";
    ASSERT_EQ(bed.jump_via, "h2");
    const fs::path d = dir_.path();
    fs::create_directories(d / "config.d");
    // known_hosts hashed as HashKnownHosts writes it (ssh-keygen -H).
    fs::copy_file(bed.known_hosts, d / "known_hosts");
    int code = -1;
    std::string out = RunShell("ssh-keygen -q -H -f " + ShellQuote((d / "known_hosts").string()) +
                                   " 2>&1 && rm -f " + ShellQuote((d / "known_hosts.old").string()),
                               &code);
    ASSERT_EQ(code, 0) << out;
    ASSERT_EQ(ReadWholeFile(d / "known_hosts").find(BedHostNamed("h1").address), std::string::npos)
        << "known_hosts is not hashed";
    std::ofstream(d / "ssh_config")
        << "IgnoreUnknown UseKeychain,AddKeysToAgent\n"
           "UseKeychain yes\n"
           "Include " << (d / "config.d").string() << "/*.conf\n"
           "Host *\n"
           "  ControlMaster auto\n"
           "  ControlPath " << (d / "cm-%C").string() << "\n"
           "  ControlPersist 10s\n"
           "  HashKnownHosts yes\n"
           "  UserKnownHostsFile " << (d / "known_hosts").string() << "\n"
           "  ServerAliveInterval 30\n"
           "Match host gpu-* exec \"test -r " << bed.key << "\"\n"
           "  IdentitiesOnly yes\n";
    std::ofstream(d / "config.d" / "lab.conf")
        << "Host gpu-1\n  HostName " << BedHostNamed("h1").address << "\n"
        << "Host gpu-2\n  HostName " << BedHostNamed("h2").address << "\n"
        << "Host gpu-3\n  HostName " << bed.jump_target.address << "\n  Port "
        << bed.jump_target.port << "\n  ProxyJump gpu-2\n"
        << "Host bedlo\n  HostName " << bed.loopback.address << "\n  Port " << bed.loopback.port
        << "\n"
        << "Host gpu-* bedlo\n  User " << bed.user << "\n  IdentityFile " << bed.key << "\n";
  }
  void TearDown() override {
    for (const auto* h : {&GetBed().loopback, &GetBed().hosts[0], &GetBed().hosts[1],
                          &GetBed().hosts[2]}) {
      if (!job_id_.empty()) {
        RunShell("DOCKER_HOST=" + h->docker_host + " docker ps -aq --filter label=barge.job=" +
                 job_id_ + " | DOCKER_HOST=" + h->docker_host +
                 " xargs -r docker rm -f >/dev/null 2>&1");
      }
    }
  }

  // hosts: of `aliases` and the ssh: block naming the config file only.
  std::string Hosts(const std::vector<std::string>& aliases) const {
    std::string y = "hosts:\n";
    for (const auto& a : aliases) y += "  - address: " + a + "\n";
    return y + "ssh:\n  config_file: " + (dir_.path() / "ssh_config").string() +
           "\n  connect_timeout: 10s\n";
  }

  CliOutcome Run(const std::string& yaml) {
    dir_.Write(yaml);
    CliOutcome o = dir_.Barge("run job.yaml");
    job_id_ = JobIdIn(o.err);
    return o;
  }

  JobDir dir_{"alias"};
  std::string job_id_;
};

// A head that listens on the rendezvous port and prints what each worker
// sends it, and workers that connect to $MASTER_ADDR:$MASTER_PORT. A port of
// its own, and only the workers' messages count (the bed is shared: another
// job's stray client, or barge's readiness probe, may knock). The head
// answers "ack" once it has read a message, and a worker sends until it
// reads that answer: a plain `nc -l` serves one client, and a second one
// that connected meanwhile can be dropped after its nc exited 0 (seen in CI:
// the head then waited forever). The timeout bounds the job if it still goes
// wrong.
const char kRendezvousJob[] =
    "container: {network: host}\n"
    "stop_grace: 2s\n"
    "timeout: 90s\n"
    "rendezvous: {port: 29611}\n"
    "roles:\n"
    "  head:\n"
    "    ready: {tcp_port: 29611, timeout: 30s}\n"
    "    command:\n"
    "      - sh\n"
    "      - -c\n"
    "      - |\n"
    "        echo env MASTER_ADDR=$MASTER_ADDR BARGE_HEAD_ADDR=$BARGE_HEAD_ADDR "
    "BARGE_NODE_IPS=$BARGE_NODE_IPS SM_HOSTS=$SM_HOSTS SKYPILOT_NODE_IPS=$(echo $SKYPILOT_NODE_IPS)\n"
    "        nc -ll -p $MASTER_PORT -e sh -c 'read m; echo \"$m\" >> /tmp/got; echo ack' &\n"
    "        while [ $(sort -u /tmp/got 2>/dev/null | grep -c ^got) -lt 2 ]; do sleep 0.2; done\n"
    "        sort -u /tmp/got | grep ^got\n"
    "        echo head done\n"
    "  worker:\n"
    "    command: [\"sh\", \"-c\", \"until [ \\\"$(echo \\\"got $RANK from $(hostname) as $SM_CURRENT_HOST\\\" | "
    "nc $MASTER_ADDR $MASTER_PORT)\\\" = ack ]; do sleep 0.2; done\"]\n";

TEST_F(AliasTest, AThreeNodeJobOnAliasesOneBehindAJumpHostToldOnlyIpAddressesCompletes) {
  const auto& bed = GetBed();
  const std::string h1 = BedHostNamed("h1").address, h2 = BedHostNamed("h2").address;
  const std::string h3 = bed.jump_target.address;
  CliOutcome o = Run("name: aliases\nimage: " + bed.image + "\n" +
                     Hosts({"gpu-1", "gpu-2", "gpu-3"}) + kRendezvousJob);
  ASSERT_EQ(o.code, 0) << o.err << o.out;
  // Every convention carries the addresses, none an alias.
  EXPECT_NE(o.out.find("[0 head gpu-1] env MASTER_ADDR=" + h1 + " BARGE_HEAD_ADDR=" + h1 +
                       " BARGE_NODE_IPS=" + h1 + "," + h2 + "," + h3 + " SM_HOSTS=[\"" + h1 +
                       "\",\"" + h2 + "\",\"" + h3 + "\"] SKYPILOT_NODE_IPS=" + h1 + " " + h2 +
                       " " + h3 + "\n"),
            std::string::npos)
      << o.out;
  // The workers reached the head at $MASTER_ADDR, gpu-3 from behind gpu-2.
  EXPECT_NE(o.out.find("[0 head gpu-1] got 1 from h2 as " + h2 + "\n"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("[0 head gpu-1] got 2 from h3 as " + h3 + "\n"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("[0 head gpu-1] head done"), std::string::npos) << o.out;
  // barge says which address each alias got, and how.
  EXPECT_NE(o.err.find("gpu-1 is " + h1 + " (the address its SSH connection reached)"),
            std::string::npos)
      << o.err;
  EXPECT_NE(o.err.find("gpu-3 is " + h3 +
                       " (the address it was reached at through its jump host ($SSH_CONNECTION"),
            std::string::npos)
      << o.err;
  // The store keeps the user's name next to the address used.
  auto store = barge::runner::JobStore::Open((dir_.path() / "home").string());
  ASSERT_TRUE(store.ok()) << store.status().message();
  auto hosts = (*store)->GetHosts(job_id_);
  ASSERT_TRUE(hosts.ok()) << hosts.status().message();
  std::map<std::string, std::string> address_of;
  for (const auto& h : *hosts) address_of[h.name] = h.address;
  EXPECT_EQ(address_of, (std::map<std::string, std::string>{
                            {"gpu-1", h1}, {"gpu-2", h2}, {"gpu-3", h3}}));
  for (const auto& h : bed.hosts) EXPECT_EQ(JobContainers(h), "") << "left on " << h.name;
}

TEST_F(AliasTest, AnAliasReachedAtALoopbackAddressIsToldItsAddressTowardTheHead) {
  // bedlo is this machine's own sshd at 127.0.0.2: the other hosts cannot
  // use that, so barge asks it for its source address toward gpu-1.
  const auto& bed = GetBed();
  const std::string h1 = BedHostNamed("h1").address;
  CliOutcome o = Run("name: aliaslo\nimage: " + bed.image + "\n" + Hosts({"gpu-1", "bedlo"}) +
                     "container: {network: host}\nstop_grace: 2s\n"
                     "command: [\"sh\", \"-c\", \"echo ips $BARGE_NODE_IPS\"]\n");
  ASSERT_EQ(o.code, 0) << o.err << o.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(o.out, m, std::regex("\\[0 head gpu-1\\] ips ([0-9.]+),([0-9.]+)\n")))
      << o.out;
  EXPECT_EQ(m[1].str(), h1);
  EXPECT_EQ(m[2].str(), bed.raw.at("BED_GATEWAY")) << "bedlo's address on the bed's bridge";
  EXPECT_NE(o.err.find("bedlo is " + bed.raw.at("BED_GATEWAY") + " (its source address toward " +
                       h1 + " (`ip route get` on it; it was reached at " + bed.loopback.address),
            std::string::npos)
      << o.err;
  EXPECT_EQ(JobContainers(bed.loopback), "");
}

TEST_F(AliasTest, ThePyTorchGlooSampleRunsOnAliases) {
  const auto& bed = GetBed();
  ASSERT_EQ(bed.raw.count("BED_TORCH_IMAGE"), 1u) << "bring the bed up with BARGE_BED_TORCH=1";
  // The sample as shipped, with its hosts: and ssh: blocks replaced by
  // aliases and the config file.
  std::string yaml = ReadWholeFile(fs::path(BARGE_SOURCE_DIR) / "samples" / "torch-ddp.yaml");
  ASSERT_NE(yaml, "");
  const std::regex blocks("hosts:\n(  - .*\n)+ssh:\n(  .*\n)+");
  ASSERT_TRUE(std::regex_search(yaml, blocks)) << yaml;
  yaml = std::regex_replace(yaml, blocks, Hosts({"gpu-1", "gpu-2", "gpu-3"}));
  CliOutcome o = Run(yaml);
  EXPECT_EQ(o.code, 0) << o.err << o.out;
  for (int rank = 0; rank < 3; ++rank) {
    const std::string want = "[" + std::to_string(rank) + (rank == 0 ? " head" : " worker") +
                             " gpu-" + std::to_string(rank + 1) + "] rank " +
                             std::to_string(rank) + "/3 on h" + std::to_string(rank + 1) +
                             ": all_reduce sum = 3";
    EXPECT_NE(o.out.find(want), std::string::npos) << "missing: " << want << "\n" << o.out << o.err;
  }
}

TEST_F(AliasTest, CtrlCAtTheTerminalRemovesTheContainerBehindTheJumpHostBeforeBargeExits) {
  // Ctrl-C signals the terminal's whole foreground process group: barge and,
  // unless barge keeps it apart, the ssh process carrying gpu-3's tunnel.
  const auto& bed = GetBed();
  dir_.Write("name: aliasint\nimage: " + bed.image + "\n" + Hosts({"gpu-1", "gpu-3"}) +
             "stop_grace: 1s\ncommand: [\"sleep\", \"600\"]\n");
  const pid_t pid = dir_.Start("run job.yaml", /*own_group=*/true);
  ASSERT_TRUE(dir_.WaitFor("err.txt", "starting workers: done")) << ReadWholeFile(dir_.path() / "err.txt");
  job_id_ = JobIdIn(ReadWholeFile(dir_.path() / "err.txt"));
  ASSERT_NE(job_id_, "");
  ASSERT_EQ(kill(-pid, SIGINT), 0);
  CliOutcome o = dir_.Wait(pid, std::chrono::seconds(60));
  EXPECT_EQ(o.code, 130) << o.err;
  EXPECT_EQ(o.err.find("FAILED"), std::string::npos) << o.err;
  // Right as barge exits, not when gpu-3's watchdog lease runs out.
  EXPECT_EQ(RunShell("DOCKER_HOST=" + BedHostNamed("h3").docker_host +
                     " docker ps -aq --filter label=barge.job=" + job_id_),
            "")
      << o.err;
}

TEST_F(AliasTest, ThePlanShowsEachAliasesHostNameAndSaysTheAddressIsSettledAtRunTime) {
  const auto& bed = GetBed();
  const std::string h1 = BedHostNamed("h1").address, h2 = BedHostNamed("h2").address;
  const std::string h3 = bed.jump_target.address;
  dir_.Write("name: aliasplan\nimage: " + bed.image + "\n" + Hosts({"gpu-1", "gpu-2", "gpu-3"}) +
             kRendezvousJob);
  CliOutcome o = dir_.Barge("plan job.yaml");
  ASSERT_EQ(o.code, 0) << o.err << o.out;
  const std::string config = (dir_.path() / "ssh_config").string();
  EXPECT_NE(o.out.find("## host gpu-1: ssh gpu-1 "), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("# internal address: " + h1 +
                       ", the HostName of ssh config alias gpu-1 in " + config +
                       "; settled at run time: the address its SSH connection reaches\n"),
            std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("# internal address: " + h3 + ", the HostName of ssh config alias gpu-3 in " +
                       config +
                       "; settled at run time: the address the host says it was reached at "
                       "through ProxyJump gpu-2 ($SSH_CONNECTION on it)\n"),
            std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("-e MASTER_ADDR=" + h1 + " "), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("-e BARGE_NODE_IPS=" + h1 + "," + h2 + "," + h3 + " "), std::string::npos)
      << o.out;
  EXPECT_EQ(o.out.find("=gpu-"), std::string::npos) << "an alias in the env:\n" << o.out;
  EXPECT_EQ(o.out.find("\"gpu-"), std::string::npos) << "an alias in the env:\n" << o.out;
}

}  // namespace
