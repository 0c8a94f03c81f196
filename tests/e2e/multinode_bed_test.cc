// Head/worker jobs across the test bed's namespace hosts, each with its own
// address, sshd and dockerd, through the real CLI.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sstream>

#include "ssh/quote.h"
#include "tests/support/bed_env.h"
#include "tests/support/bed_job.h"
#include "tests/support/raw_sql.h"
#include "tests/support/sleeper.h"

namespace fs = std::filesystem;
using barge::ssh::ShellQuote;
using barge::testing::BedHost;
using barge::testing::CliOutcome;
using barge::testing::GetBed;
using barge::testing::InHost;
using barge::testing::JobContainers;
using barge::testing::JobIdIn;
using barge::testing::WaitForNoWatchdog;
using barge::testing::WatchdogPids;
using barge::testing::OnHost;
using barge::testing::ReadWholeFile;
using barge::testing::RunShell;
using barge::testing::RawExec;
using barge::testing::Sleeper;

namespace {

class MultiNodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_GE(GetBed().hosts.size(), 3u) << "the bed needs 3 namespace hosts";
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("barge-multi-" + std::string(info->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "home");
  }
  void TearDown() override {
    for (const auto& h : GetBed().hosts) {
      EXPECT_EQ(JobContainers(h), "") << "a container was left on " << h.name;
      RunShell("DOCKER_HOST=" + h.docker_host +
               " docker ps -aq --filter label=barge.job | DOCKER_HOST=" + h.docker_host +
               " xargs -r docker rm -f >/dev/null 2>&1");
    }
    fs::remove_all(dir_);
  }

  // hosts: + ssh: blocks for the first `n` namespace hosts.
  std::string Hosts(size_t n, const std::string& extra_per_host = "") const {
    const auto& bed = GetBed();
    std::ostringstream y;
    y << "hosts:\n";
    for (size_t i = 0; i < n; ++i) {
      y << "  - address: " << bed.hosts[i].address << "\n" << extra_per_host;
    }
    y << "ssh:\n  user: " << bed.user << "\n  identity_file: " << bed.key
      << "\n  known_hosts: " << bed.known_hosts << "\n  connect_timeout: 10s\n";
    return y.str();
  }

  CliOutcome Barge(const std::string& yaml) {
    std::ofstream(dir_ / "job.yaml") << yaml;
    CliOutcome o;
    RunShell("cd " + ShellQuote(dir_.string()) + " && BARGE_HOME=home " + BARGE_BINARY +
                 " run job.yaml >out.txt 2>err.txt </dev/null",
             &o.code);
    o.out = ReadWholeFile(dir_ / "out.txt");
    o.err = ReadWholeFile(dir_ / "err.txt");
    return o;
  }

  // Starts `barge run job.yaml` in dir_ (stdout and stderr to out.txt and
  // err.txt) and waits until the head and worker 1 have printed a line;
  // returns its pid.
  pid_t StartUntilUp() {
    const std::string cmd = "cd " + ShellQuote(dir_.string()) + " && BARGE_HOME=home exec " + BARGE_BINARY +
                            " run job.yaml >out.txt 2>err.txt </dev/null";
    pid_t pid = fork();
    if (pid == 0) {
      execl("/bin/sh", "sh", "-c", cmd.c_str(), nullptr);
      _exit(127);
    }
    auto up = [&] {
      std::string out = ReadWholeFile(dir_ / "out.txt");
      return out.find("[0 head") != std::string::npos && out.find("[1 worker") != std::string::npos;
    };
    for (int i = 0; i < 300 && !up(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_TRUE(up()) << ReadWholeFile(dir_ / "err.txt");
    return pid;
  }

  fs::path dir_;
};

double Number(const std::string& text, const std::string& regex) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex(regex))) return -1;
  return std::stod(m[1].str());
}

TEST_F(MultiNodeTest, HostNetworkNodesAreToldTheInterfaceThatCarriesTheirHostsAddressForNcclAndGloo) {
  const auto& bed = GetBed();
  CliOutcome o = Barge("name: ifname\nimage: " + bed.image + "\n" + Hosts(2) +
                       "container: {network: host}\nstop_grace: 2s\n"
                       "command: [\"sh\", \"-c\", \"echo nccl=$NCCL_SOCKET_IFNAME gloo=$GLOO_SOCKET_IFNAME\"]\n"
                       "on_worker_exit: ignore\n");
  ASSERT_EQ(o.code, 0) << o.err;
  for (size_t i = 0; i < 2; ++i) {
    const BedHost& h = bed.hosts[i];
    // What the host's own `ip` says carries its address.
    std::string iface = InHost(h, "ip -o -4 addr show | awk '$4 ~ /^" + h.address + "\\// {print $2}'");
    while (!iface.empty() && iface.back() == '\n') iface.pop_back();
    ASSERT_FALSE(iface.empty()) << h.name;
    const std::string role = i == 0 ? "head" : "worker";
    EXPECT_NE(o.out.find("[" + std::to_string(i) + " " + role + " " + h.address + "] nccl==" + iface + " gloo=" + iface),
              std::string::npos)
        << o.out;
  }
}

TEST_F(MultiNodeTest, WorkersStartOnlyOnceTheHeadsPortIsOpen) {
  const auto& bed = GetBed();
  CliOutcome o = Barge(
      "name: ready\nimage: " + bed.image + "\n" + Hosts(3) +
      "container: {network: host}\nstop_grace: 2s\n"
      "roles:\n"
      "  head:\n"
      "    ready: {tcp_port: 29500, timeout: 30s}\n"
      "    command: [\"sh\", \"-c\", \"sleep 2; echo opening at $(cut -d' ' -f1 /proc/uptime); "
      "nc -l -p 29500 >/dev/null & sleep 3; echo head done\"]\n"
      "  worker:\n"
      "    command: [\"sh\", \"-c\", \"echo started at $(cut -d' ' -f1 /proc/uptime) on $(hostname -i 2>/dev/null || hostname); "
      "trap 'exit 0' TERM; sleep 60 & wait\"]\n");
  ASSERT_EQ(o.code, 0) << o.err;
  double opened = Number(o.out, "opening at ([0-9.]+)");
  double w1 = Number(o.out, "\\[1 worker [0-9.]+\\] started at ([0-9.]+)");
  double w2 = Number(o.out, "\\[2 worker [0-9.]+\\] started at ([0-9.]+)");
  ASSERT_GT(opened, 0) << o.out;
  ASSERT_GT(w1, 0) << o.out;
  ASSERT_GT(w2, 0) << o.out;
  EXPECT_GE(w1, opened) << o.out;
  EXPECT_GE(w2, opened) << o.out;
  EXPECT_NE(o.out.find("[0 head " + bed.hosts[0].address + "] head done"), std::string::npos) << o.out;
}

