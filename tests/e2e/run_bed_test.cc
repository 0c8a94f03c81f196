// `barge run` and `barge plan` through the real CLI, against the test bed's
// real sshd (loopback host) and the machine's real dockerd.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <thread>

#include "ssh/quote.h"
#include "tests/support/bed_env.h"
#include "tests/support/bed_job.h"

namespace fs = std::filesystem;
using barge::testing::CliOutcome;
using barge::testing::GetBed;
using barge::testing::JobContainers;
using barge::testing::OnHost;
using barge::testing::ReadWholeFile;
using barge::testing::RunShell;

namespace {

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

class RunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("barge-run-test-" + std::string(info->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "home");
  }
  void TearDown() override {
    // Nothing of any job may remain on the engine.
    EXPECT_EQ(RunShell("docker ps -aq --filter label=barge.job"), "")
        << "a barge container was left behind";
    RunShell("docker ps -aq --filter label=barge.job | xargs -r docker rm -f >/dev/null 2>&1");
    fs::remove_all(dir_);
  }

  // The ssh: block and a host entry for the bed's loopback sshd.
  std::string SshHost(const std::string& checking = "strict",
                      const std::string& known_hosts = "") const {
    const auto& bed = GetBed();
    std::ostringstream y;
    y << "hosts:\n"
      << "  - address: " << bed.loopback.address << "\n"
      << "    port: " << bed.loopback.port << "\n"
      << "    user: " << bed.user << "\n"
      << "    identity_file: " << bed.key << "\n"
      << "ssh:\n"
      << "  known_hosts: " << (known_hosts.empty() ? bed.known_hosts : known_hosts) << "\n"
      << "  host_key_checking: " << checking << "\n"
      << "  connect_timeout: 10s\n";
    return y.str();
  }

  fs::path WriteJob(const std::string& yaml, const std::string& name = "job.yaml") {
    fs::path p = dir_ / name;
    std::ofstream(p) << yaml;
    return p;
  }

  CliOutcome Barge(const std::string& args) {
    CliOutcome o;
    std::string cmd = "cd " + barge::ssh::ShellQuote(dir_.string()) +
                      " && BARGE_HOME=" + barge::ssh::ShellQuote((dir_ / "home").string()) + " " +
                      BARGE_BINARY + " " + args + " >out.txt 2>err.txt </dev/null";
    RunShell(cmd, &o.code);
    o.out = ReadWholeFile(dir_ / "out.txt");
    o.err = ReadWholeFile(dir_ / "err.txt");
    return o;
  }

