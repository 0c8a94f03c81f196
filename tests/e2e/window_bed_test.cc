// The windows on a running job, through the real CLI on the test bed: port
// forwards (forward:, barge forward) to a server in a container, busy ports
// and an sshd that refuses forwarding; `barge exec -it` in a real terminal
// (script, tmux); `barge top --once --json` on three hosts under a CPU
// burner, with a stand-in nvidia-smi on one host.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "ssh/quote.h"
#include "tests/support/bed_env.h"
#include "tests/support/bed_job.h"

namespace fs = std::filesystem;
using barge::ssh::ShellQuote;
using barge::testing::BedHost;
using barge::testing::GetBed;
using barge::testing::InHost;
using barge::testing::JobContainers;
using barge::testing::OnHost;
using barge::testing::ReadWholeFile;
using barge::testing::RunShell;
using std::chrono::milliseconds;
using std::chrono::seconds;

namespace {

class WindowBedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_GE(GetBed().hosts.size(), 3u) << "the bed needs 3 namespace hosts";
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("barge-window-" + std::string(info->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "home");
  }
  void TearDown() override {
    for (pid_t pid : started_) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    for (const auto& h : GetBed().hosts) {
      EXPECT_EQ(JobContainers(h), "") << "a container was left on " << h.name;
      RunShell("DOCKER_HOST=" + h.docker_host + " docker ps -aq --filter label=barge.job | DOCKER_HOST=" +
               h.docker_host + " xargs -r docker rm -f >/dev/null 2>&1");
    }
    fs::remove_all(dir_);
  }

  std::string Env() const {
    return "cd " + ShellQuote(dir_.string()) + " && export BARGE_HOME=" + ShellQuote((dir_ / "home").string()) +
           " && ";
  }
  // `barge ARGS` to completion; stdout+stderr in *out.
  int Barge(const std::string& args, std::string* out = nullptr, const std::string& input = "") {
    int code = -1;
    std::string text = RunShell(Env() + (input.empty() ? "" : "printf %s " + ShellQuote(input) + " | ") +
                                    BARGE_BINARY + " " + args + " 2>&1" + (input.empty() ? " </dev/null" : ""),
                                &code);
    if (out) *out = text;
    return code;
  }
  // `barge ARGS` in the background, output to FILE.out / FILE.err.
  pid_t Start(const std::string& args, const std::string& file) {
    const std::string cmd = Env() + "exec " + BARGE_BINARY + " " + args + " >" + file + ".out 2>" + file +
                            ".err </dev/null";
    pid_t pid = fork();
    if (pid == 0) {
      execl("/bin/sh", "sh", "-c", cmd.c_str(), nullptr);
      _exit(127);
    }
    started_.push_back(pid);
    return pid;
  }
  bool WaitFor(const std::string& file, const std::string& text, milliseconds limit = seconds(60)) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (ReadWholeFile(dir_ / file).find(text) == std::string::npos) {
      if (std::chrono::steady_clock::now() > end) return false;
      std::this_thread::sleep_for(milliseconds(50));
    }
    return true;
  }
  // Waits for a background barge; its exit code (-1 after `limit`, killed).
  int Wait(pid_t pid, milliseconds limit) {
    const auto end = std::chrono::steady_clock::now() + limit;
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > end) return -1;
      std::this_thread::sleep_for(milliseconds(50));
    }
    started_.erase(std::remove(started_.begin(), started_.end(), pid), started_.end());
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  void WriteFile(const std::string& name, const std::string& text) { std::ofstream(dir_ / name) << text; }
  std::string Read(const std::string& name) { return ReadWholeFile(dir_ / name); }

  std::string Ssh(const std::string& known_hosts = "") const {
    const auto& bed = GetBed();
    return "ssh:\n  user: " + bed.user + "\n  identity_file: " + bed.key +
           "\n  known_hosts: " + (known_hosts.empty() ? bed.known_hosts : known_hosts) +
           "\n  connect_timeout: 10s\n";
  }
  // A detached job on `host_yaml` (a hosts: list) that sleeps; its id.
  std::string StartSleeper(const std::string& name, const std::string& hosts_yaml,
                           const std::string& extra = "") {
    WriteFile(name + ".yaml", "name: " + name + "\nimage: " + GetBed().image +
                                  "\ncontainer: {network: host}\nstop_grace: 1s\n"
                                  "command: [sh, -c, 'echo up; sleep 600']\n" +
                                  extra + hosts_yaml + Ssh());
    std::string out;
    EXPECT_EQ(Barge("run -d " + name + ".yaml", &out), 0)
        << out << RunShell("cat " + ShellQuote((dir_ / "home").string()) + "/runs/*/controller.log");
    std::istringstream lines(out);
    std::string last;
    for (std::string l; std::getline(lines, l);) {
      if (l.size() == 8) last = l;
    }
    return last;
  }

  fs::path dir_;
  std::vector<pid_t> started_;
};