TEST_F(MultiNodeTest, AReadinessTimeoutFailsWithTheHeadsLastLinesAndLeavesNothing) {
  const auto& bed = GetBed();
  CliOutcome o = Barge("name: notready\nimage: " + bed.image + "\n" + Hosts(2) +
                    "stop_grace: 1s\n"
                    "roles:\n"
                    "  head:\n"
                    "    ready: {tcp_port: 29501, timeout: 3s}\n"
                    "    command: [\"sh\", \"-c\", \"echo still warming up; sleep 60\"]\n"
                    "  worker:\n"
                    "    command: [\"sh\", \"-c\", \"echo worker ran\"]\n");
  EXPECT_EQ(o.code, 125);
  EXPECT_NE(o.err.find("not ready after 3"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("| still warming up"), std::string::npos) << o.err;
  EXPECT_EQ(o.out.find("worker ran"), std::string::npos) << o.out;
}

TEST_F(MultiNodeTest, AWorkerThatFailsEarlyFailsTheJobAndEverythingIsRemoved) {
  const auto& bed = GetBed();
  CliOutcome o = Barge("name: workerfail\nimage: " + bed.image + "\n" + Hosts(3) +
                    "stop_grace: 1s\non_worker_exit: fail\n"
                    "command: [\"sh\", \"-c\", \"if [ $RANK = 2 ]; then echo bye; exit 4; fi; "
                    "trap 'exit 0' TERM; sleep 60 & wait\"]\n");
  EXPECT_EQ(o.code, 125) << o.err;
  EXPECT_NE(o.err.find("node 2 (worker) on " + bed.hosts[2].address + " ended: exit code 4"),
            std::string::npos)
      << o.err;
}

TEST_F(MultiNodeTest, IgnoredWorkerExitsLetTheHeadFinishAndItsCodeIsBargesCode) {
  const auto& bed = GetBed();
  CliOutcome o = Barge("name: headcode\nimage: " + bed.image + "\n" + Hosts(3) +
                    "stop_grace: 1s\non_worker_exit: ignore\n"
                    "command: [\"sh\", \"-c\", \"if [ $RANK = 0 ]; then sleep 2; exit 7; fi; exit 3\"]\n");
  EXPECT_EQ(o.code, 7) << o.err;
}

TEST_F(MultiNodeTest, TeardownHooksRunOncePerHostWithQuotedSubstitutions) {
  const auto& bed = GetBed();
  fs::path marker = dir_ / "local-hook.txt";
  CliOutcome o = Barge("name: hooks\nimage: " + bed.image + "\n" +
                    Hosts(2, "    vars: {instance_id: \"i-0 $(touch /tmp/pwned)\"}\n") +
                    "teardown:\n"
                    "  host_command: \"echo {host.internal_address} {job.id} >> /tmp/barge-hook-test\"\n"
                    "  local_command: \"echo {host.address} \\\"$BARGE_VAR_instance_id\\\" >> " +
                    marker.string() + "\"\n"
                    "command: [\"true\"]\n");
  ASSERT_EQ(o.code, 0) << o.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(o.err, m, std::regex("job ([0-9a-f]{8})"))) << o.err;
  const std::string job_id = m[1].str();
  std::string local = ReadWholeFile(marker);
  EXPECT_NE(local.find(bed.hosts[0].address + " i-0 $(touch /tmp/pwned)\n"), std::string::npos) << local;
  EXPECT_NE(local.find(bed.hosts[1].address + " i-0 $(touch /tmp/pwned)\n"), std::string::npos) << local;
  EXPECT_EQ(std::count(local.begin(), local.end(), '\n'), 2) << local;
  for (size_t i = 0; i < 2; ++i) {
    std::string remote = OnHost(bed.hosts[i], "cat /tmp/barge-hook-test; rm -f /tmp/barge-hook-test");
    EXPECT_EQ(remote, bed.hosts[i].address + " " + job_id + "\n") << bed.hosts[i].name;
  }
  EXPECT_FALSE(fs::exists("/tmp/pwned"));
}

std::string Docker(const BedHost& h, const std::string& args) {
  return RunShell("DOCKER_HOST=" + h.docker_host + " docker " + args + " 2>&1");
}

// An image of the machine's engine only: the bed's image with /marker
// holding `content`, tagged `tag`. The file is staged in `dir` (the test's
// own directory). Returns the image ID; the caller removes the image.
std::string MakeLocalOnlyImage(const fs::path& dir, const std::string& tag, const std::string& content) {
  const auto& bed = GetBed();
  const std::string marker = ShellQuote((dir / "marker").string());
  RunShell("cid=$(docker create " + bed.image + " true) && printf %s " + ShellQuote(content) + " > " +
           marker + " && docker cp " + marker + " $cid:/marker && docker commit $cid " + tag +
           " >/dev/null; docker rm $cid >/dev/null; rm -f " + marker);
  std::string id = RunShell("docker image inspect --format '{{.Id}}' " + tag);
  while (!id.empty() && id.back() == '\n') id.pop_back();
  return id;
}

TEST_F(MultiNodeTest, ImagePullPushDeliversTheControllersImageToHostsThatLackIt) {
  const auto& bed = GetBed();
  const std::string tag = "barge/push-test:local";
  std::string id = MakeLocalOnlyImage(dir_, tag, "pushed");
  ASSERT_NE(id, "");
  for (size_t i = 0; i < 2; ++i) Docker(bed.hosts[i], "rmi -f " + tag);
  CliOutcome o = Barge("name: push\nimage: " + tag + "\nimage_pull: push\n" + Hosts(2) +
                    "command: [\"cat\", \"/marker\"]\n");
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("[0 head " + bed.hosts[0].address + "] pushed"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("[1 worker " + bed.hosts[1].address + "] pushed"), std::string::npos) << o.out;
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(Docker(bed.hosts[i], "image inspect --format '{{.Id}}' " + tag), id + "\n") << bed.hosts[i].name;
    Docker(bed.hosts[i], "rmi -f " + tag);
  }
  RunShell("docker rmi -f " + tag + " >/dev/null 2>&1");
}

// What the image relay could leave on a host: its authorized_keys (or
// their absence), relay directories under /tmp, relay ssh processes.
std::string RelayTraces(const BedHost& h) {
  return InHost(h, "if [ -e /root/.ssh/authorized_keys ]; then echo keys:; cat /root/.ssh/authorized_keys; "
                   "else echo no keys; fi; [ -d /root/.ssh ] && echo ssh dir; "
                   "find /tmp -path '*/relay*' 2>/dev/null; ps -eo args | grep '[H]ostKeyAlias=barge-relay' | "
                   "grep -c .");
}

// "this machine sent N bytes of it (X x the image's S)": {N, S}.
std::pair<long long, long long> SentAndSize(const std::string& err) {
  std::smatch m;
  if (!std::regex_search(err, m, std::regex("this machine sent ([0-9]+) bytes of it \\([0-9.]+ x the image's ([0-9]+)\\)"))) {
    return {-1, -1};
  }
  return {std::stoll(m[1].str()), std::stoll(m[2].str())};
}

// The bed's sshds must read ~/.ssh/authorized_keys (bed.sh from this
// branch on): the relay's keys go there, as on a host with OpenSSH's
// defaults.
void ExpectSshdReadsHomeKeys(const BedHost& h) {
  const std::string conf = ReadWholeFile(fs::path(GetBed().dir) / h.name / "sshd_config");
  ASSERT_NE(conf.find(" .ssh/authorized_keys"), std::string::npos)
      << h.name << "'s sshd reads no ~/.ssh/authorized_keys: bring the bed up again with tests/bed/bed.sh";
}

class ImageRelayTest : public MultiNodeTest {
 protected:
  void SetUp() override {
    MultiNodeTest::SetUp();
    for (size_t i = 0; i < 3; ++i) ExpectSshdReadsHomeKeys(GetBed().hosts[i]);
    id_ = MakeLocalOnlyImage(dir_, kTag, "image-ok");
    ASSERT_NE(id_, "");
    for (size_t i = 0; i < 3; ++i) {
      Docker(GetBed().hosts[i], "rmi -f " + kTag);
      before_.push_back(RelayTraces(GetBed().hosts[i]));
    }
  }
  void TearDown() override {
    for (size_t i = 0; i < 3; ++i) Docker(GetBed().hosts[i], "rmi -f " + kTag);
    RunShell("docker rmi -f " + kTag + " >/dev/null 2>&1");
    MultiNodeTest::TearDown();
  }
  // Every host holds the image under its ID and nothing of the relay is left.
  void ExpectDeliveredAndClean() {
    for (size_t i = 0; i < 3; ++i) {
      const BedHost& h = GetBed().hosts[i];
      EXPECT_EQ(Docker(h, "image inspect --format '{{.Id}}' " + kTag), id_ + "\n") << h.name;
      EXPECT_EQ(RelayTraces(h), before_[i]) << h.name;
    }
  }

  const std::string kTag = "barge/relay-test:local";
  std::string id_;
  std::vector<std::string> before_;
};

TEST_F(ImageRelayTest, APushToThreeHostsLeavesThisMachineOnceAndEveryHostGetsTheSameImage) {
  CliOutcome o = Barge("name: relay\nimage: " + kTag + "\nimage_pull: push\n" + Hosts(3) +
                       "command: [\"cat\", \"/marker\"]\n");
  EXPECT_EQ(o.code, 0) << o.err;
  const auto [sent, size] = SentAndSize(o.err);
  ASSERT_GT(size, 0) << o.err;
  EXPECT_EQ(sent, size) << o.err;  // one image, not three
  EXPECT_NE(o.err.find("3 host(s) by relay, 0 directly"), std::string::npos) << o.err;
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_NE(o.out.find("[" + std::to_string(i) + " " + (i == 0 ? "head " : "worker ") + GetBed().hosts[i].address +
                         "] image-ok"),
              std::string::npos)
        << o.out;
  }
  ExpectDeliveredAndClean();
}

