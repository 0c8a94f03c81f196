// Head/worker jobs across the test bed's namespace hosts, each with its own
// address, sshd and dockerd, through the real CLI.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sstream>

#include "ssh/quote.h"
#include "tests/bed_env.h"
#include "tests/bed_job.h"

namespace fs = std::filesystem;
using barge::ssh::ShellQuote;
using barge::testing::BedHost;
using barge::testing::CliOutcome;
using barge::testing::GetBed;
using barge::testing::JobContainers;
using barge::testing::OnHost;
using barge::testing::ReadWholeFile;
using barge::testing::RunShell;

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

  fs::path dir_;
};

double Number(const std::string& text, const std::string& regex) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex(regex))) return -1;
  return std::stod(m[1].str());
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
                    "  local_command: \"echo {host.address} {host.vars.instance_id} >> " +
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

// A small image only the controller's engine has: the bed image plus a file.
std::string MakeLocalOnlyImage(const std::string& tag, const std::string& content) {
  const auto& bed = GetBed();
  RunShell("cid=$(docker create " + bed.image + " true) && printf %s " + ShellQuote(content) +
           " > /tmp/barge-push-marker && docker cp /tmp/barge-push-marker $cid:/marker && "
           "docker commit $cid " + tag + " >/dev/null && docker rm $cid >/dev/null");
  return RunShell("docker image inspect --format '{{.Id}}' " + tag);
}

TEST_F(MultiNodeTest, ImagePullPushDeliversTheControllersImageToHostsThatLackIt) {
  const auto& bed = GetBed();
  const std::string tag = "barge/push-test:local";
  std::string id = MakeLocalOnlyImage(tag, "pushed");
  ASSERT_NE(id, "");
  for (size_t i = 0; i < 2; ++i) Docker(bed.hosts[i], "rmi -f " + tag);
  CliOutcome o = Barge("name: push\nimage: " + tag + "\nimage_pull: push\n" + Hosts(2) +
                    "command: [\"cat\", \"/marker\"]\n");
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("[0 head " + bed.hosts[0].address + "] pushed"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("[1 worker " + bed.hosts[1].address + "] pushed"), std::string::npos) << o.out;
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(Docker(bed.hosts[i], "image inspect --format '{{.Id}}' " + tag), id) << bed.hosts[i].name;
    Docker(bed.hosts[i], "rmi -f " + tag);
  }
  RunShell("docker rmi -f " + tag + " >/dev/null 2>&1");
}

TEST_F(MultiNodeTest, HostsHoldingDifferentImagesUnderOneTagAreRefusedBeforeAnythingStarts) {
  const auto& bed = GetBed();
  const std::string tag = "barge/skew-test:local";
  MakeLocalOnlyImage(tag, "one");
  Docker(bed.hosts[0], "rmi -f " + tag);
  RunShell("docker save " + tag + " | DOCKER_HOST=" + bed.hosts[0].docker_host + " docker load >/dev/null");
  MakeLocalOnlyImage(tag, "two");
  Docker(bed.hosts[1], "rmi -f " + tag);
  RunShell("docker save " + tag + " | DOCKER_HOST=" + bed.hosts[1].docker_host + " docker load >/dev/null");
  CliOutcome o = Barge("name: skew\nimage: " + tag + "\nimage_pull: never\n" + Hosts(2) +
                    "command: [\"sh\", \"-c\", \"echo ran\"]\n");
  EXPECT_EQ(o.code, 125);
  EXPECT_NE(o.err.find("differs between hosts"), std::string::npos) << o.err;
  EXPECT_EQ(o.out.find("ran"), std::string::npos);
  for (size_t i = 0; i < 2; ++i) Docker(bed.hosts[i], "rmi -f " + tag);
  RunShell("docker rmi -f " + tag + " >/dev/null 2>&1");
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

TEST_F(MultiNodeTest, WatchdogsRemoveEverythingWhenTheControllerIsKilled) {
  const auto& bed = GetBed();
  std::ofstream(dir_ / "job.yaml") << "name: watched\nimage: " << bed.image << "\n" << Hosts(2)
                                   << "lease: 4s\ncommand: [\"sh\", \"-c\", \"echo up; sleep 300\"]\n";
  std::string cmd = "cd " + ShellQuote(dir_.string()) + " && BARGE_HOME=home exec " + BARGE_BINARY +
                    " run job.yaml >out.txt 2>err.txt </dev/null";
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", cmd.c_str(), nullptr);
    _exit(127);
  }
  auto up = [&] {
    std::string out = ReadWholeFile(dir_ / "out.txt");
    return out.find("[0 head") != std::string::npos && out.find("[1 worker") != std::string::npos;
  };
  for (int i = 0; i < 300 && !up(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(up()) << ReadWholeFile(dir_ / "err.txt");
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  const auto killed = std::chrono::steady_clock::now();
  ASSERT_NE(JobContainers(bed.hosts[0]), "") << "containers outlive a killed controller";
  // No barge process runs now; the hosts' watchdogs must act within the
  // lease (4 s) + 15 s.
  bool gone = false;
  while (!gone && std::chrono::steady_clock::now() - killed < std::chrono::seconds(19)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    gone = JobContainers(bed.hosts[0]).empty() && JobContainers(bed.hosts[1]).empty();
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  EXPECT_TRUE(gone) << "containers still there " << secs << " s after the controller died";
  std::printf("watchdog cleanup took %.1f s after SIGKILL (lease 4 s)\n", secs);
  EXPECT_EQ(OnHost(bed.hosts[0], "ls -d /tmp/barge-* 2>/dev/null | grep -v barge-bed; pgrep -f 'barge-watchdo[g]'"), "");
  CliOutcome ls;
  RunShell("cd " + ShellQuote(dir_.string()) + " && BARGE_HOME=home " + BARGE_BINARY +
               " ls --json > ls.txt",
           &ls.code);
  EXPECT_NE(ReadWholeFile(dir_ / "ls.txt").find("\"status\": \"lost\""), std::string::npos)
      << ReadWholeFile(dir_ / "ls.txt");
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
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(OnHost(bed.hosts[i], "ls -d /tmp/barge-* 2>/dev/null | grep -v barge-bed"), "")
        << "the job's directory was left on " << bed.hosts[i].name;
  }
}

}  // namespace
