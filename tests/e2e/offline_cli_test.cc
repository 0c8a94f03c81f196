// `barge plan`, and `barge run` / `barge plan` of every bad job file, through
// the real binary: they connect to nothing, which is counted, not timed.
//
// The test process moves into a network namespace of its own (it needs
// root, and fails loudly without it) where every IPv4 and IPv6 address is
// local to its loopback, so any packet barge or its children send, to any
// address and port (a job's host, a DNS server, an agent over TCP), is
// counted by the namespace's own IP statistics (OutRequests in
// /proc/self/net/snmp and snmp6, which count every locally sent packet);
// nothing can leave the namespace. Besides, a TCP listener the test keeps
// open (bound to port 0, never closed while barge runs) stands as the job's
// host, and two Unix-socket listeners stand as the Docker engine
// (DOCKER_HOST, for the local engine) and the SSH agent (SSH_AUTH_SOCK):
// each counts the connections it accepted. Control runs show that each
// counter sees what `barge run` of a good job does.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ssh/quote.h"
#include "tests/support/bed_env.h"

namespace fs = std::filesystem;
using barge::ssh::ShellQuote;
using barge::testing::RunShell;

namespace {

const fs::path kRoot = BARGE_SOURCE_DIR;
const fs::path kCorpus = kRoot / "tests" / "bad_jobs";

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The value of `field` in the "Ip:" table of /proc/self/net/snmp (a header
// line of names, then a line of numbers), or in /proc/self/net/snmp6 ("NAME
// VALUE" lines); -1 when absent.
long long NetStat(const char* file, const std::string& field) {
  std::istringstream in(ReadAll(std::string("/proc/self/net/") + file));
  std::string line, header;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string x; words >> x;) w.push_back(x);
    if (w.size() == 2 && w[0] == field) return std::stoll(w[1]);  // snmp6
    if (w.empty() || w[0] != "Ip:") continue;
    if (header.empty()) {
      header = line;
      continue;
    }
    std::istringstream names(header);
    std::vector<std::string> n;
    for (std::string x; names >> x;) n.push_back(x);
    for (size_t i = 0; i < n.size() && i < w.size(); ++i) {
      if (n[i] == field) return std::stoll(w[i]);
    }
  }
  return -1;
}

// IPv4 and IPv6 packets sent from this network namespace so far.
long long PacketsSent() {
  const long long v4 = NetStat("snmp", "OutRequests");
  const long long v6 = NetStat("snmp6", "Ip6OutRequests");
  EXPECT_GE(v4, 0) << "no Ip OutRequests in /proc/self/net/snmp";
  EXPECT_GE(v6, 0) << "no Ip6OutRequests in /proc/self/net/snmp6";
  return v4 + v6;
}

// Moves this process into a new network namespace where every address is
// local. Once per process; before any thread starts (a namespace change
// applies to the calling thread, and the threads it starts after).
void EnterCountingNetwork() {
  static bool entered = false;
  if (entered) return;
  ASSERT_EQ(geteuid(), 0u) << "this test needs root (a network namespace of its own)";
  ASSERT_EQ(unshare(CLONE_NEWNET), 0) << "unshare(CLONE_NEWNET): " << std::strerror(errno);
  int code = 0;
  std::string out = RunShell(
      "set -e; ip link set lo up; ip route add local 0.0.0.0/0 dev lo; "
      "ip -6 route add local ::/0 dev lo 2>&1",
      &code);
  ASSERT_EQ(code, 0) << "could not set up the network namespace (needs iproute2):\n" << out;
  entered = true;
}