TEST_F(ImageRelayTest, AHostTheOthersCannotReachGetsTheImageFromThisMachine) {
  const auto& bed = GetBed();
  const BedHost& cut = bed.hosts[2];  // a leaf of the tree h1 -> {h2, h3}
  const std::string rule = "INPUT -p tcp --dport 22 ! -s " + bed.raw.at("BED_GATEWAY") +
                           " -j REJECT --reject-with tcp-reset -m comment --comment barge-bed";
  InHost(cut, "iptables -I " + rule);
  CliOutcome o = Barge("name: relay\nimage: " + kTag + "\nimage_pull: push\n" + Hosts(3) +
                       "command: [\"cat\", \"/marker\"]\n");
  InHost(cut, "iptables -D " + rule);
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.err.find(cut.address + ": the relay did not deliver " + kTag + " (ssh: connect to host " + cut.address +
                       " port 22: Connection refused (exit 255)); this machine sends it directly"),
            std::string::npos)
      << o.err;
  const auto [sent, size] = SentAndSize(o.err);
  ASSERT_GT(size, 0) << o.err;
  EXPECT_EQ(sent, 2 * size) << o.err;
  EXPECT_NE(o.err.find("2 host(s) by relay, 1 directly"), std::string::npos) << o.err;
  EXPECT_NE(o.out.find("[2 worker " + cut.address + "] image-ok"), std::string::npos) << o.out;
  ExpectDeliveredAndClean();
}

TEST_F(ImageRelayTest, PushDirectSendsTheImageToEachHostFromThisMachine) {
  CliOutcome o = Barge("name: direct\nimage: " + kTag + "\nimage_pull: push-direct\n" + Hosts(3) +
                       "command: [\"cat\", \"/marker\"]\n");
  EXPECT_EQ(o.code, 0) << o.err;
  const auto [sent, size] = SentAndSize(o.err);
  ASSERT_GT(size, 0) << o.err;
  EXPECT_EQ(sent, 3 * size) << o.err;
  EXPECT_NE(o.err.find("0 host(s) by relay, 3 directly"), std::string::npos) << o.err;
  ExpectDeliveredAndClean();
}

TEST_F(MultiNodeTest, HostsHoldingDifferentImagesUnderOneTagAreRefusedBeforeAnythingStarts) {
  const auto& bed = GetBed();
  const std::string tag = "barge/skew-test:local";
  // Two images under one tag: the first is untagged on this machine when
  // the second takes the tag, so both are removed by ID at the end.
  const std::string one = MakeLocalOnlyImage(dir_, tag, "one");
  ASSERT_NE(one, "");
  Docker(bed.hosts[0], "rmi -f " + tag);
  RunShell("docker save " + tag + " | DOCKER_HOST=" + bed.hosts[0].docker_host + " docker load >/dev/null");
  const std::string two = MakeLocalOnlyImage(dir_, tag, "two");
  ASSERT_NE(two, "");
  Docker(bed.hosts[1], "rmi -f " + tag);
  RunShell("docker save " + tag + " | DOCKER_HOST=" + bed.hosts[1].docker_host + " docker load >/dev/null");
  CliOutcome o = Barge("name: skew\nimage: " + tag + "\nimage_pull: never\n" + Hosts(2) +
                    "command: [\"sh\", \"-c\", \"echo ran\"]\n");
  EXPECT_EQ(o.code, 125);
  EXPECT_NE(o.err.find("differs between hosts"), std::string::npos) << o.err;
  EXPECT_EQ(o.out.find("ran"), std::string::npos);
  for (size_t i = 0; i < 2; ++i) Docker(bed.hosts[i], "rmi -f " + tag);
  RunShell("docker rmi -f " + one + " " + two + " >/dev/null 2>&1");
  // Nothing of either is left, tagged or dangling, here or on the hosts.
  std::vector<std::string> engines = {""};
  for (size_t i = 0; i < 2; ++i) engines.push_back("DOCKER_HOST=" + bed.hosts[i].docker_host + " ");
  for (const std::string& engine : engines) {
    for (const std::string& id : {one, two}) {
      EXPECT_EQ(RunShell(engine + "docker image inspect " + id + " >/dev/null 2>&1 && echo present"), "")
          << engine << "image " << id;
    }
  }
}

TEST_F(MultiNodeTest, APyTorchGlooJobAllReducesAcrossThreeHosts) {
  const auto& bed = GetBed();
  ASSERT_EQ(bed.raw.count("BED_TORCH_IMAGE"), 1u) << "bring the bed up with BARGE_BED_TORCH=1";
  // The sample as shipped: it names the bed's hosts and keys.
  std::string yaml = ReadWholeFile(fs::path(BARGE_SOURCE_DIR) / "samples" / "torch-ddp.yaml");
  ASSERT_NE(yaml, "");
  CliOutcome o = Barge(yaml);
  EXPECT_EQ(o.code, 0) << o.err << o.out;
  for (int rank = 0; rank < 3; ++rank) {
    std::string host = bed.hosts[rank].address;
    std::string role = rank == 0 ? "head" : "worker";
    std::string want = "[" + std::to_string(rank) + " " + role + " " + host + "] rank " +
                       std::to_string(rank) + "/3 on " + bed.hosts[rank].name +
                       ": all_reduce sum = 3";
    EXPECT_NE(o.out.find(want), std::string::npos) << "missing: " << want << "\n" << o.out << o.err;
  }
}

// Gloo picks its interface from the address the host name resolves to.
// On hosts whose /etc/hosts maps their name to 127.0.1.1, as Debian's
// installer writes (bound over /etc/hosts in h1's and h2's mount namespaces
// alone; the bed's own maps each name to its bed address, where Gloo finds
// the right one by luck), a 2-host gloo job without barge's
// GLOO_SOCKET_IFNAME (the job sets it empty, which torch reads as unset)
// fails: each rank offers 127.0.1.1 to the other, which reaches only its
// own loopback ("connect [127.0.1.1]:PORT: Connection refused" at once on
// this bed; the process group's timeout, 15 s here, bounds any other way
// it could go). With barge's setting it all-reduces.
TEST_F(MultiNodeTest, GlooOnHostsWhoseNameResolvesToLoopbackFailsWithoutBargesInterfaceSettingAndRunsWithIt) {
  const auto& bed = GetBed();
  ASSERT_EQ(bed.raw.count("BED_TORCH_IMAGE"), 1u) << "bring the bed up with BARGE_BED_TORCH=1";
  const fs::path base = fs::path(bed.dir) / "gloo-hosts";
  fs::remove_all(base);
  fs::create_directories(base);
  for (size_t i = 0; i < 2; ++i) {
    const BedHost& h = bed.hosts[i];
    std::ofstream(base / h.name) << "127.0.0.1\tlocalhost\n127.0.1.1\t" << h.name << "\n";
    ASSERT_EQ(InHost(h, "mount --bind " + (base / h.name).string() + " /etc/hosts && getent hosts " + h.name),
              "127.0.1.1       " + h.name + "\n");
  }
  struct Unbind {
    const std::vector<BedHost>& hosts;
    ~Unbind() {
      for (size_t i = 0; i < 2; ++i) InHost(hosts[i], "umount /etc/hosts");
    }
  } unbind{bed.hosts};
  auto job = [&](const std::string& env) {
    return "name: gloo-iface\nimage: " + bed.raw.at("BED_TORCH_IMAGE") + "\nimage_pull: never\n" + Hosts(2) +
           "container:\n  network: host\n" + env + "stop_grace: 2s\n"
           "command:\n  - /usr/bin/python3\n  - -c\n  - |\n"
           "    import datetime, os, socket\n"
           "    import torch\n"
           "    import torch.distributed as dist\n"
           "    print('gloo iface [' + os.environ.get('GLOO_SOCKET_IFNAME', '') + '] name ' + socket.gethostbyname(socket.gethostname()), flush=True)\n"
           "    dist.init_process_group('gloo', init_method='env://', timeout=datetime.timedelta(seconds=15))\n"
           "    t = torch.tensor([float(dist.get_rank() + 1)])\n"
           "    dist.all_reduce(t)\n"
           "    print(f'all_reduce sum = {t.item():.0f}', flush=True)\n"
           "    dist.barrier()\n"
           "    dist.destroy_process_group()\n";
  };
  CliOutcome without = Barge(job("  env: {GLOO_SOCKET_IFNAME: \"\"}\n"));
  EXPECT_NE(without.code, 0) << without.err << without.out;
  EXPECT_NE(without.out.find("[0 head " + bed.hosts[0].address + "] gloo iface [] name 127.0.1.1"), std::string::npos)
      << without.out;
  EXPECT_EQ(without.out.find("all_reduce sum"), std::string::npos) << without.out;
  std::printf("without barge's setting (exit %d):\n%s\n%s\n", without.code, without.err.c_str(), without.out.c_str());

  CliOutcome with = Barge(job(""));
  EXPECT_EQ(with.code, 0) << with.err << with.out;
  for (size_t i = 0; i < 2; ++i) {
    const BedHost& h = bed.hosts[i];
    std::string iface = InHost(h, "ip -o -4 addr show | awk '$4 ~ /^" + h.address + "\\// {print $2}'");
    while (!iface.empty() && iface.back() == '\n') iface.pop_back();
    const std::string prefix = "[" + std::to_string(i) + (i == 0 ? " head " : " worker ") + h.address + "] ";
    EXPECT_NE(with.out.find(prefix + "gloo iface [" + iface + "] name 127.0.1.1"), std::string::npos) << with.out;
    EXPECT_NE(with.out.find(prefix + "all_reduce sum = 3"), std::string::npos) << with.out;
  }
  std::printf("with barge's setting:\n%s\n", with.out.c_str());
  fs::remove_all(base);
}