// A port of this machine's loopback that nothing listens on now.
int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

TEST_F(WindowBedTest, ForwardCarriesALargeFileAndTwentyConcurrentRequestsToAServerInAContainerOnABedHost) {
  const auto& bed = GetBed();
  const int local = FreePort();
  const int local2 = FreePort() == local ? local + 1 : FreePort();
  // The server listens on the host's (= the host-network container's)
  // 127.0.0.1 only: reachable only from the host itself.
  WriteFile("job.yaml", "name: fwd\nimage: " + bed.image +
                            "\ncontainer: {network: host}\nstop_grace: 1s\n"
                            "command: [sh, -c, 'mkdir -p /tmp/www && echo hello-from-the-node >/tmp/www/index.html"
                            " && dd if=/dev/urandom of=/tmp/www/big bs=1M count=32 2>/dev/null"
                            " && exec httpd -f -p 127.0.0.1:18231 -h /tmp/www']\n"
                            "forward: [\"" + std::to_string(local) + ":18231\"]\n"
                            "hosts:\n  - address: " + bed.hosts[0].address + "\n" + Ssh());
  pid_t run = Start("run job.yaml", "run");
  const std::string line = "forwarding http://127.0.0.1:" + std::to_string(local) + " -> rank 0 port 18231";
  ASSERT_TRUE(WaitFor("run.err", line)) << Read("run.err");
  const std::string url = "http://127.0.0.1:" + std::to_string(local);
  int code = -1;
  // httpd may need a moment after the forward is up.
  std::string index;
  for (int i = 0; i < 50 && index.find("hello-from-the-node") == std::string::npos; ++i) {
    index = RunShell("curl -s --max-time 5 " + url + "/index.html");
    if (index.empty()) std::this_thread::sleep_for(milliseconds(100));
  }
  EXPECT_EQ(index, "hello-from-the-node\n");

  // A large file arrives whole: the same digest as on the host.
  const std::string got = RunShell("curl -s --max-time 60 " + url + "/big | md5sum | cut -d' ' -f1", &code);
  const std::string run_id = barge::testing::JobIdIn(Read("run.err"));
  ASSERT_NE(run_id, "") << Read("run.err");
  const std::string want = OnHost(bed.hosts[0], "DOCKER_HOST=" + bed.hosts[0].docker_host +
                                                     " docker exec $(DOCKER_HOST=" + bed.hosts[0].docker_host +
                                                     " docker ps -q --filter label=barge.job=" + run_id +
                                                     ") md5sum /tmp/www/big | cut -d' ' -f1");
  EXPECT_EQ(got, want);
  EXPECT_EQ(got.size(), 33u) << got;

  // A client that closes early does not disturb the others.
  RunShell("curl -s --max-time 20 " + url + "/big | head -c 1000 >/dev/null");
  // 20 concurrent downloads of the whole file.
  const std::string many = RunShell(
      "for i in $(seq 1 20); do curl -s --max-time 90 -o /dev/null -w '%{http_code} %{size_download}\\n' " + url +
      "/big & done; wait");
  int complete = 0;
  std::istringstream lines(many);
  for (std::string l; std::getline(lines, l);) complete += l == "200 33554432";
  EXPECT_EQ(complete, 20) << many;

  // The same job, detached-style: `barge forward` opens its own session.
  std::string id;
  ASSERT_EQ(Barge("ls --json", &id), 0);
  nlohmann::json jobs = nlohmann::json::parse(id.substr(id.find('[')));
  const std::string job_id = jobs[0]["id"];
  pid_t fwd = Start("forward " + job_id + " " + std::to_string(local2) + ":18231", "fwd");
  ASSERT_TRUE(WaitFor("fwd.err", "forwarding http://127.0.0.1:" + std::to_string(local2) + " -> rank 0 port 18231"))
      << Read("fwd.err");
  EXPECT_EQ(RunShell("curl -s --max-time 10 http://127.0.0.1:" + std::to_string(local2) + "/index.html"),
            "hello-from-the-node\n");

  // A busy local port (the attached run holds `local`) is an error at once,
  // naming it.
  std::string busy;
  const auto began = std::chrono::steady_clock::now();
  EXPECT_EQ(Barge("forward " + job_id + " " + std::to_string(local) + ":18231", &busy), 125);
  EXPECT_LT(std::chrono::steady_clock::now() - began, seconds(5));
  EXPECT_NE(busy.find("127.0.0.1:" + std::to_string(local) + " is already in use"), std::string::npos) << busy;

  // Another user of this machine (uid 65534) is refused at the forward's
  // port; the user barge runs as is served.
  EXPECT_EQ(RunShell("setpriv --reuid=65534 --regid=65534 --clear-groups curl -s --max-time 10 "
                     "http://127.0.0.1:" + std::to_string(local2) + "/index.html"),
            "");
  EXPECT_NE(Read("fwd.err").find("refused a connection of another user"), std::string::npos) << Read("fwd.err");
  EXPECT_EQ(RunShell("curl -s --max-time 10 http://127.0.0.1:" + std::to_string(local2) + "/index.html"),
            "hello-from-the-node\n");

  // --socket: a unix socket only its user can connect to, gone at the end.
  const std::string sock = "/tmp/barge-fwd-" + std::to_string(getpid()) + ".sock";
  pid_t unix_fwd = Start("forward " + job_id + " 18231 --socket " + sock, "ufwd");
  ASSERT_TRUE(WaitFor("ufwd.err", "forwarding unix:" + sock + " -> rank 0 port 18231")) << Read("ufwd.err");
  EXPECT_EQ(RunShell("curl -s --max-time 10 --unix-socket " + sock + " http://node/index.html"),
            "hello-from-the-node\n");
  EXPECT_EQ(RunShell("setpriv --reuid=65534 --regid=65534 --clear-groups curl -s --max-time 10 --unix-socket " +
                     sock + " http://node/index.html"),
            "");
  EXPECT_EQ(RunShell("stat -c %a " + sock), "600\n");
  kill(unix_fwd, SIGINT);
  EXPECT_EQ(Wait(unix_fwd, seconds(10)), 0) << Read("ufwd.err");
  EXPECT_FALSE(std::filesystem::exists(sock));

  kill(fwd, SIGINT);
  EXPECT_EQ(Wait(fwd, seconds(10)), 0) << Read("fwd.err");
  std::string down;
  EXPECT_EQ(Barge("down " + job_id, &down), 0) << down;
  EXPECT_EQ(Wait(run, seconds(60)), 130) << Read("run.err");
}