  // Starts `barge run job.yaml` in the background (stdout in out.txt) and
  // waits until its stdout holds `marker`; returns its pid, or -1 (after a
  // test failure) when the marker never came.
  pid_t StartBargeRun(const std::string& marker) {
    std::string cmd = "cd " + barge::ssh::ShellQuote(dir_.string()) + " && BARGE_HOME=home exec " +
                      BARGE_BINARY + " run job.yaml >out.txt 2>err.txt </dev/null";
    pid_t pid = fork();
    if (pid == 0) {
      execl("/bin/sh", "sh", "-c", cmd.c_str(), nullptr);
      _exit(127);
    }
    if (pid < 0) {
      ADD_FAILURE() << "fork failed";
      return -1;
    }
    for (int i = 0; i < 600 && ReadWholeFile(dir_ / "out.txt").find(marker) == std::string::npos; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (ReadWholeFile(dir_ / "out.txt").find(marker) == std::string::npos) {
      ADD_FAILURE() << "barge never printed '" << marker << "': " << ReadWholeFile(dir_ / "err.txt");
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      return -1;
    }
    return pid;
  }

  fs::path dir_;
};

TEST_F(RunTest, StdoutAndStderrArrivePrefixedByNodeAndTheHeadsExitCodeComesBack) {
  const auto& bed = GetBed();
  fs::path job = WriteJob("name: hello\nimage: " + bed.image + "\n" + SshHost() +
                          "command: [\"sh\", \"-c\", \"echo out; echo err >&2; exit 3\"]\n");
  CliOutcome o = Barge("run " + job.string());
  EXPECT_EQ(o.code, 3) << o.err;
  const std::string prefix = "[0 head " + bed.loopback.address + "] ";
  EXPECT_NE(o.out.find(prefix + "out\n"), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find("err"), std::string::npos) << "stderr leaked into stdout: " << o.out;
  EXPECT_NE(o.err.find(prefix + "err\n"), std::string::npos) << o.err;

  // The per-node log file outlives the run and keeps the streams apart.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(o.err, m, std::regex("job ([0-9a-f]{8})"))) << o.err;
  fs::path log = dir_ / "home" / "runs" / m[1].str() / ("0-" + bed.loopback.address + ".log");
  std::string text = ReadWholeFile(log);
  EXPECT_TRUE(std::regex_search(text, std::regex(R"(\d{4}-\d\d-\d\dT[0-9:.]+Z stdout out\n)"))) << text;
  EXPECT_TRUE(std::regex_search(text, std::regex(R"(Z stderr err\n)"))) << text;

  // The job store remembers it: status, exit code, its node and events.
  CliOutcome ls = Barge("ls --json");
  ASSERT_EQ(ls.code, 0) << ls.err;
  EXPECT_NE(ls.out.find("\"id\": \"" + m[1].str() + "\""), std::string::npos) << ls.out;
  EXPECT_NE(ls.out.find("\"status\": \"failed\""), std::string::npos) << ls.out;
  EXPECT_NE(ls.out.find("\"exit_code\": 3"), std::string::npos) << ls.out;
  CliOutcome show = Barge("show hello");
  ASSERT_EQ(show.code, 0) << show.err;
  EXPECT_NE(show.out.find("barge-hello-" + m[1].str() + "-0"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("rank 0 (head) ended: exit code 3"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("torn_down"), std::string::npos) << show.out;
}

TEST_F(RunTest, EveryContainerOptionThisMachineCanHonourTakesEffect) {
  const auto& bed = GetBed();
  fs::create_directories(dir_ / "data");
  std::ofstream(dir_ / "data" / "input.txt") << "from the host\n";
  // The loopback host's sshd runs in its own mount namespace but shares the
  // machine's IPC and network namespaces, as the default dockerd does.
  std::string host_ipc = RunShell("readlink /proc/self/ns/ipc");
  std::string host_net = RunShell("readlink /proc/self/ns/net");
  fs::path job = WriteJob(
      "name: options\nimage: " + bed.image + "\n" + SshHost() +
      "container:\n"
      "  shm_size: 64m\n"
      "  cpus: 0.5\n"
      "  cap_add: [SYS_ADMIN]\n"
      "  network: host\n"
      "  ulimits: {memlock: \"4194304:4194304\", nofile: 4096}\n"
      "  devices: [/dev/fuse]\n"
      "  volumes: [\"" + (dir_ / "data").string() + ":/data:ro\"]\n"
      "  env: {EPOCHS: 3, NOTE: \"two words\"}\n"
      "  run_options: [\"--security-opt\", \"apparmor=unconfined\", \"--hostname\", \"bargetest\"]\n"
      "command: |\n"
      "  grep ' /dev/shm ' /proc/mounts\n"
      "  grep CapEff /proc/self/status\n"
      "  echo memlock=$(ulimit -l) nofile=$(ulimit -n)\n"
      "  ls -l /dev/fuse | cut -c1\n"
      "  cat /data/input.txt\n"
      "  touch /data/x 2>/dev/null && echo writable || echo read-only\n"
      "  echo EPOCHS=$EPOCHS NOTE=$NOTE host=$(hostname)\n"
      "  echo ipc=$(readlink /proc/self/ns/ipc) net=$(readlink /proc/self/ns/net)\n"
      "  echo cpu=$(cat /sys/fs/cgroup/cpu.max 2>/dev/null || echo $(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us) "
      "$(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us))\n");
  CliOutcome o = Barge("run " + job.string());
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("cpu=50000 100000\n"), std::string::npos) << "cpus: 0.5 is half of each period: " << o.out;
  EXPECT_NE(o.out.find("size=65536k"), std::string::npos) << o.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(o.out, m, std::regex("CapEff:\\s*([0-9a-f]+)"))) << o.out;
  unsigned long long caps = std::stoull(m[1].str(), nullptr, 16);
  EXPECT_TRUE(caps & (1ULL << 21)) << "CAP_SYS_ADMIN (bit 21) missing from " << m[1].str();
  EXPECT_NE(o.out.find("memlock=4096 nofile=4096"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("] c\n"), std::string::npos) << "/dev/fuse is not a character device: " << o.out;
  EXPECT_NE(o.out.find("from the host"), std::string::npos);
  EXPECT_NE(o.out.find("read-only"), std::string::npos);
  EXPECT_NE(o.out.find("EPOCHS=3 NOTE=two words host=bargetest"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("net=" + Trim(host_net)), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find("ipc=" + Trim(host_ipc) + " "), std::string::npos) << "ipc shared without ipc: host";

  // --ipc host (Docker then ignores --shm-size: /dev/shm is the host's).
  job = WriteJob("name: ipc\nimage: " + bed.image + "\n" + SshHost() +
                 "container:\n  ipc: host\n"
                 "command: [\"sh\", \"-c\", \"echo ipc=$(readlink /proc/self/ns/ipc)\"]\n",
                 "ipc.yaml");
  o = Barge("run " + job.string());
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("ipc=" + Trim(host_ipc)), std::string::npos) << o.out;
}

TEST_F(RunTest, ArgumentsAndEnvArriveByteExactThroughTheRemoteShell) {
  const auto& bed = GetBed();
  fs::create_directories(dir_ / "out");
  fs::permissions(dir_ / "out", fs::perms::all);
  const std::vector<std::string> tricky = {
      "it's \"quoted\"", "$(touch /out/pwned)", "`touch /out/pwned2`", "a;b && c | d",
      "line1\nline2", "  spaces  ", "naïve — ünïcödé ✓", "$HOME ~ * ?"};
  std::string env_block = "  env:\n";
  std::string cmd = "[\"sh\", \"-c\", \"printf '%s' \\\"$V0\\\" > /out/env0";
  for (size_t i = 0; i < tricky.size(); ++i) {
    // YAML double-quoted scalars: escape backslash, quote and newline.
    std::string y;
    for (char c : tricky[i]) {
      if (c == '"' || c == '\\') y += '\\';
      if (c == '\n') { y += "\\n"; continue; }
      y += c;
    }
    env_block += "    V" + std::to_string(i) + ": \"" + y + "\"\n";
    if (i) cmd += "; printf '%s' \\\"$V" + std::to_string(i) + "\\\" > /out/env" + std::to_string(i);
  }
  cmd += "; printf '%s' \\\"$1\\\" > /out/arg1\", \"sh\", \"$(touch /out/pwned3); it's\\n`x`\"]\n";
  fs::path job = WriteJob("name: quoting\nimage: " + bed.image + "\n" + SshHost() +
                          "container:\n  volumes: [\"" + (dir_ / "out").string() + ":/out\"]\n" +
                          env_block + "command: " + cmd);
  CliOutcome o = Barge("run " + job.string());
  ASSERT_EQ(o.code, 0) << o.err << "\n" << ReadWholeFile(job);
  for (size_t i = 0; i < tricky.size(); ++i) {
    EXPECT_EQ(ReadWholeFile(dir_ / "out" / ("env" + std::to_string(i))), tricky[i]) << "V" << i;
  }
  EXPECT_EQ(ReadWholeFile(dir_ / "out" / "arg1"), "$(touch /out/pwned3); it's\n`x`");
  EXPECT_FALSE(fs::exists(dir_ / "out" / "pwned"));
  EXPECT_FALSE(fs::exists(dir_ / "out" / "pwned2"));
  EXPECT_FALSE(fs::exists(dir_ / "out" / "pwned3"));
}

TEST_F(RunTest, AnUnknownHostKeyIsRefusedWithItsFingerprintAndAcceptNewRecordsIt) {
  const auto& bed = GetBed();
  fs::path known = dir_ / "known_hosts";
  std::ofstream(known) << "";
  fs::path job = WriteJob("name: keys\nimage: " + bed.image + "\n" + SshHost("strict", known.string()) +
                          "command: [\"true\"]\n");
  CliOutcome o = Barge("run " + job.string());
  EXPECT_EQ(o.code, 125);
  EXPECT_NE(o.err.find("SHA256:"), std::string::npos) << o.err;
  EXPECT_EQ(ReadWholeFile(known), "") << "strict checking must not record keys";

  fs::path job2 = WriteJob("name: keys\nimage: " + bed.image + "\n" +
                               SshHost("accept-new", known.string()) + "command: [\"true\"]\n",
                           "job2.yaml");
  o = Barge("run " + job2.string());
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_NE(ReadWholeFile(known).find("ssh-ed25519"), std::string::npos);
  // Now the key is known: strict checking passes.
  o = Barge("run " + job.string());
  EXPECT_EQ(o.code, 0) << o.err;
}

TEST_F(RunTest, AMisspelledKeyIsRejectedWithFileLineKeyAndASuggestionBeforeConnecting) {
  const auto& bed = GetBed();
  fs::path job = WriteJob("name: typo\nimage: " + bed.image + "\n" + SshHost() +
                          "container:\n  shm_sise: 1g\ncommand: [\"true\"]\n");
  CliOutcome o = Barge("run " + job.string());
  EXPECT_EQ(o.code, 125);
  EXPECT_NE(o.err.find("job.yaml:13:3: container.shm_sise"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("shm_size"), std::string::npos) << o.err;
  EXPECT_EQ(o.err.find("connecting"), std::string::npos) << o.err;
}

TEST_F(RunTest, AGpuRequestOnAHostWithoutTheNvidiaDriverStopsAtTheHealthGateOrWithDockersReason) {
  const auto& bed = GetBed();
  const std::string head = "name: gpus\nimage: " + bed.image + "\n" + SshHost() +
                           "container:\n  gpus: all\ncommand: [\"sh\", \"-c\", \"echo started\"]\n";
  // The health gate asks nvidia-smi: the host has none (said in the same
  // table as the GPU probe's failure).
  CliOutcome o = Barge("run " + WriteJob(head).string());
  EXPECT_EQ(o.code, 125);
  EXPECT_NE(o.err.find(bed.loopback.address), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("HOST"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("GPU health: nvidia-smi failed (exit 127)"), std::string::npos) << o.err;
  EXPECT_EQ(o.out.find("started"), std::string::npos) << "the job ran: " << o.out;
  // Without the gate, Docker's own reason.
  CliOutcome off = Barge("run " + WriteJob(head + "health: {gpus: off}\n").string());
  EXPECT_EQ(off.code, 125);
  EXPECT_NE(off.err.find(bed.loopback.address), std::string::npos) << off.err;
  EXPECT_NE(off.err.find("could not select device driver"), std::string::npos) << off.err;
  EXPECT_EQ(off.out.find("started"), std::string::npos) << "the job ran: " << off.out;
}

TEST_F(RunTest, TheLocalEngineCarriesAHeadAndWorkersOfOneJob) {
  const auto& bed = GetBed();
  fs::path job = WriteJob("name: local3\nimage: " + bed.image +
                          "\nhosts:\n  - address: local\n    nodes: 3\n"
                          "roles:\n  head:\n    command: [\"sh\", \"-c\", \"sleep 2; echo head $RANK/$WORLD_SIZE\"]\n"
                          "  worker:\n    command: [\"sh\", \"-c\", \"echo worker $RANK/$WORLD_SIZE at $MASTER_ADDR; sleep 60\"]\n");
  CliOutcome o = Barge("run " + job.string());
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("[0 head local] head 0/3"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("[1 worker local] worker 1/3 at 127.0.0.1"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("[2 worker local] worker 2/3 at 127.0.0.1"), std::string::npos) << o.out;
}

// That plan connects to nothing (no packet sent, no connection to the host,
// the Docker engine or the SSH agent) is counted in offline_cli_test.cc.
TEST_F(RunTest, PlanPrintsTheExactCommandsOfAHostItCannotReach) {
  // An address nothing listens on: plan must not care.
  fs::path job = WriteJob(
      "name: planned\nimage: barge/demo:local\n"
      "hosts:\n  - {address: 192.0.2.1, user: root, port: 2222}\n"
      "docker_command: sudo -n docker\n"
      "container:\n  shm_size: 1g\n  gpus: all\n  ulimits: {memlock: -1}\n"
      "command: [\"sh\", \"-c\", \"echo $(hostname) 'x'\"]\n");
  CliOutcome o = Barge("plan " + job.string());
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("sudo -n docker run -d --name barge-planned-"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("--shm-size 1g"), std::string::npos);
  EXPECT_NE(o.out.find("--gpus all"), std::string::npos);
  EXPECT_NE(o.out.find("--ulimit memlock=-1"), std::string::npos);
  EXPECT_NE(o.out.find("barge/demo:local sh -c 'echo $(hostname) '\\''x'\\'''"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("<gpus of 192.0.2.1>"), std::string::npos) << o.out;
}

TEST_F(RunTest, AnInterruptStopsTheJobRemovesItsContainersAndExits130) {
  const auto& bed = GetBed();
  fs::path job = WriteJob("name: sigint\nimage: " + bed.image + "\n" + SshHost() +
                          "stop_grace: 2s\ncommand: [\"sh\", \"-c\", \"echo up; sleep 300\"]\n");
  pid_t pid = StartBargeRun("up");
  ASSERT_GT(pid, 0);
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130) << ReadWholeFile(dir_ / "err.txt");
  CliOutcome ls = Barge("ls --json");
  EXPECT_NE(ls.out.find("\"status\": \"cancelled\""), std::string::npos) << ls.out;
  EXPECT_NE(ls.out.find("\"exit_code\": 130"), std::string::npos) << ls.out;
}

TEST_F(RunTest, EverySampleJobFileIsValidAndPlans) {
  int count = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(BARGE_SOURCE_DIR) / "samples")) {
    if (entry.path().extension() != ".yaml") continue;
    ++count;
    CliOutcome o = Barge("plan " + entry.path().string());
    EXPECT_EQ(o.code, 0) << entry.path() << ":\n" << o.err;
    // `docker create` where the Engine API attaches and starts (plain
    // `docker`), `docker run -d` where the CLI does everything.
    EXPECT_TRUE(o.out.find(" create --name barge-") != std::string::npos ||
                o.out.find(" run -d --name barge-") != std::string::npos)
        << entry.path() << ":\n" << o.out;
  }
  EXPECT_GE(count, 5);
}

TEST_F(RunTest, AKeyHeldByTheSshAgentAuthenticatesWhenTheJobNamesNoIdentityFile) {
  const auto& bed = GetBed();
  fs::path sock = dir_ / "agent.sock";
  int code = -1;
  std::string agent = RunShell("ssh-agent -a " + sock.string() + " -s", &code);
  ASSERT_EQ(code, 0) << agent;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(agent, m, std::regex("SSH_AGENT_PID=([0-9]+)"))) << agent;
  const std::string agent_pid = m[1].str();
  RunShell("SSH_AUTH_SOCK=" + sock.string() + " ssh-add " + bed.key + " 2>&1", &code);
  EXPECT_EQ(code, 0);
  // No identity_file, and a HOME without keys: only the agent can help.
  fs::path job = WriteJob("name: agent\nimage: " + bed.image + "\nhosts:\n  - address: " +
                          bed.loopback.address + "\n    port: " + std::to_string(bed.loopback.port) +
                          "\n    user: " + bed.user + "\nssh:\n  known_hosts: " + bed.known_hosts +
                          "\n  config_file: /dev/null\ncommand: [\"echo\", \"via agent\"]\n");
  std::string cmd = "cd " + barge::ssh::ShellQuote(dir_.string()) + " && HOME=" +
                    (dir_ / "home").string() + " SSH_AUTH_SOCK=" + sock.string() +
                    " BARGE_HOME=home " + BARGE_BINARY + " run job.yaml 2>&1";
  std::string out = RunShell(cmd, &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("] via agent"), std::string::npos) << out;
  // Without the agent the same job cannot log in.
  out = RunShell("cd " + barge::ssh::ShellQuote(dir_.string()) + " && HOME=" +
                     (dir_ / "home").string() + " SSH_AUTH_SOCK= BARGE_HOME=home " + BARGE_BINARY +
                     " run job.yaml 2>&1",
                 &code);
  EXPECT_EQ(code, 125) << out;
  RunShell("kill " + agent_pid);
}

// The timeout counts from the controller's start; the job's record is
// created just after it, so the head's stop begins between timeout - a few
// ms and timeout + 1 s (one pass of the event loop and a stop command's
// start) after the record's first event.
TEST_F(RunTest, ATwoSecondTimeoutStopsTheHeadWithinOneSecondOfItExits124AndLeavesNothing) {
  const auto& bed = GetBed();
  fs::path job = WriteJob("name: slow\nimage: " + bed.image + "\n" + SshHost() +
                          "timeout: 2s\nstop_grace: 1s\ncommand: [\"sleep\", \"300\"]\n");
  CliOutcome o = Barge("run --events-file events.jsonl " + job.string());
  EXPECT_EQ(o.code, 124) << o.err;
  EXPECT_NE(o.err.find("timeout"), std::string::npos) << o.err;
  const std::string id = barge::testing::JobIdIn(o.err);
  ASSERT_FALSE(id.empty()) << o.err;

  std::istringstream events(ReadWholeFile(dir_ / "events.jsonl"));
  std::optional<double> created, stop_began;
  for (std::string line; std::getline(events, line);) {
    nlohmann::json e = nlohmann::json::parse(line);
    if (!created) created = barge::testing::IsoSeconds(e.at("at").get<std::string>());
    if (!stop_began && e.value("type", "") == "phase" && e.value("phase", "") == "stop" &&
        e.value("state", "") == "began") {
      stop_began = barge::testing::IsoSeconds(e.at("at").get<std::string>());
    }
  }
  ASSERT_TRUE(created && stop_began) << ReadWholeFile(dir_ / "events.jsonl");
  EXPECT_GE(*stop_began - *created, 1.9);
  EXPECT_LE(*stop_began - *created, 3.0);

  CliOutcome ls = Barge("ls --json");
  EXPECT_NE(ls.out.find("\"status\": \"timed_out\""), std::string::npos) << ls.out;
  // Nothing left: no container (TearDown), no job directory, no watchdog.
  EXPECT_EQ(RunShell("docker ps -aq --filter label=barge.job=" + id), "");
  EXPECT_EQ(OnHost(bed.loopback, "ls -d /tmp/barge-" + id + ".* >/dev/null 2>&1 && echo left || echo gone"),
            "gone\n");
  EXPECT_TRUE(barge::testing::WaitForNoWatchdog(id, std::chrono::seconds(10)));
}

TEST_F(RunTest, ADetachedJobRunsOnItsOwnAndDownStopsItAsCancelled) {
  const auto& bed = GetBed();
  fs::path job = WriteJob("name: detached\nimage: " + bed.image + "\n" + SshHost() +
                          "stop_grace: 2s\ncommand: [\"sh\", \"-c\", \"echo hello; sleep 300\"]\n");
  CliOutcome o = Barge("run -d " + job.string());
  ASSERT_EQ(o.code, 0) << o.err;
  std::string id = Trim(o.out);
  ASSERT_TRUE(std::regex_match(id, std::regex("[0-9a-f]{8}"))) << o.out;
  EXPECT_NE(RunShell("docker ps -q --filter label=barge.job=" + id), "");
  CliOutcome ls = Barge("ls --json --status running");
  EXPECT_NE(ls.out.find(id), std::string::npos) << ls.out;
  CliOutcome down = Barge("down " + id.substr(0, 5));
  EXPECT_EQ(down.code, 0) << down.err;
  EXPECT_NE(down.out.find("cancelled"), std::string::npos) << down.out;
  EXPECT_EQ(RunShell("docker ps -aq --filter label=barge.job=" + id), "");
  // The detached controller kept the job's log.
  std::string log = ReadWholeFile(dir_ / "home" / "runs" / id / ("0-" + bed.loopback.address + ".log"));
  EXPECT_NE(log.find("stdout hello"), std::string::npos) << log;
}

TEST_F(RunTest, DownRemovesTheContainersOfAJobWhoseControllerWasKilled) {
  const auto& bed = GetBed();
  WriteJob("name: orphan\nimage: " + bed.image + "\n" + SshHost() +
           "command: [\"sh\", \"-c\", \"echo up; sleep 300\"]\n");
  pid_t pid = StartBargeRun("up");
  ASSERT_GT(pid, 0);
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  ASSERT_NE(RunShell("docker ps -q --filter label=barge.job"), "") << "the container should outlive its controller";
  CliOutcome down = Barge("down orphan");
  EXPECT_EQ(down.code, 0) << down.out << down.err;
  EXPECT_NE(down.out.find("controller is gone"), std::string::npos) << down.out;
  CliOutcome ls = Barge("ls --json");
  EXPECT_NE(ls.out.find("\"status\": \"cancelled\""), std::string::npos) << ls.out;
}

TEST_F(RunTest, LogsFollowExecAndReapWorkOnADetachedJob) {
  const auto& bed = GetBed();
  fs::path job = WriteJob("name: lifecycle\nimage: " + bed.image + "\n" + SshHost() +
                          "stop_grace: 2s\ncommand: [\"sh\", \"-c\", "
                          "\"i=0; while [ $i -lt 20 ]; do echo line $i; i=$((i+1)); sleep 0.1; done; "
                          "echo oops >&2; sleep 2; echo last\"]\n");
  CliOutcome o = Barge("run -d " + job.string());
  ASSERT_EQ(o.code, 0) << o.err;
  const std::string id = Trim(o.out);

  // A debugging shell into the running head.
  CliOutcome ex = Barge("exec " + id + " --node 0 -- sh -c 'echo role=$BARGE_ROLE; exit 6'");
  EXPECT_EQ(ex.code, 6) << ex.err;
  EXPECT_EQ(ex.out, "role=head\n");

  // An orphan of some earlier job on the same engine; reap removes it and
  // leaves the running job alone.
  RunShell("docker run -d --name barge-orphan-test --label barge.job=0rphan00 " + bed.image +
           " sleep 300 >/dev/null");
  CliOutcome reap = Barge("reap " + job.string());
  EXPECT_EQ(reap.code, 0) << reap.err;
  EXPECT_NE(reap.out.find("removing barge-orphan-test (job 0rphan00"), std::string::npos) << reap.out;
  EXPECT_EQ(RunShell("docker ps -aq --filter name=barge-orphan-test"), "");
  EXPECT_NE(RunShell("docker ps -q --filter label=barge.job=" + id), "");

  // attach (in the background) and logs -f follow the job to its end:
  // each sees every line exactly once.
  std::string attach_cmd = "cd " + barge::ssh::ShellQuote(dir_.string()) + " && BARGE_HOME=home " +
                           BARGE_BINARY + " attach " + id + " >attach.txt 2>attach.err </dev/null";
  pid_t attach_pid = fork();
  ASSERT_GE(attach_pid, 0);
  if (attach_pid == 0) {
    execl("/bin/sh", "sh", "-c", attach_cmd.c_str(), nullptr);
    _exit(127);
  }
  CliOutcome logs = Barge("logs -f " + id);
  int attach_status = 0;
  waitpid(attach_pid, &attach_status, 0);
  EXPECT_TRUE(WIFEXITED(attach_status) && WEXITSTATUS(attach_status) == 0) << ReadWholeFile(dir_ / "attach.err");
  std::string attached = ReadWholeFile(dir_ / "attach.txt");
  EXPECT_EQ(logs.code, 0) << logs.err;
  const std::string prefix = "[0 head " + bed.loopback.address + "]";
  for (int i = 0; i < 20; ++i) {
    std::string line = prefix + " line " + std::to_string(i) + "\n";
    size_t at = logs.out.find(line);
    EXPECT_NE(at, std::string::npos) << line << logs.out;
    EXPECT_EQ(logs.out.find(line, at + 1), std::string::npos) << "repeated: " << line;
    at = attached.find(line);
    EXPECT_NE(at, std::string::npos) << "attach: " << line << attached;
    EXPECT_EQ(attached.find(line, at + 1), std::string::npos) << "attach repeated: " << line;
  }
  EXPECT_NE(logs.out.find(prefix.substr(0, prefix.size() - 1) + " stderr] oops"), std::string::npos) << logs.out;
  EXPECT_NE(logs.out.find(prefix + " last\n"), std::string::npos) << logs.out;
  CliOutcome ls = Barge("ls --json");
  EXPECT_NE(ls.out.find("\"status\": \"succeeded\""), std::string::npos) << ls.out;
}

TEST_F(RunTest, AttachToAJobWhoseControllerDiedLosesAndRepeatsNoLine) {
  const auto& bed = GetBed();
  WriteJob("name: reattach\nimage: " + bed.image + "\n" + SshHost() +
           "command: [\"sh\", \"-c\", \"i=0; while [ $i -lt 30 ]; do echo line $i; "
           "i=$((i+1)); sleep 0.2; done\"]\n");
  pid_t pid = StartBargeRun("line 3\n");
  ASSERT_GT(pid, 0);
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  CliOutcome at = Barge("attach reattach");
  EXPECT_EQ(at.code, 0) << at.err;
  EXPECT_NE(at.err.find("controller is gone"), std::string::npos) << at.err;
  EXPECT_NE(at.out.find("line 29\n"), std::string::npos) << at.out;
  // The kept file now holds every line exactly once.
  std::smatch m;
  std::string err = ReadWholeFile(dir_ / "err.txt");
  ASSERT_TRUE(std::regex_search(err, m, std::regex("job ([0-9a-f]{8})"))) << err;
  std::string log = ReadWholeFile(dir_ / "home" / "runs" / m[1].str() / ("0-" + bed.loopback.address + ".log"));
  for (int i = 0; i < 30; ++i) {
    std::string line = "stdout line " + std::to_string(i) + "\n";
    size_t at_pos = log.find(line);
    EXPECT_NE(at_pos, std::string::npos) << line << log;
    EXPECT_EQ(log.find(line, at_pos + 1), std::string::npos) << "repeated " << line << log;
  }
  CliOutcome down = Barge("down reattach");
  EXPECT_EQ(down.code, 0) << down.out << down.err;
}

}  // namespace