TEST_F(MultiNodeTest, ABusyRendezvousPortOnTheHeadsHostStopsTheJobBeforeItStarts) {
  const auto& bed = GetBed();
  // Something else listens on 29555 on h1.
  Docker(bed.hosts[0], "run -d --name barge-port-squatter --network host " + bed.image +
                           " nc -l -p 29555");
  CliOutcome o = Barge("name: busyport\nimage: " + bed.image + "\n" + Hosts(2) +
                    "container: {network: host}\nrendezvous: {port: 29555}\n"
                    "command: [\"sh\", \"-c\", \"echo ran\"]\n");
  Docker(bed.hosts[0], "rm -f barge-port-squatter");
  EXPECT_EQ(o.code, 125);
  EXPECT_NE(o.err.find("rendezvous port 29555 is already in use"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find(bed.hosts[0].address), std::string::npos) << o.err;
  EXPECT_EQ(o.out.find("ran"), std::string::npos);
}

// What job `id` left on bed host `h`, in words ("" = nothing): its
// containers (asked from the host's dockerd), its per-host directory (looked
// for inside the host's own mount namespace) and its watchdog processes.
std::string LeftOn(const BedHost& h, const std::string& id) {
  std::string left;
  const std::string containers = RunShell("DOCKER_HOST=" + h.docker_host +
                                          " timeout 20 docker ps -aq --filter label=barge.job=" + id);
  if (!containers.empty()) left += "containers " + containers + "; ";
  const std::string dir = InHost(h, "ls -d /tmp/barge-" + id + ".* >/dev/null 2>&1 && echo left || echo gone");
  if (dir != "gone\n") left += "/tmp/barge-" + id + ".*: " + dir + "; ";
  return left;
}

TEST_F(MultiNodeTest, SigintSigtermAndSighupToAThreeHostRunLeaveNoContainerDirectoryOrWatchdog) {
  const auto& bed = GetBed();
  // dead_after (in the ssh: block Hosts() ends with): a machine shared
  // with other builds answers slowly, and a lost host is not what this
  // test is about.
  std::ofstream(dir_ / "job.yaml") << "name: signalled\nimage: " << bed.image << "\n" << Hosts(3)
                                   << "  dead_after: 60s\n"
                                   << "stop_grace: 2s\ncommand: [\"sh\", \"-c\", \"echo up; sleep 300\"]\n";
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    SCOPED_TRACE(strsignal(sig));
    // The previous round's output must not pass for this one's.
    fs::remove(dir_ / "out.txt");
    fs::remove(dir_ / "err.txt");
    std::string cmd = "cd " + ShellQuote(dir_.string()) + " && BARGE_HOME=home exec " + BARGE_BINARY +
                      " run job.yaml >out.txt 2>err.txt </dev/null";
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      execl("/bin/sh", "sh", "-c", cmd.c_str(), nullptr);
      _exit(127);
    }
    // Every node's container runs (the workers start after the head).
    auto up = [&] {
      const std::string out = ReadWholeFile(dir_ / "out.txt");
      for (size_t i = 0; i < 3; ++i) {
        const std::string node = "[" + std::to_string(i) + (i == 0 ? " head " : " worker ") +
                                 bed.hosts[i].address + "] up";
        if (out.find(node) == std::string::npos) return false;
      }
      return true;
    };
    for (int i = 0; i < 600 && !up(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const std::string id = JobIdIn(ReadWholeFile(dir_ / "err.txt"));
    if (!up() || id.empty()) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      FAIL() << "the job never ran on 3 hosts:\n" << ReadWholeFile(dir_ / "out.txt")
             << ReadWholeFile(dir_ / "err.txt");
    }
    EXPECT_EQ(WatchdogPids(id).size(), 3u) << "one watchdog per host while the job runs";
    kill(pid, sig);
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status)) << "barge died of the signal instead of handling it";
    EXPECT_EQ(WEXITSTATUS(status), 130) << ReadWholeFile(dir_ / "err.txt");
    // Teardown is over when barge exits: the watchdogs were told to stop
    // (killed by the disarm command); give their shells the time to die.
    EXPECT_TRUE(WaitForNoWatchdog(id, std::chrono::seconds(5)))
        << WatchdogPids(id).size() << " watchdog(s) of job " << id << " still run";
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(LeftOn(bed.hosts[i], id), "") << "job " << id << " on " << bed.hosts[i].name;
    }
  }
}

TEST_F(MultiNodeTest, AChangedHostKeyOnOneOfThreeHostsStopsTheRunBeforeAnythingStartsAndNamesIt) {
  const auto& bed = GetBed();
  // The bed's known_hosts with h2's lines holding another key.
  ASSERT_EQ(RunShell("ssh-keygen -q -t ed25519 -N '' -f " + ShellQuote((dir_ / "impostor").string()) +
                     " && echo ok"),
            "ok\n");
  std::string impostor = ReadWholeFile(dir_ / "impostor.pub");
  impostor = impostor.substr(0, impostor.rfind(' '));  // "ssh-ed25519 AAAA..."
  std::istringstream lines(ReadWholeFile(bed.known_hosts));
  std::string known, line;
  int replaced = 0;
  const std::string h2 = bed.hosts[1].address;
  while (std::getline(lines, line)) {
    const std::string names = line.substr(0, line.find(' '));
    bool is_h2 = false;
    std::istringstream each(names);
    for (std::string n; std::getline(each, n, ',');) is_h2 = is_h2 || n == h2;
    if (is_h2) {
      line = names + " " + impostor;
      ++replaced;
    }
    known += line + "\n";
  }
  ASSERT_GE(replaced, 1) << "no line for " << h2 << " in " << bed.known_hosts;
  std::ofstream(dir_ / "known_hosts") << known;
  // Per-host job directories before and after: other jobs' may exist.
  auto job_dirs = [&](size_t i) {
    return InHost(bed.hosts[i], "ls -d /tmp/barge-* 2>/dev/null | grep -v barge-bed || true");
  };
  std::vector<std::string> dirs_before;
  for (size_t i = 0; i < 3; ++i) dirs_before.push_back(job_dirs(i));
  std::string hosts = Hosts(3);
  hosts.replace(hosts.find(bed.known_hosts), bed.known_hosts.size(), (dir_ / "known_hosts").string());
  CliOutcome o = Barge("name: changedkey\nimage: " + bed.image + "\n" + hosts +
                       "command: [\"sh\", \"-c\", \"echo started\"]\n");
  EXPECT_EQ(o.code, 125) << o.err;
  EXPECT_NE(o.err.find(h2), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("CHANGED"), std::string::npos) << o.err;
  for (size_t i : {0u, 2u}) {
    EXPECT_EQ(o.err.find(bed.hosts[i].address + ": the host key"), std::string::npos)
        << bed.hosts[i].name << " is blamed too:\n" << o.err;
  }
  EXPECT_EQ(o.out.find("started"), std::string::npos) << o.out;
  EXPECT_EQ(JobIdIn(o.err), "") << "a job started:\n" << o.err;
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(job_dirs(i), dirs_before[i]) << "a job directory appeared on " << bed.hosts[i].name;
  }
}