TEST_F(WindowBedTest, AJobWhoseForwardPortIsBusyFailsBeforeAnythingStarts) {
  const auto& bed = GetBed();
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  const int port = ntohs(a.sin_port);
  WriteFile("job.yaml", "name: busy\nimage: " + bed.image + "\ncontainer: {network: host}\ncommand: [true]\n"
                        "forward: [8080, \"" + std::to_string(port) + ":80\"]\n"
                        "hosts:\n  - address: " + bed.hosts[0].address + "\n" + Ssh());
  std::string out;
  EXPECT_EQ(Barge("run job.yaml", &out), 125);
  close(fd);
  EXPECT_NE(out.find("forward[1]: local port 127.0.0.1:" + std::to_string(port) + " is already in use"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("connecting"), std::string::npos) << "it connected before failing:\n" << out;
}

TEST_F(WindowBedTest, AHostWhoseSshdRefusesForwardingIsReportedOnceNamingTheHostAndTheSetting) {
  const auto& bed = GetBed();
  const BedHost& h = bed.hosts[1];
  // A second sshd of that host, on port 2231, with AllowTcpForwarding no;
  // its files in the bed's directory, which the host's private /tmp shows.
  const fs::path sshd_dir = fs::path(bed.dir) / "window-test-sshd";
  fs::create_directories(sshd_dir);
  const std::string cfg = (sshd_dir / "sshd_config").string();
  const std::string pidfile = (sshd_dir / "sshd.pid").string();
  std::string base = ReadWholeFile(bed.dir + "/" + h.name + "/sshd_config");
  std::string conf;
  std::istringstream in(base);
  for (std::string l; std::getline(in, l);) {
    if (l.rfind("ListenAddress", 0) == 0) l = "ListenAddress " + h.address + ":2231";
    if (l.rfind("PidFile", 0) == 0) l = "PidFile " + pidfile;
    conf += l + "\n";
  }
  conf += "AllowTcpForwarding no\n";
  std::ofstream(cfg) << conf;
  const std::string pub = ReadWholeFile(bed.dir + "/" + h.name + "/ssh_host_ed25519_key.pub");
  WriteFile("known_hosts", "[" + h.address + "]:2231 " + pub);
  InHost(h, "/usr/sbin/sshd -f " + cfg + " -E " + (sshd_dir / "sshd.log").string());
  for (int i = 0; i < 50 && ReadWholeFile(pidfile).empty(); ++i) std::this_thread::sleep_for(milliseconds(100));
  ASSERT_FALSE(ReadWholeFile(pidfile).empty()) << ReadWholeFile(sshd_dir / "sshd.log");
  const std::string sshd_pid = ReadWholeFile(pidfile);

  WriteFile("job.yaml", "name: nofwd\nimage: " + bed.image +
                            "\ncontainer: {network: host}\nstop_grace: 1s\ncommand: [sh, -c, 'sleep 600']\n"
                            "hosts:\n  - {address: " + h.address + ", port: 2231}\n" +
                            Ssh((dir_ / "known_hosts").string()));
  std::string out;
  ASSERT_EQ(Barge("run -d job.yaml", &out), 0) << out;
  const std::string job_id = out.substr(out.rfind('\n', out.size() - 2) + 1, 8);
  const int local = FreePort();
  pid_t fwd = Start("forward " + job_id + " " + std::to_string(local) + ":22", "fwd");
  ASSERT_TRUE(WaitFor("fwd.err", "forwarding http://127.0.0.1:" + std::to_string(local))) << Read("fwd.err");
  RunShell("curl -s --max-time 5 http://127.0.0.1:" + std::to_string(local) + "/ >/dev/null");
  // Ends by itself, once, with the reason: not retried forever.
  EXPECT_EQ(Wait(fwd, seconds(15)), 125) << Read("fwd.err");
  const std::string err = Read("fwd.err");
  EXPECT_NE(err.find(h.address + ":2231"), std::string::npos) << err;
  EXPECT_NE(err.find("AllowTcpForwarding no"), std::string::npos) << err;
  std::string down;
  EXPECT_EQ(Barge("down " + job_id, &down), 0) << down;
  // The second sshd removes its pid file as it exits: wait for its exit
  // (5 s at most) before the directory goes, or the two race.
  const std::string pid = std::to_string(std::stoi(sshd_pid));
  RunShell("kill " + pid + "; for i in $(seq 100); do kill -0 " + pid +
           " 2>/dev/null || break; sleep 0.05; done");
  std::error_code ec;
  fs::remove_all(sshd_dir, ec);
  EXPECT_FALSE(ec) << sshd_dir << ": " << ec.message();
}

TEST_F(WindowBedTest, ExecItGivesARealTerminalPassesTypedInputResizesAndCtrlCAndReturnsTheExitCode) {
  const auto& bed = GetBed();
  const std::string job = StartSleeper("shell", "hosts:\n  - address: " + bed.hosts[0].address + "\n");
  ASSERT_EQ(job.size(), 8u);

  // Through `script`'s pty: tty names a pts, `read` gets what was typed.
  int code = -1;
  const std::string typed = RunShell(
      Env() + "(sleep 3; printf 'typed-words\\r'; sleep 2) | timeout 30 script -qec " +
          ShellQuote(std::string(BARGE_BINARY) + " exec -it " + job +
                     " -- sh -c 'tty; read x; echo got:$x; exit 7'") +
          " /dev/null; echo script-exit:$?",
      &code);
  EXPECT_NE(typed.find("/dev/pts/"), std::string::npos) << typed;
  EXPECT_NE(typed.find("got:typed-words"), std::string::npos) << typed;
  EXPECT_NE(typed.find("script-exit:7"), std::string::npos) << typed;

  // Through tmux: the window's size and its changes, and ^C reach the
  // remote shell (which survives it), then its exit code comes back.
  const std::string session = "barge-window-" + job;
  const std::string rc_file = (dir_ / "rc").string();
  // A server of the test's own on a socket of its own (short: a socket's
  // path has at most 107 bytes), removed at the end: nothing is left in
  // /tmp/tmux-UID.
  const std::string sock = (fs::temp_directory_path() / ("btmux-" + std::to_string(getpid()))).string();
  const std::string tmux = "tmux -S " + ShellQuote(sock) + " ";
  RunShell(tmux + "kill-session -t " + session + " 2>/dev/null; " + Env() + tmux + "new-session -d -s " + session +
           " -x 100 -y 30 " +
           ShellQuote(std::string(BARGE_BINARY) + " exec -it " + job + " -- sh; echo rc=$? >" + rc_file +
                      "; sleep 5"));
  auto pane = [&] { return RunShell(tmux + "capture-pane -p -t " + session); };
  auto send = [&](const std::string& keys) { RunShell(tmux + "send-keys -t " + session + " " + keys); };
  auto wait_pane = [&](const std::string& text) {
    for (int i = 0; i < 100; ++i) {
      if (pane().find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(milliseconds(100));
    }
    return false;
  };
  std::this_thread::sleep_for(seconds(2));
  send("'stty size' Enter");
  EXPECT_TRUE(wait_pane("30 100")) << pane();
  RunShell(tmux + "resize-window -t " + session + " -x 120 -y 40");
  std::this_thread::sleep_for(milliseconds(500));
  send("'stty size' Enter");
  EXPECT_TRUE(wait_pane("40 120")) << pane();
  send("'sleep 100; echo not-interrupted' Enter");
  std::this_thread::sleep_for(seconds(1));
  send("C-c");
  send("'echo alive-after-ctrl-c' Enter");
  EXPECT_TRUE(wait_pane("alive-after-ctrl-c")) << pane();
  EXPECT_EQ(pane().find("\nnot-interrupted"), std::string::npos) << pane();
  send("'exit 5' Enter");
  for (int i = 0; i < 100 && ReadWholeFile(rc_file).empty(); ++i) std::this_thread::sleep_for(milliseconds(100));
  EXPECT_EQ(ReadWholeFile(rc_file), "rc=5\n") << pane();
  RunShell(tmux + "kill-server 2>/dev/null; rm -f " + ShellQuote(sock));

  // -i alone: stdin is passed (no terminal), and the code comes back.
  std::string piped;
  EXPECT_EQ(Barge("exec -i " + job + " -- sh -c 'tty; wc -c; exit 3'", &piped, "twelve bytes"), 3);
  EXPECT_NE(piped.find("not a tty"), std::string::npos) << piped;
  EXPECT_NE(piped.find("12"), std::string::npos) << piped;

  // barge never makes its stdin non-blocking: the flag belongs to the open
  // file description, shared with whoever else holds it (a shell, a pipe's
  // writer), and would stay set after a killed barge. Checked on a pipe
  // this test holds too, while `exec -i` reads it and after a SIGKILL.
  int in[2];
  ASSERT_EQ(pipe(in), 0);
  const std::string cmd = Env() + "exec " + BARGE_BINARY + " exec -i " + job + " -- sh -c 'cat >/dev/null' >/dev/null 2>&1";
  pid_t reader = fork();
  if (reader == 0) {
    dup2(in[0], STDIN_FILENO);
    close(in[0]);
    close(in[1]);
    execl("/bin/sh", "sh", "-c", cmd.c_str(), nullptr);
    _exit(127);
  }
  ASSERT_EQ(write(in[1], "some input\n", 11), 11);
  std::this_thread::sleep_for(seconds(2));
  EXPECT_EQ(fcntl(in[0], F_GETFL) & O_NONBLOCK, 0) << "exec -i made its stdin non-blocking";
  kill(reader, SIGKILL);
  waitpid(reader, nullptr, 0);
  EXPECT_EQ(fcntl(in[0], F_GETFL) & O_NONBLOCK, 0) << "a killed exec -i left its stdin non-blocking";
  close(in[0]);
  close(in[1]);
  std::string down;
  EXPECT_EQ(Barge("down " + job, &down), 0) << down;
}

TEST_F(WindowBedTest, TopOnceJsonOnThreeHostsShowsCpuRisingUnderABurnerAndTheStandInNvidiaSmisGpus) {
  const auto& bed = GetBed();
  const BedHost& gpu_host = bed.hosts[2];
  // A STAND-IN for a GPU host (the bed has no GPU): on h3's private /root,
  // an `nvidia-smi` script answering the query with two fixed GPUs, found
  // through ~/.bashrc's PATH, and a docker wrapper (docker_command) that
  // answers barge's GPU probe and drops --gpus.
  InHost(gpu_host,
         "mkdir -p /root/barge-standin/bin && cd /root/barge-standin && "
         "printf '%s\\n' '#!/bin/sh' '# stand-in nvidia-smi for barge tests' "
         "'echo \"0, GPU-standin-0, 37, 1024, 16384\"' 'echo \"1, GPU-standin-1, 81, 2048, 16384\"' >bin/nvidia-smi && "
         "printf '%s\\n' '#!/bin/sh' '# stand-in docker: a GPU host without GPUs' "
         "'case \" $* \" in *\" --entrypoint nvidia-smi \"*) echo \"GPU 0: Stand-in (UUID: GPU-standin-0)\"; "
         "echo \"GPU 1: Stand-in (UUID: GPU-standin-1)\"; exit 0;; esac' "
         "'drop=0; for a do shift; if [ $drop = 1 ]; then drop=0; continue; fi; "
         "case \"$a\" in --gpus) drop=1; continue;; esac; set -- \"$@\" \"$a\"; done' 'exec docker \"$@\"' "
         ">docker-gpu-standin && chmod +x bin/nvidia-smi docker-gpu-standin && "
         "cp -p /root/.bashrc /root/.bashrc.barge-saved 2>/dev/null; "
         "echo 'export PATH=/root/barge-standin/bin:$PATH' >>/root/.bashrc");
  struct Restore {
    const BedHost& h;
    ~Restore() {
      InHost(h, "if [ -f /root/.bashrc.barge-saved ]; then mv /root/.bashrc.barge-saved /root/.bashrc; "
                "else rm -f /root/.bashrc; fi; rm -rf /root/barge-standin");
    }
  } restore{gpu_host};
  ASSERT_NE(OnHost(gpu_host, "nvidia-smi --query-gpu=index --format=csv"), "")
      << "the stand-in nvidia-smi is not on the PATH of ssh commands";

  std::string hosts = "hosts:\n";
  for (int i = 0; i < 2; ++i) hosts += "  - address: " + bed.hosts[i].address + "\n";
  hosts += "  - address: " + gpu_host.address +
           "\n    docker_command: /root/barge-standin/docker-gpu-standin\n    container: {gpus: [1]}\n";
  // This stand-in answers `top`'s query only: the GPU health gate (tested
  // with the captured outputs in gpu_health_bed_test.cc) is off here.
  const std::string job = StartSleeper("top3", hosts, "health: {gpus: off}\n");
  ASSERT_EQ(job.size(), 8u);

  auto sample = [&] {
    std::string out;
    int code = -1;
    out = RunShell(Env() + BARGE_BINARY + " top --once --json " + job + " 2>/dev/null", &code);
    EXPECT_EQ(code, 0) << out;
    nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << out;
    return j;
  };
  nlohmann::json before = sample();
  ASSERT_EQ(before["nodes"].size(), 3u) << before.dump(2);
  for (const auto& n : before["nodes"]) {
    EXPECT_TRUE(n["error"].is_null()) << n.dump();
    EXPECT_GT(n["mem_used_bytes"].get<double>(), 0) << n.dump();
    EXPECT_GT(n["mem_limit_bytes"].get<double>(), n["mem_used_bytes"].get<double>()) << n.dump();
    EXPECT_TRUE(n["net_rx_bytes"].is_null()) << "host network: no network I/O";
  }
  EXPECT_LT(before["nodes"][1]["cpu_percent"].get<double>(), 30) << before.dump(2);
  // The stand-in's GPU 1 is rank 2's (device=1); the other hosts have none.
  EXPECT_TRUE(before["nodes"][0]["gpus"].empty());
  ASSERT_EQ(before["nodes"][2]["gpus"].size(), 1u) << before.dump(2);
  EXPECT_EQ(before["nodes"][2]["gpus"][0]["index"], 1);
  EXPECT_EQ(before["nodes"][2]["gpus"][0]["util_percent"], 81.0);
  EXPECT_EQ(before["nodes"][2]["gpus"][0]["mem_used_mib"], 2048);

  // A CPU burner in rank 1: its CPU% rises.
  pid_t burn = Start("exec " + job + " --node 1 -- timeout 20 sh -c 'while :; do :; done'", "burn");
  std::this_thread::sleep_for(seconds(3));
  nlohmann::json during = sample();
  ASSERT_EQ(during["nodes"].size(), 3u);
  EXPECT_GT(during["nodes"][1]["cpu_percent"].get<double>(), 40) << during.dump(2);
  EXPECT_LT(during["nodes"][0]["cpu_percent"].get<double>(), 30) << during.dump(2);
  std::string down;
  EXPECT_EQ(Barge("down " + job, &down), 0) << down;
  Wait(burn, seconds(30));
}

}  // namespace