// Listening sockets that accept and close at once, counting, on a thread of
// their own: a TCP socket on 127.0.0.1 (port chosen by the kernel, kept
// bound for the listener's life) and Unix sockets at given paths.
class Listeners {
 public:
  explicit Listeners(const fs::path& dir)
      : docker_socket_(dir / "docker.sock"), agent_socket_(dir / "agent.sock") {
    tcp_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(tcp_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    socklen_t len = sizeof a;
    getsockname(tcp_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    EXPECT_EQ(listen(tcp_, 64), 0);
    docker_ = UnixListener(docker_socket_);
    agent_ = UnixListener(agent_socket_);
    thread_ = std::thread([this] { Loop(); });
  }
  ~Listeners() {
    stop_ = true;
    thread_.join();
    for (int fd : {tcp_, docker_, agent_}) close(fd);
  }
  Listeners(const Listeners&) = delete;
  Listeners& operator=(const Listeners&) = delete;

  int port() const { return port_; }
  const fs::path& docker_socket() const { return docker_socket_; }
  const fs::path& agent_socket() const { return agent_socket_; }
  int tcp_accepted() const { return counts_[0]; }
  int docker_accepted() const { return counts_[1]; }
  int agent_accepted() const { return counts_[2]; }
  // Returns once the loop has polled twice more (what was queued when
  // called has been accepted and counted).
  void Sync() const {
    const long long start = rounds_;
    while (rounds_ < start + 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }

 private:
  static int UnixListener(const fs::path& path) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << path;
    EXPECT_EQ(listen(fd, 64), 0);
    return fd;
  }
  void Loop() {
    pollfd fds[3] = {{tcp_, POLLIN, 0}, {docker_, POLLIN, 0}, {agent_, POLLIN, 0}};
    while (!stop_) {
      const int ready = poll(fds, 3, 5);
      for (int i = 0; i < 3 && ready > 0; ++i) {
        if ((fds[i].revents & POLLIN) == 0) continue;
        // Every queued connection (non-blocking: until none is left).
        for (int c; (c = accept4(fds[i].fd, nullptr, nullptr, SOCK_CLOEXEC)) >= 0;) {
          ++counts_[i];
          close(c);
        }
      }
      ++rounds_;
    }
  }

  fs::path docker_socket_;
  fs::path agent_socket_;
  int tcp_ = -1;
  int docker_ = -1;
  int agent_ = -1;
  int port_ = 0;
  std::atomic<int> counts_[3] = {0, 0, 0};
  std::atomic<long long> rounds_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

struct Outcome {
  int code = -1;
  std::string out;
  std::string err;
};

class OfflineCliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { EnterCountingNetwork(); }

  void SetUp() override {
    ASSERT_FALSE(HasFatalFailure());
    // Short: the Unix sockets' paths must fit in sockaddr_un.
    std::string tmpl = (fs::temp_directory_path() / "barge-offline-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    fs::create_directories(dir_ / "home");
    listeners_ = std::make_unique<Listeners>(dir_);
  }
  void TearDown() override {
    listeners_.reset();
    fs::remove_all(dir_);
  }

  // `barge ARGS` run in `cwd`, with a BARGE_HOME of its own and the
  // listeners as Docker engine and SSH agent; stdin from /dev/null.
  Outcome Barge(const std::string& args, const fs::path& cwd) const {
    Outcome o;
    const std::string out = ShellQuote((dir_ / "out.txt").string());
    const std::string err = ShellQuote((dir_ / "err.txt").string());
    RunShell("cd " + ShellQuote(cwd.string()) +
                 " && BARGE_HOME=" + ShellQuote((dir_ / "home").string()) +
                 " DOCKER_HOST=unix://" + listeners_->docker_socket().string() +
                 " SSH_AUTH_SOCK=" + ShellQuote(listeners_->agent_socket().string()) + " HOME=" +
                 ShellQuote(dir_.string()) + " " + BARGE_BINARY + " " + args + " >" + out + " 2>" +
                 err + " </dev/null",
             &o.code);
    o.out = ReadAll(dir_ / "out.txt");
    o.err = ReadAll(dir_ / "err.txt");
    return o;
  }

  // Every connection any counter saw, in words ("" = none).
  std::string Contacts(long long packets_before) const {
    // A connection barge made is in a listener's queue by now; two more
    // rounds of the listener's loop accept it.
    listeners_->Sync();
    std::string out;
    const long long packets = PacketsSent() - packets_before;
    if (packets != 0) out += std::to_string(packets) + " packet(s) sent; ";
    if (listeners_->tcp_accepted() != 0) out += "the host's port was connected to; ";
    if (listeners_->docker_accepted() != 0) out += "the Docker engine was connected to; ";
    if (listeners_->agent_accepted() != 0) out += "the SSH agent was connected to; ";
    return out;
  }

  std::string HostYaml() const {
    return "hosts:\n  - {address: 127.0.0.1, port: " + std::to_string(listeners_->port()) +
           ", user: root}\nssh: {connect_timeout: 2s, known_hosts: " + (dir_ / "known_hosts").string() +
           "}\n";
  }

  fs::path dir_;
  std::unique_ptr<Listeners> listeners_;
};

TEST_F(OfflineCliTest, PlanSendsNoPacketAndOpensNoConnectionWhereRunDoes) {
  std::ofstream(dir_ / "known_hosts") << "";
  std::ofstream(dir_ / "remote.yaml")
      << "name: planned\nimage: barge/demo:local\n" << HostYaml()
      << "registry: {server: 127.0.0.1:" << listeners_->port()
      << ", username: u, password: {file: password}}\n"
         "command: [\"sh\", \"-c\", \"echo $(hostname)\"]\n";
  std::ofstream(dir_ / "password") << "not-a-real-password\n";
  std::ofstream(dir_ / "local.yaml")
      << "name: planned-local\nimage: barge/demo:local\nhosts:\n  - {address: local, nodes: 2}\n"
         "command: [\"true\"]\n";

  long long before = PacketsSent();
  Outcome remote = Barge("plan remote.yaml", dir_);
  EXPECT_EQ(remote.code, 0) << remote.err;
  // A registry's `docker --config DIR` is not the plain CLI: no Engine API.
  EXPECT_NE(remote.out.find("docker --config /tmp/barge-"), std::string::npos) << remote.out;
  EXPECT_NE(remote.out.find("docker run -d --name barge-planned-"), std::string::npos) << remote.out;
  EXPECT_EQ(Contacts(before), "");

  before = PacketsSent();
  Outcome local = Barge("plan local.yaml", dir_);
  EXPECT_EQ(local.code, 0) << local.err;
  // The plain CLI: created, then attached and started through the Engine API.
  EXPECT_NE(local.out.find("docker create --name barge-planned-local-"), std::string::npos) << local.out;
  EXPECT_NE(local.out.find("# made through the Engine API over the session: POST /v"), std::string::npos)
      << local.out;
  EXPECT_NE(local.out.find("/containers/create?name=barge-planned-local-"), std::string::npos) << local.out;
  EXPECT_NE(local.out.find("/attach?stream=1&stdout=1&stderr=1"), std::string::npos) << local.out;
  EXPECT_EQ(Contacts(before), "");

  // The controls: `barge run` of the same files reaches each counter.
  before = PacketsSent();
  Outcome run = Barge("run remote.yaml", dir_);
  EXPECT_EQ(run.code, 125) << run.err;
  EXPECT_GE(listeners_->tcp_accepted(), 1) << run.err;
  EXPECT_GT(PacketsSent() - before, 0);
  run = Barge("run local.yaml", dir_);
  EXPECT_EQ(run.code, 125) << run.err;
  EXPECT_GE(listeners_->docker_accepted(), 1) << run.err;
}

TEST_F(OfflineCliTest, PlanOfASharedSlurmJobShowsItsShareOfEachNodeAndAsksSlurmNothing) {
  std::ofstream(dir_ / "slurm.yaml")
      << "name: shared\nimage: barge/demo:local\ncommand: [\"true\"]\ncontainer: {gpus: all}\n"
         "slurm: {nodes: 2, time: 90m, exclusive: false, gpus_per_node: 2, cpus_per_node: 8, mem_per_node: 32g}\n";
  const long long before = PacketsSent();
  Outcome plan = Barge("plan slurm.yaml", dir_);
  EXPECT_EQ(plan.code, 0) << plan.err;
  EXPECT_NE(plan.out.find("--nodes=2 --ntasks-per-node=1 --time=0-01:30:00 --gpus-per-node=2 --cpus-per-task=8 "
                          "--mem=32768M\n"),
            std::string::npos)
      << "no --exclusive on shared nodes:\n" << plan.out;
  EXPECT_NE(plan.out.find("# Shared nodes: each container gets its node's share of the allocation"),
            std::string::npos)
      << plan.out;
  EXPECT_EQ(Contacts(before), "");
}

// --- Every bad job file, through the binary -------------------------------

// Inputs too big to keep in git, generated as runner/jobfile/job_file_corpus_test.cc
// does (the same case names, the same text).
std::map<std::string, std::string> Generated() {
  std::string big = "name: big\nimage: debian:12\ncontainer:\n  env:\n";
  for (int i = 0; big.size() < 10 * 1024 * 1024; ++i) {
    big += "    VAR_" + std::to_string(i) + ": \"some value that is fairly long\"\n";
  }
  return {{"26-ten-megabytes", big}};
}

std::vector<std::string> CaseNames() {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(kCorpus)) {
    if (entry.path().extension() == ".expected") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

class BadJobThroughTheBinary : public OfflineCliTest,
                               public ::testing::WithParamInterface<std::string> {};

TEST_P(BadJobThroughTheBinary, RunAndPlanExit125WithTheExactErrorsAndContactNothing) {
  const std::string name = GetParam();
  const std::string shown = "tests/bad_jobs/" + name + ".yaml";
  const std::string expected = ReadAll(kCorpus / (name + ".expected"));
  ASSERT_FALSE(expected.empty()) << name;
  // Run from the source root, as a user there would, so the messages name
  // the file as the .expected files do; a generated input gets a root of
  // its own with the same layout.
  fs::path root = kRoot;
  if (!fs::exists(kRoot / shown)) {
    auto generated = Generated();
    ASSERT_TRUE(generated.contains(name)) << name << ": no .yaml and no generator";
    root = dir_ / "root";
    fs::create_directories(root / "tests" / "bad_jobs");
    std::ofstream(root / shown, std::ios::binary) << generated.at(name);
  }
  const size_t errors = std::count(expected.begin(), expected.end(), '\n');
  const std::string summary =
      "barge: " + std::to_string(errors) + " error(s) in " + shown + "; nothing was started\n";
  for (const std::string verb : {"run", "plan"}) {
    const long long before = PacketsSent();
    Outcome o = Barge(verb + " " + shown, root);
    EXPECT_EQ(o.code, 125) << verb << " " << shown << "\n" << o.err;
    EXPECT_EQ(o.err, expected + summary) << verb << " " << shown;
    EXPECT_EQ(o.out, "") << verb << " " << shown;
    EXPECT_EQ(Contacts(before), "") << verb << " " << shown;
  }
  EXPECT_FALSE(fs::exists(dir_ / "home" / "barge.db")) << "a bad job file made a job store entry";
}

std::string CaseTestName(const ::testing::TestParamInfo<std::string>& info) {
  std::string out = "_" + info.param;
  std::replace(out.begin(), out.end(), '-', '_');
  return out;
}

INSTANTIATE_TEST_SUITE_P(Corpus, BadJobThroughTheBinary, ::testing::ValuesIn(CaseNames()),
                         CaseTestName);

}  // namespace