TEST_F(MultiNodeTest, WatchdogsRemoveEverythingWhenTheControllerIsKilled) {
  const auto& bed = GetBed();
  std::ofstream(dir_ / "job.yaml") << "name: watched\nimage: " << bed.image << "\n" << Hosts(2)
                                   << "lease: 4s\ncommand: [\"sh\", \"-c\", \"echo up; sleep 300\"]\n";
  pid_t pid = StartUntilUp();
  ASSERT_GT(pid, 0);
  ASSERT_FALSE(HasFailure()) << "the job did not come up";
  const std::string id = JobIdIn(ReadWholeFile(dir_ / "err.txt"));
  const size_t watchdogs = WatchdogPids(id).size();
  const double killed = barge::testing::WallSeconds();
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  ASSERT_EQ(id.size(), 8u) << ReadWholeFile(dir_ / "err.txt");
  ASSERT_EQ(watchdogs, 2u) << "one watchdog per host while the job runs";
  ASSERT_NE(JobContainers(bed.hosts[0]), "") << "containers outlive a killed controller";
  // No barge process runs now. Each host's watchdog acts once the lease
  // (4 s) lapses, then exits: wait for that exit (this job's watchdogs only;
  // the limit is generous, it is not the bound asserted).
  EXPECT_TRUE(WaitForNoWatchdog(id, std::chrono::seconds(90)))
      << WatchdogPids(id).size() << " watchdog(s) of job " << id << " still run";
  // The bound, from the hosts' dockerds' own event times: each container
  // was destroyed within the lease + one 2 s poll + 10 s of slack for a
  // busy machine after the kill.
  for (size_t i = 0; i < 2; ++i) {
    const std::string times = RunShell(
        "DOCKER_HOST=" + bed.hosts[i].docker_host + " timeout 20 docker events --since " +
        std::to_string(static_cast<long long>(killed) - 60) + " --until " +
        std::to_string(static_cast<long long>(barge::testing::WallSeconds()) + 1) +
        " --filter label=barge.job=" + id + " --filter event=destroy --format '{{.TimeNano}}'");
    ASSERT_FALSE(times.empty()) << "no destroy event for job " << id << " on " << bed.hosts[i].name;
    const double destroyed = std::stod(times) / 1e9;
    std::printf("%s: watchdog removed the container %.1f s after SIGKILL (lease 4 s)\n",
                bed.hosts[i].name.c_str(), destroyed - killed);
    EXPECT_LT(destroyed - killed, 4 + 2 + 10) << bed.hosts[i].name;
    EXPECT_EQ(LeftOn(bed.hosts[i], id), "") << bed.hosts[i].name;
  }
  CliOutcome ls;
  RunShell("cd " + ShellQuote(dir_.string()) + " && BARGE_HOME=home " + BARGE_BINARY +
               " ls --json > ls.txt",
           &ls.code);
  EXPECT_NE(ReadWholeFile(dir_ / "ls.txt").find("\"status\": \"lost\""), std::string::npos)
      << ReadWholeFile(dir_ / "ls.txt");
}

// The controller killed (SIGKILL) while `image_pull: push` relays an image
// big enough to be caught in flight: the relay's authorized_keys lines
// (outside the job's directory) must not outlive it. Starts the push of
// `big` (a 3-host job with `lease`), waits until the receivers' lines are
// in place and a hop's ssh runs, kills the controller and returns the job
// id and the kill's wall time; fails the test when the push never got there.
class RelayKilledTest : public ImageRelayTest {
 protected:
  void SetUp() override {
    ImageRelayTest::SetUp();
    if (HasFatalFailure()) return;
    const auto& bed = GetBed();
    // A relay line left by an earlier run would pass for this push's.
    for (size_t i = 0; i < 3; ++i) {
      ASSERT_EQ(before_[i].find("barge-relay:"), std::string::npos) << bed.hosts[i].name << ": " << before_[i];
    }
    // 300 MiB that do not compress, on top of the bed's image.
    const std::string big = ShellQuote((dir_ / "big").string());
    RunShell("head -c 300M /dev/urandom > " + big + " && cid=$(docker create " + bed.image +
             " true) && docker cp " + big + " $cid:/big && docker commit $cid " + kBig +
             " >/dev/null; docker rm $cid >/dev/null; rm -f " + big);
    ASSERT_NE(RunShell("docker image inspect --format '{{.Id}}' " + kBig), "") << "cannot make " << kBig;
    for (size_t i = 0; i < 3; ++i) Docker(bed.hosts[i], "rmi -f " + kBig);
  }
  void TearDown() override {
    for (size_t i = 0; i < 3; ++i) Docker(GetBed().hosts[i], "rmi -f " + kBig);
    RunShell("docker rmi -f " + kBig + " >/dev/null 2>&1");
    ImageRelayTest::TearDown();
  }
  std::pair<std::string, double> KillDuringThePush(const std::string& lease) {
    const auto& bed = GetBed();
    std::ofstream(dir_ / "job.yaml") << "name: relaykill\nimage: " << kBig << "\nimage_pull: push\n" << Hosts(3)
                                     << "lease: " << lease << "\ncommand: [\"true\"]\n";
    const std::string cmd = "cd " + ShellQuote(dir_.string()) + " && BARGE_HOME=home exec " + BARGE_BINARY +
                            " run job.yaml >out.txt 2>err.txt </dev/null";
    pid_t pid = fork();
    if (pid == 0) {
      execl("/bin/sh", "sh", "-c", cmd.c_str(), nullptr);
      _exit(127);
    }
    // In flight: both receivers (h2, h3) accept a relay key and a hop runs.
    auto in_flight = [&] {
      for (size_t i : {1u, 2u}) {
        if (InHost(bed.hosts[i], "grep -q barge-relay: /root/.ssh/authorized_keys 2>/dev/null && echo yes") != "yes\n") {
          return false;
        }
      }
      return RunShell("ps -eo args | grep -c '[H]ostKeyAlias=barge-relay'") != "0\n";
    };
    bool caught = false;
    const double give_up = barge::testing::WallSeconds() + 120;
    while (!caught && barge::testing::WallSeconds() < give_up) {
      caught = in_flight();
      if (!caught) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    const double killed = barge::testing::WallSeconds();
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    const std::string err = ReadWholeFile(dir_ / "err.txt");
    EXPECT_TRUE(caught) << "the relay never ran:\n" << err;
    EXPECT_EQ(err.find("pushed " + kBig), std::string::npos) << "the push ended before the kill:\n" << err;
    // barge names the job on stderr only once it starts: before, the id is
    // in the relay line's marker (its job directory on the receiver).
    std::smatch m;
    const std::string keys = InHost(bed.hosts[1], "cat /root/.ssh/authorized_keys 2>/dev/null");
    std::regex_search(keys, m, std::regex("barge-relay:/tmp/barge-([0-9a-f]{8})\\."));
    return {m.empty() ? "" : m[1].str(), killed};
  }
  // Relay processes of any host (they share one PID namespace): hops' ssh
  // and run scripts.
  static std::string RelayProcesses() {
    return RunShell("ps -eo pid,args | grep -e '[H]ostKeyAlias=barge-relay' -e '[/]relay/run' || true");
  }
  // Waits up to `limit` seconds for every host's relay traces to be as
  // before and no relay process to run; the wall time then, or -1.
  double WaitUntilClean(double limit) {
    const double end = barge::testing::WallSeconds() + limit;
    while (barge::testing::WallSeconds() < end) {
      bool clean = RelayProcesses().empty();
      for (size_t i = 0; i < 3 && clean; ++i) clean = RelayTraces(GetBed().hosts[i]) == before_[i];
      if (clean) return barge::testing::WallSeconds();
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    return -1;
  }

  const std::string kBig = "barge/relay-big:local";
};

TEST_F(RelayKilledTest, TheWatchdogsRemoveTheRelaysKeyLinesDirectoriesAndProcessesWithinTheLease) {
  const auto [id, killed] = KillDuringThePush("4s");
  ASSERT_EQ(id.size(), 8u) << ReadWholeFile(dir_ / "err.txt");
  // The bound: the lease (4 s) + one 2 s tick + 10 s of slack for a busy
  // machine, as WatchdogsRemoveEverythingWhenTheControllerIsKilled.
  const double clean = WaitUntilClean(60);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(RelayTraces(GetBed().hosts[i]), before_[i]) << GetBed().hosts[i].name;
  }
  EXPECT_EQ(RelayProcesses(), "");
  ASSERT_GT(clean, 0) << "relay traces left 60 s after the kill";
  std::printf("relay traces gone %.1f s after SIGKILL (lease 4 s)\n", clean - killed);
  EXPECT_LT(clean - killed, 4 + 2 + 10);
  EXPECT_TRUE(WaitForNoWatchdog(id, std::chrono::seconds(30))) << WatchdogPids(id).size() << " watchdog(s) left";
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(LeftOn(GetBed().hosts[i], id), "") << GetBed().hosts[i].name;
}

TEST_F(RelayKilledTest, BargeDownOfAJobKilledDuringThePushRemovesTheRelaysKeyLines) {
  const auto [id, killed] = KillDuringThePush("10m");
  ASSERT_EQ(id.size(), 8u) << ReadWholeFile(dir_ / "err.txt");
  // Within the 10-minute lease the watchdogs do nothing: barge down does it.
  int code = -1;
  const std::string down = RunShell("cd " + ShellQuote(dir_.string()) + " && BARGE_HOME=home " + BARGE_BINARY +
                                        " down " + id + " 2>&1 </dev/null",
                                    &code);
  EXPECT_EQ(code, 0) << down;
  std::printf("barge down %s:\n%s", id.c_str(), down.c_str());
  // The hop processes end by themselves once their input is cut (a few
  // seconds on a busy machine); the lines and directories went with down.
  EXPECT_GT(WaitUntilClean(20), 0) << "relay traces left 20 s after barge down";
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(RelayTraces(GetBed().hosts[i]), before_[i]) << GetBed().hosts[i].name;
    EXPECT_EQ(LeftOn(GetBed().hosts[i], id), "") << GetBed().hosts[i].name;
  }
  EXPECT_EQ(RelayProcesses(), "");
  EXPECT_TRUE(WaitForNoWatchdog(id, std::chrono::seconds(10))) << WatchdogPids(id).size() << " watchdog(s) left";
}

// How many lines of `text` end with `word`.
size_t CountOf(const std::string& text, const std::string& word) {
  size_t n = 0;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    n += line.size() >= word.size() && line.compare(line.size() - word.size(), word.size(), word) == 0;
  }
  return n;
}

// Issue #42 (item 5), played on the bed: a 2-host job whose head fails,
// with `on_failure: {keep: ...}`. The job file; `fork`s `barge run` (pid
// returned) and waits until it says it keeps the job; the job's id.
pid_t StartKeptJob(const fs::path& dir, const std::string& hosts, const std::string& extra, std::string* id) {
  const auto& bed = GetBed();
  std::ofstream(dir / "job.yaml")
      << "name: kept\nimage: " << bed.image << "\n" << hosts << "stop_grace: 2s\n" << extra
      << "roles:\n  head:\n    command: [\"sh\", \"-c\", \"echo up; sleep 3; exit 3\"]\n"
      << "  worker:\n    command: [\"sh\", \"-c\", \"echo up; trap 'exit 0' TERM; sleep 300 & wait\"]\n";
  const std::string cmd = "cd " + ShellQuote(dir.string()) + " && BARGE_HOME=home exec " + BARGE_BINARY +
                          " run job.yaml >out.txt 2>err.txt </dev/null";
  const pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", cmd.c_str(), nullptr);
    _exit(127);
  }
  auto keeping = [&] { return ReadWholeFile(dir / "err.txt").find("keeping the job's") != std::string::npos; };
  for (int i = 0; i < 300 && !keeping(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  *id = JobIdIn(ReadWholeFile(dir / "err.txt"));
  return pid;
}

// While kept: the stopped head and the live worker are on their hosts,
// `barge exec` runs in the worker, `logs` and `attach` show both ranks'
// output, `show` the keep; `barge down` ends the keep, `barge run`
// exits with the head's code, and nothing is left on the hosts: no
// container, no job directory, no watchdog. Budget: ~12 s (3 s of head,
// the starts, a 2 s stop_grace).
TEST_F(MultiNodeTest, AFailedJobKeptForALookStaysUntilBargeDownThenNothingIsLeft) {
  const auto& bed = GetBed();
  std::string id;
  const pid_t pid = StartKeptJob(dir_, Hosts(2), "on_failure: {keep: 60s}\n", &id);
  ASSERT_GT(pid, 0);
  const std::string err = ReadWholeFile(dir_ / "err.txt");
  if (err.find("keeping the job's 2 container(s) (1 still running)") == std::string::npos || id.size() != 8) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    FAIL() << "the job was not kept:\n" << ReadWholeFile(dir_ / "out.txt") << err;
  }
  const std::string base = "cd " + ShellQuote(dir_.string()) + " && BARGE_HOME=home " + BARGE_BINARY;
  EXPECT_NE(JobContainers(bed.hosts[0]), "") << "the failed head's container is gone";
  EXPECT_EQ(RunShell("DOCKER_HOST=" + bed.hosts[0].docker_host + " timeout 20 docker ps -q --filter label=barge.job=" + id), "")
      << "the head still runs";
  EXPECT_NE(RunShell("DOCKER_HOST=" + bed.hosts[1].docker_host + " timeout 20 docker ps -q --filter label=barge.job=" + id), "")
      << "the live worker was stopped";
  EXPECT_EQ(WatchdogPids(id).size(), 2u) << "one watchdog per host while the job is kept";
  int code = -1;
  const std::string exec = RunShell(base + " exec " + id + " --node 1 -- echo inside 2>&1", &code);
  EXPECT_EQ(code, 0) << exec;
  EXPECT_NE(exec.find("inside"), std::string::npos) << exec;
  // `logs` prints both ranks' kept lines; `attach` follows the kept job's
  // stream (both ranks' lines, then it waits: the job has not ended).
  const std::string logs = RunShell(base + " logs " + id + " 2>&1", &code);
  EXPECT_EQ(code, 0) << logs;
  EXPECT_EQ(CountOf(logs, "up"), 2u) << logs;
  const std::string attach = RunShell("cd " + ShellQuote(dir_.string()) + " && BARGE_HOME=home timeout 4 " +
                                          BARGE_BINARY + " attach " + id + " 2>&1",
                                      &code);
  EXPECT_EQ(code, 124) << "attach ended while the job was kept:\n" << attach;
  EXPECT_EQ(CountOf(attach, "up"), 2u) << attach;
  // `barge show`: the job is completing, its events say for how long.
  const std::string show = RunShell(base + " show " + id + " 2>&1", &code);
  EXPECT_NE(show.find("completing"), std::string::npos) << show;
  EXPECT_NE(show.find("kept for a look for 1m00s (on_failure.keep)"), std::string::npos) << show;
  const std::string down = RunShell(base + " down " + id + " 2>&1", &code);
  EXPECT_EQ(code, 0) << down;
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 3) << ReadWholeFile(dir_ / "err.txt");
  EXPECT_NE(ReadWholeFile(dir_ / "err.txt").find("the keep ended early"), std::string::npos)
      << ReadWholeFile(dir_ / "err.txt");
  EXPECT_TRUE(WaitForNoWatchdog(id, std::chrono::seconds(5))) << WatchdogPids(id).size() << " watchdog(s) left";
  for (size_t i = 0; i < 2; ++i) EXPECT_EQ(LeftOn(bed.hosts[i], id), "") << bed.hosts[i].name;
}

// The controller killed (SIGKILL) while it keeps a failed job: the hosts'
// watchdogs remove everything by themselves, no later than the keep's end
// plus their grace (keep 2 s; lease 8 s: renewals every 2 s, grace 6 s,
// a look every 3 s), with slack for a busy machine. Budget: ~15 s.
TEST_F(MultiNodeTest, AKeptJobWhoseControllerIsKilledIsRemovedByTheWatchdogsByTheKeepsEnd) {
  const auto& bed = GetBed();
  std::string id;
  const pid_t pid = StartKeptJob(dir_, Hosts(2), "lease: 8s\non_failure: {keep: 2s}\n", &id);
  ASSERT_GT(pid, 0);
  const double killed = barge::testing::WallSeconds();
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  ASSERT_NE(ReadWholeFile(dir_ / "err.txt").find("keeping the job's"), std::string::npos)
      << ReadWholeFile(dir_ / "err.txt");
  ASSERT_EQ(id.size(), 8u);
  EXPECT_TRUE(WaitForNoWatchdog(id, std::chrono::seconds(20))) << WatchdogPids(id).size() << " watchdog(s) left";
  const double gone = barge::testing::WallSeconds();
  std::printf("kept job removed by the watchdogs %.1f s after SIGKILL (keep 2 s + grace 6 s)\n", gone - killed);
  EXPECT_LT(gone - killed, 2 + 6 + 3 + 5);
  for (size_t i = 0; i < 2; ++i) EXPECT_EQ(LeftOn(bed.hosts[i], id), "") << bed.hosts[i].name;
}

// Issue #29, played on the bed: an unprivileged user of the hosts (uid
// 65534) plants, while a job runs, what barge's paths on a host look like:
// a directory of the job's name pattern holding a watchdog.pid that names a
// process of the SSH user and a lease file, a "gone" directory of its
// disarming pattern, a symlink of the pattern into a directory of the SSH
// user, and a FIFO of the pattern. The job then ends by its controller's
// teardown (SIGTERM), and a second job by `barge down` after its controller
// was killed (which, not knowing the names its controller drew, disarms by
// the pattern). Either way barge signals nothing of theirs, writes and
// reads nothing through their files, and removes only its own.
//
// And the check of what barge's own watchdog.pid names: on host 1 barge's
// watchdog is gone (killed here) and its PID file names, as a reused PID
// would, a process of uid 65534 that passes every other test of a watchdog
// (titled barge-watchdog-<id>, leading its own process group, its start
// time written beside it). Only the owner check keeps it from the disarm's
// kill, at teardown and at `down`.
TEST_F(MultiNodeTest, AnotherUsersPlantedDirectoriesPidFilesSymlinksAndFifosAreNeitherUsedNorSignalledAtTeardownOrDown) {
  const auto& bed = GetBed();
  // The processes this test starts, ended whatever happens.
  struct Started {
    std::vector<pid_t> pids;
    ~Started() {
      for (pid_t p : pids) {
        kill(-p, SIGKILL);  // a look-alike's group: its shell and their sleep
        kill(p, SIGKILL);
        waitpid(p, nullptr, 0);
      }
    }
  } started;
  // Starts, on host 1 as uid 65534, `sh -c 'sleep 600; :' barge-watchdog-<id>`
  // leading a session of its own (argv as a real watchdog's), and waits
  // until /proc shows it so (read here: no process of the check can match).
  auto start_lookalike = [&](const std::string& id) -> pid_t {
    const std::string title = "barge-watchdog-" + id;
    const std::string script = bed.raw.at("BED_SCRIPT");
    const pid_t p = fork();
    if (p == 0) {
      // bed.sh exec, nsenter, setpriv and setsid (not a group leader: no
      // fork) each exec: the shell keeps this PID.
      execl(script.c_str(), script.c_str(), "exec", bed.hosts[0].name.c_str(), "setpriv", "--reuid=65534",
            "--regid=65534", "--clear-groups", "--", "setsid", "sh", "-c", "sleep 600; :", title.c_str(), nullptr);
      _exit(127);
    }
    if (p < 0) return -1;
    started.pids.push_back(p);
    const std::string proc = "/proc/" + std::to_string(p);
    for (int i = 0; i < 100; ++i) {
      std::string args = ReadWholeFile(proc + "/cmdline");
      for (char& c : args) c = c == '\0' ? ' ' : c;
      const std::string stat = ReadWholeFile(proc + "/stat");
      std::istringstream rest(stat.substr(std::min(stat.size(), stat.rfind(") ") + 2)));
      std::string state;
      long ppid = 0, pgrp = 0;
      rest >> state >> ppid >> pgrp;
      if (args == "sh -c sleep 600; : " + title + " " && pgrp == p &&
          ReadWholeFile(proc + "/status").find("\nUid:\t65534\t") != std::string::npos) {
        return p;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "the look-alike watchdog of job " << id << " did not come up as uid 65534, titled " << title
                  << ", leading its group: " << ReadWholeFile(proc + "/cmdline");
    return -1;
  };
  auto running = [](pid_t p) { return p > 0 && kill(p, 0) == 0 && waitpid(p, nullptr, WNOHANG) == 0; };
  // Host 1's watchdog of job `id` ends (SIGKILL to its group) and barge's
  // own watchdog.pid there names `lookalike` instead.
  auto reuse_pid = [&](const std::string& id, pid_t lookalike) {
    const std::string real = InHost(
        bed.hosts[0], "for d in /tmp/barge-" + id + ".????????????; do [ -O \"$d\" ] && [ ! -L \"$d\" ] || continue;"
                      " read -r w _ < \"$d/watchdog.pid\" && echo $w && s=$(sed 's/.*) //' /proc/" +
                      std::to_string(lookalike) + "/stat) && set -- $s && echo \"" + std::to_string(lookalike) +
                      " ${20}\" > \"$d/watchdog.pid\"; done");
    const std::vector<int> watchdogs = WatchdogPids(id);
    ASSERT_FALSE(real.empty() || real.find_first_not_of("0123456789\n") != std::string::npos) << real;
    const pid_t w = std::stoi(real);
    ASSERT_NE(std::find(watchdogs.begin(), watchdogs.end(), w), watchdogs.end()) << "not a watchdog: " << real;
    ASSERT_EQ(getpgid(w), w);
    kill(-w, SIGKILL);
  };
  // Every watchdog of job `id` ended but the look-alike.
  auto only_lookalike_left = [&](const std::string& id, pid_t lookalike) {
    for (int i = 0; i < 100; ++i) {
      if (WatchdogPids(id) == std::vector<int>{lookalike}) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  };
  // The SSH user's process that the planted pid files name.
  pid_t victim = fork();
  ASSERT_GE(victim, 0);
  if (victim == 0) {
    execlp("sleep", "sleep", "600", nullptr);
    _exit(127);
  }
  started.pids.push_back(victim);
  auto alive = [&] { return kill(victim, 0) == 0 && waitpid(victim, nullptr, WNOHANG) == 0; };
  std::ofstream(dir_ / "job.yaml") << "name: planted\nimage: " << bed.image << "\n" << Hosts(2)
                                   << "lease: 30s\ncommand: [\"sh\", \"-c\", \"echo up; sleep 300\"]\n";
  const std::string base = "cd " + ShellQuote(dir_.string()) + " && BARGE_HOME=home exec " + BARGE_BINARY;
  // As uid 65534 on host `h`, for job `id`; the SSH user's canary
  // directory, which the planted symlink points into, first.
  auto plant = [&](const BedHost& h, const std::string& id) {
    const std::string p = "/tmp/barge-" + id;
    InHost(h, "mkdir -p /tmp/canary-" + id + " && echo keep > /tmp/canary-" + id + "/file");
    const std::string as_other =
        "d=" + p + ".zzzzzzzzzzzz; mkdir -m 777 $d && echo " + std::to_string(victim) +
        " > $d/watchdog.pid && touch $d/lease && mkdir -m 777 $d/secrets;"
        " g=" + p + ".zzzzzzzzzzzz.gone.AAAAAA; mkdir -m 777 $g && echo " + std::to_string(victim) +
        " > $g/watchdog.pid;"
        " ln -s /tmp/canary-" + id + " " + p + ".yyyyyyyyyyyy;"
        " mkfifo -m 666 " + p + ".xxxxxxxxxxxx; echo planted";
    const std::string out =
        InHost(h, "setpriv --reuid=65534 --regid=65534 --clear-groups sh -c " + ShellQuote(as_other));
    EXPECT_EQ(out, "planted\n") << h.name;
  };
  // What is left of job `id` on `h`: exactly the planted paths, intact.
  auto check = [&](const BedHost& h, const std::string& id) {
    const std::string p = "/tmp/barge-" + id;
    EXPECT_EQ(InHost(h, "ls -d " + p + ".* | LC_ALL=C sort"),
              p + ".xxxxxxxxxxxx\n" + p + ".yyyyyyyyyyyy\n" + p + ".zzzzzzzzzzzz\n" + p +
                  ".zzzzzzzzzzzz.gone.AAAAAA\n")
        << h.name << ": barge's own directory is left, or a planted path was removed";
    EXPECT_EQ(InHost(h, "stat -c '%u %F' " + p + ".zzzzzzzzzzzz " + p + ".zzzzzzzzzzzz/watchdog.pid " + p +
                            ".zzzzzzzzzzzz/lease " + p + ".xxxxxxxxxxxx"),
              "65534 directory\n65534 regular file\n65534 regular empty file\n65534 fifo\n")
        << h.name;
    EXPECT_EQ(InHost(h, "ls -A " + p + ".zzzzzzzzzzzz/secrets; cat /tmp/canary-" + id + "/file; ls -A /tmp/canary-" + id),
              "keep\nfile\n")
        << h.name << ": something was written through a planted path";
    EXPECT_TRUE(alive()) << "the process a planted pid file names was signalled";
    InHost(h, "rm -rf " + p + ".zzzzzzzzzzzz " + p + ".zzzzzzzzzzzz.gone.AAAAAA " + p + ".yyyyyyyyyyyy " + p +
                  ".xxxxxxxxxxxx /tmp/canary-" + id);
  };

  // 1. The controller's own teardown.
  pid_t pid = StartUntilUp();
  std::string id = JobIdIn(ReadWholeFile(dir_ / "err.txt"));
  ASSERT_EQ(id.size(), 8u);
  for (size_t i = 0; i < 2; ++i) plant(bed.hosts[i], id);
  pid_t lookalike = start_lookalike(id);
  reuse_pid(id, lookalike);
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_EQ(WEXITSTATUS(status), 130) << ReadWholeFile(dir_ / "err.txt");
  EXPECT_TRUE(only_lookalike_left(id, lookalike)) << "a watchdog of job " << id << " still runs";
  EXPECT_TRUE(running(lookalike)) << "teardown killed uid 65534's process its watchdog.pid named";
  for (size_t i = 0; i < 2; ++i) check(bed.hosts[i], id);

  // 2. `barge down` of a job whose controller is gone.
  fs::remove(dir_ / "out.txt");
  pid = StartUntilUp();
  id = JobIdIn(ReadWholeFile(dir_ / "err.txt"));
  ASSERT_EQ(id.size(), 8u);
  for (size_t i = 0; i < 2; ++i) plant(bed.hosts[i], id);
  lookalike = start_lookalike(id);
  reuse_pid(id, lookalike);
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  int code = -1;
  const std::string down = RunShell(base + " down " + id + " 2>&1", &code);
  EXPECT_EQ(code, 0) << down;
  EXPECT_TRUE(only_lookalike_left(id, lookalike)) << "a watchdog of job " << id << " still runs";
  EXPECT_TRUE(running(lookalike)) << "down killed uid 65534's process its watchdog.pid named";
  for (size_t i = 0; i < 2; ++i) check(bed.hosts[i], id);
}

// Issue #40 (item 4), played on the bed: a job's controller is killed and
// its recorded pid now names a process of uid 65534 (a pid reused after a
// crash). `barge down` neither signals that process nor waits for it: the
// controller is judged gone by its start time and uid, and the job's
// containers and watchdogs are removed from here.
TEST_F(MultiNodeTest, DownOfAJobWhosePidNowNamesUid65534sProcessSignalsItNotAndRemovesTheJobFromItsHosts) {
  ASSERT_EQ(geteuid(), 0u) << "this test plays another user (uid 65534): it needs root";
  const auto& bed = GetBed();
  std::ofstream(dir_ / "job.yaml") << "name: reused\nimage: " << bed.image << "\n" << Hosts(2)
                                   << "lease: 300s\ncommand: [\"sh\", \"-c\", \"echo up; sleep 300\"]\n";
  pid_t pid = StartUntilUp();
  ASSERT_GT(pid, 0);
  ASSERT_FALSE(HasFailure()) << "the job did not come up";
  const std::string id = JobIdIn(ReadWholeFile(dir_ / "err.txt"));
  ASSERT_EQ(id.size(), 8u) << ReadWholeFile(dir_ / "err.txt");
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  ASSERT_NE(JobContainers(bed.hosts[0]), "") << "containers outlive a killed controller (lease 300 s)";
  Sleeper theirs(65534, 300);
  ASSERT_GT(theirs.pid(), 0);
  RawExec((dir_ / "home" / "barge.db").string(),
          "UPDATE jobs SET controller_pid = " + std::to_string(theirs.pid()) + " WHERE id = '" + id + "'");
  int code = -1;
  const std::string down = RunShell("cd " + ShellQuote(dir_.string()) + " && BARGE_HOME=home timeout 120 " +
                                        BARGE_BINARY + " down " + id + " 2>&1 </dev/null",
                                    &code);
  EXPECT_EQ(code, 0) << down;
  EXPECT_EQ(down.find("stopping job"), std::string::npos) << "down took uid 65534's process for the controller:\n"
                                                          << down;
  EXPECT_NE(down.find("its controller is gone; removing its containers"), std::string::npos) << down;
  EXPECT_TRUE(theirs.Running()) << "down signalled uid 65534's process";
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(JobContainers(bed.hosts[i]), "") << bed.hosts[i].name;
    EXPECT_EQ(LeftOn(bed.hosts[i], id), "") << bed.hosts[i].name;
  }
  EXPECT_TRUE(WaitForNoWatchdog(id, std::chrono::seconds(30))) << "a watchdog of job " << id << " still runs";
}

TEST_F(MultiNodeTest, ArtifactsWrittenBeforeTheHeadExitsAreKeptAfterTeardown) {
  const auto& bed = GetBed();
  CliOutcome o = Barge("name: artifacts\nimage: " + bed.image + "\n" + Hosts(2) +
                    "stop_grace: 1s\n"
                    "artifacts:\n"
                    "  - {node: head, path: /workspace/output, every: 1s}\n"
                    "  - {node: all, path: /workspace/rank.txt}\n"
                    "command: [\"sh\", \"-c\", \"mkdir -p /workspace/output; echo $RANK > /workspace/rank.txt; "
                    "if [ $RANK = 0 ]; then i=0; while [ $i -lt 4 ]; do echo ckpt $i > /workspace/output/ckpt-$i; "
                    "i=$((i+1)); sleep 1; done; else trap 'exit 0' TERM; sleep 60 & wait; fi\"]\n");
  ASSERT_EQ(o.code, 0) << o.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(o.err, m, std::regex("job ([0-9a-f]{8})"))) << o.err;
  fs::path art = dir_ / "home" / "runs" / m[1].str() / "artifacts";
  // The last checkpoint, written just before the head exited, is there.
  EXPECT_EQ(ReadWholeFile(art / "0" / "output" / "ckpt-3"), "ckpt 3\n");
  EXPECT_EQ(ReadWholeFile(art / "0" / "output" / "ckpt-0"), "ckpt 0\n");
  EXPECT_EQ(ReadWholeFile(art / "0" / "rank.txt"), "0\n");
  EXPECT_EQ(ReadWholeFile(art / "1" / "rank.txt"), "1\n");
  EXPECT_FALSE(fs::exists(art / "1" / "output")) << "only the head's output was asked for";
}

TEST_F(MultiNodeTest, TheWorkdirAndFilesReachEveryContainerAndLeaveNothingOnTheHosts) {
  const auto& bed = GetBed();
  fs::create_directories(dir_ / "src" / "pkg");
  std::ofstream(dir_ / "src" / "train.sh") << "echo training\n";
  std::ofstream(dir_ / "src" / "pkg" / "model.py") << "x = 1\n";
  std::ofstream(dir_ / "src" / "debug.log") << "noise\n";
  std::ofstream(dir_ / "labels.csv") << "a,1\nb,2\n";
  CliOutcome o = Barge("name: shipped\nimage: " + bed.image + "\n" + Hosts(2) +
                    "workdir: {path: ./src, exclude: [\"*.log\"]}\n"
                    "files: [{from: ./labels.csv, to: /data/labels.csv}]\n"
                    "command: [\"sh\", \"-c\", \"sh /workspace/train.sh; cat /workspace/pkg/model.py; "
                    "ls /workspace; wc -l < /data/labels.csv\"]\n");
  ASSERT_EQ(o.code, 0) << o.err;
  for (int rank = 0; rank < 2; ++rank) {
    std::string p = "[" + std::to_string(rank) + (rank ? " worker " : " head ") + bed.hosts[rank].address + "] ";
    EXPECT_NE(o.out.find(p + "training\n"), std::string::npos) << o.out;
    EXPECT_NE(o.out.find(p + "x = 1\n"), std::string::npos) << o.out;
    EXPECT_NE(o.out.find(p + "2\n"), std::string::npos) << o.out;
  }
  EXPECT_EQ(o.out.find("debug.log"), std::string::npos) << "excluded file shipped: " << o.out;
  const std::string id = JobIdIn(o.err);
  ASSERT_NE(id, "") << o.err;
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(OnHost(bed.hosts[i], "ls -d /tmp/barge-" + id + ".* 2>/dev/null"), "")
        << "the job's directory was left on " << bed.hosts[i].name;
  }
}

}  // namespace
