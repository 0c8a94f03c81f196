// SshExecutor::OpenUnixStream against a real bed host: a direct-streamlocal
// channel through the host's sshd to that host's own dockerd socket, a
// socket that does not exist, streams beside commands, an sshd that forbids
// streams, and a connection that is cut under an open stream.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/bed_test_util.h"
#include "ssh/quote.h"
#include "ssh/ssh_executor.h"

namespace barge::ssh {
namespace {

using testing::BedOptions;
using testing::Collected;
using testing::CollectInto;
using testing::PollUntil;
using testing::ReadFile;
using testing::RunToEnd;
using testing::TempDir;

// The first namespace host: its sshd, and its dockerd's socket path.
struct StreamHost {
  SessionOptions options;
  std::string socket_path;
};

StreamHost FirstHost(const TempDir& dir) {
  const auto& bed = barge::testing::GetBed();
  StreamHost h;
  h.options = BedOptions(dir);
  if (bed.hosts.empty()) {
    ADD_FAILURE() << "the bed has no namespace host";
    return h;
  }
  h.options.host = bed.hosts[0].address;
  h.options.port = bed.hosts[0].port;
  const std::string docker_host = bed.hosts[0].docker_host;
  EXPECT_EQ(docker_host.rfind("unix://", 0), 0u) << docker_host;
  h.socket_path = docker_host.substr(std::string("unix://").size());
  return h;
}

std::unique_ptr<SshExecutor> Connect(EventLoop& loop, const SessionOptions& options) {
  auto session = Session::Connect(options);
  EXPECT_TRUE(session.ok()) << session.status().message();
  if (!session.ok()) return nullptr;
  return std::make_unique<SshExecutor>(std::move(session).value(), &loop);
}

constexpr char kPing[] = "GET /_ping HTTP/1.1\r\nHost: docker\r\nConnection: close\r\n\r\n";

TEST(SshStream, GetsOkFromTheHostsOwnDockerdThroughItsSshdWithoutRunningAProcess) {
  TempDir dir;
  StreamHost host = FirstHost(dir);
  EventLoop loop;
  auto exec = Connect(loop, host.options);
  ASSERT_TRUE(exec);
  auto r = std::make_shared<Collected>();
  auto stream = exec->OpenUnixStream(host.socket_path, CollectInto(r));
  ASSERT_TRUE(stream.ok()) << stream.status().message();
  (*stream)->WriteStdin(kPing);
  ASSERT_TRUE(PollUntil(loop, [&] { return r->finished(); }, std::chrono::seconds(20)));
  EXPECT_TRUE(r->exit.known()) << r->exit.error;
  EXPECT_EQ(r->exit.code, 0);
  EXPECT_EQ(r->exit_calls, 1);
  EXPECT_EQ(r->out.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << r->out;
  ASSERT_GE(r->out.size(), 2u);
  EXPECT_EQ(r->out.substr(r->out.size() - 2), "OK") << r->out;
  // The engine that answered is this host's own: its API says its name.
  auto info = std::make_shared<Collected>();
  auto s2 = exec->OpenUnixStream(host.socket_path, CollectInto(info));
  ASSERT_TRUE(s2.ok());
  (*s2)->WriteStdin("GET /info HTTP/1.1\r\nHost: docker\r\nConnection: close\r\n\r\n");
  ASSERT_TRUE(PollUntil(loop, [&] { return info->finished(); }, std::chrono::seconds(20)));
  Collected hostname = RunToEnd(loop, *exec, "hostname");
  ASSERT_EQ(hostname.exit.code, 0);
  std::string name = hostname.out.substr(0, hostname.out.find('\n'));
  EXPECT_NE(info->out.find("\"Name\":\"" + name + "\""), std::string::npos) << info->out;
  EXPECT_TRUE(exec->health().ok());
}

TEST(SshStream, ASocketThatDoesNotExistIsAClearErrorAndTheSessionStaysUsable) {
  TempDir dir;
  StreamHost host = FirstHost(dir);
  EventLoop loop;
  auto exec = Connect(loop, host.options);
  ASSERT_TRUE(exec);
  const std::string missing = "/run/barge-no-such-socket.sock";
  auto r = std::make_shared<Collected>();
  auto stream = exec->OpenUnixStream(missing, CollectInto(r));
  ASSERT_TRUE(stream.ok());
  EXPECT_EQ(r->exit_calls, 0);  // never from inside OpenUnixStream
  ASSERT_TRUE(PollUntil(loop, [&] { return r->finished(); }, std::chrono::seconds(20)));
  EXPECT_FALSE(r->exit.known());
  EXPECT_EQ(r->exit_calls, 1);
  EXPECT_EQ(r->exit.error.rfind(exec->label() + ": cannot open a stream to unix socket " +
                                    missing + " (no such socket",
                                0),
            0u)
      << r->exit.error;
  EXPECT_EQ(r->out, "");
  // Not a connection problem: commands and streams still work.
  EXPECT_TRUE(exec->health().ok());
  EXPECT_EQ(RunToEnd(loop, *exec, "echo still").out, "still\n");
  auto ok = std::make_shared<Collected>();
  auto again = exec->OpenUnixStream(host.socket_path, CollectInto(ok));
  ASSERT_TRUE(again.ok());
  (*again)->WriteStdin(kPing);
  ASSERT_TRUE(PollUntil(loop, [&] { return ok->finished(); }, std::chrono::seconds(20)));
  EXPECT_EQ(ok->exit.code, 0) << ok->exit.error;
}

// sshd's MaxSessions (100 on the bed) counts exec sessions only; streams
// are not held back by it nor by commands waiting for a slot.
TEST(SshStream, ManyStreamsAndCommandsRunSideBySideOnOneSession) {
  TempDir dir;
  StreamHost host = FirstHost(dir);
  EventLoop loop;
  auto exec = Connect(loop, host.options);
  ASSERT_TRUE(exec);
  std::vector<std::shared_ptr<Collected>> pings, commands;
  std::vector<std::unique_ptr<Command>> handles;
  for (int i = 0; i < 30; ++i) {
    pings.push_back(std::make_shared<Collected>());
    auto s = exec->OpenUnixStream(host.socket_path, CollectInto(pings.back()));
    ASSERT_TRUE(s.ok());
    (*s)->WriteStdin(kPing);
    handles.push_back(std::move(s).value());
    commands.push_back(std::make_shared<Collected>());
    auto c = exec->Start("echo " + std::to_string(i), CollectInto(commands.back()));
    ASSERT_TRUE(c.ok());
    handles.push_back(std::move(c).value());
  }
  auto all_done = [&] {
    for (auto& v : {&pings, &commands}) {
      for (auto& r : *v) {
        if (!r->finished()) return false;
      }
    }
    return true;
  };
  ASSERT_TRUE(PollUntil(loop, all_done, std::chrono::seconds(30)));
  for (int i = 0; i < 30; ++i) {
    EXPECT_EQ(pings[i]->exit.code, 0) << pings[i]->exit.error;
    EXPECT_EQ(pings[i]->out.rfind("HTTP/1.1 200 OK", 0), 0u) << pings[i]->out;
    EXPECT_EQ(commands[i]->out, std::to_string(i) + "\n");
  }
}

TEST(SshStream, AHostWhoseSshdForbidsStreamsIsReportedNamingTheHostTheSocketAndTheSetting) {
  TempDir dir;
  const auto& bed = barge::testing::GetBed();
  ASSERT_FALSE(bed.hosts.empty());
  const auto& h = bed.hosts[0];
  // A second sshd of that host, on port 2232, with AllowStreamLocalForwarding
  // no; its files in the bed's directory, which the host's private /tmp shows.
  const std::string sshd_dir = bed.dir + "/stream-test-sshd";
  std::filesystem::create_directories(sshd_dir);
  const std::string pidfile = sshd_dir + "/sshd.pid";
  std::filesystem::remove(pidfile);
  std::istringstream base(ReadFile(bed.dir + "/" + h.name + "/sshd_config"));
  std::string conf;
  for (std::string l; std::getline(base, l);) {
    if (l.rfind("ListenAddress", 0) == 0) l = "ListenAddress " + h.address + ":2232";
    if (l.rfind("PidFile", 0) == 0) l = "PidFile " + pidfile;
    conf += l + "\n";
  }
  conf += "AllowStreamLocalForwarding no\n";
  testing::WriteFile(sshd_dir + "/sshd_config", conf);
  barge::testing::RunShell(bed.raw.at("BED_SCRIPT") + " exec " + h.name + " sh -c " +
                           ShellQuote("/usr/sbin/sshd -f " + sshd_dir + "/sshd_config -E " +
                                      sshd_dir + "/sshd.log") +
                           " 2>&1");
  for (int i = 0; i < 50 && !testing::Exists(pidfile); ++i) usleep(100 * 1000);
  ASSERT_TRUE(testing::Exists(pidfile)) << ReadFile(sshd_dir + "/sshd.log");
  const int sshd_pid = std::atoi(ReadFile(pidfile).c_str());

  SessionOptions o = BedOptions(dir);
  o.host = h.address;
  o.port = 2232;
  o.known_hosts_file = dir.File("known_hosts");
  testing::WriteFile(o.known_hosts_file,
                     "[" + h.address + "]:2232 " +
                         ReadFile(bed.dir + "/" + h.name + "/ssh_host_ed25519_key.pub"));
  {
    EventLoop loop;
    auto exec = Connect(loop, o);
    if (exec) {
      auto r = std::make_shared<Collected>();
      auto stream = exec->OpenUnixStream(h.docker_host.substr(7), CollectInto(r));
      ASSERT_TRUE(stream.ok());
      ASSERT_TRUE(PollUntil(loop, [&] { return r->finished(); }, std::chrono::seconds(20)));
      EXPECT_FALSE(r->exit.known());
      // OpenSSH 9.2 says "open failed", as for a missing socket: the
      // message names the setting among the possible causes.
      EXPECT_EQ(r->exit.error.rfind(exec->label() + ": cannot open a stream to unix socket ", 0),
                0u)
          << r->exit.error;
      EXPECT_NE(r->exit.error.find("AllowStreamLocalForwarding no"), std::string::npos)
          << r->exit.error;
      EXPECT_NE(r->exit.error.find(h.docker_host.substr(7)), std::string::npos) << r->exit.error;
      // Commands on that session are unaffected.
      EXPECT_EQ(RunToEnd(loop, *exec, "echo fine").out, "fine\n");
    }
  }
  // The sshd removes its pid file as it exits: wait for that before
  // removing the directory (a removal racing it failed once).
  if (sshd_pid > 0 && kill(sshd_pid, SIGTERM) == 0) {
    for (int i = 0; i < 50 && testing::Exists(pidfile); ++i) usleep(100 * 1000);
  }
  std::error_code ec;
  std::filesystem::remove_all(sshd_dir, ec);
  EXPECT_FALSE(ec) << "cannot remove " << sshd_dir << ": " << ec.message();
}

int ParentOf(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("PPid:\t", 0) == 0) return std::stoi(line.substr(6));
  }
  return 0;
}

std::string Cmdline(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline");
  std::stringstream s;
  s << in.rdbuf();
  std::string out = s.str();
  for (char& c : out) {
    if (c == '\0') c = ' ';
  }
  return out;
}

TEST(SshStream, ACutConnectionEndsAnOpenStreamWithAnErrorNamingTheHostAndTheSocket) {
  TempDir dir;
  StreamHost host = FirstHost(dir);
  EventLoop loop;
  auto exec = Connect(loop, host.options);
  ASSERT_TRUE(exec);
  // An engine request that never ends by itself: the event stream.
  auto events = std::make_shared<Collected>();
  auto stream = exec->OpenUnixStream(host.socket_path, CollectInto(events));
  ASSERT_TRUE(stream.ok());
  (*stream)->WriteStdin("GET /events HTTP/1.1\r\nHost: docker\r\n\r\n");
  auto shell = std::make_shared<Collected>();
  auto command = exec->Start("echo $PPID $$; exec sleep 30", CollectInto(shell));
  ASSERT_TRUE(command.ok());
  ASSERT_TRUE(PollUntil(loop, [&] {
    return shell->out.find('\n') != std::string::npos &&
           events->out.find("\r\n\r\n") != std::string::npos;
  }));
  EXPECT_EQ(events->out.rfind("HTTP/1.1 200 OK", 0), 0u) << events->out;
  std::istringstream pids(shell->out);
  int sshd_pid = 0, sleep_pid = 0;
  pids >> sshd_pid >> sleep_pid;
  const std::string cmd = Cmdline(sshd_pid);
  ASSERT_EQ(cmd.rfind("sshd: ", 0), 0u) << "not an sshd session process: " << cmd;
  ASSERT_EQ(cmd.find("[listener]"), std::string::npos);
  const int monitor = ParentOf(sshd_pid);
  ASSERT_EQ(kill(sshd_pid, SIGKILL), 0);
  if (Cmdline(monitor).find("[priv]") != std::string::npos) kill(monitor, SIGKILL);

  ASSERT_TRUE(PollUntil(loop, [&] { return events->finished(); }, std::chrono::seconds(10)));
  EXPECT_EQ(events->exit_calls, 1);
  EXPECT_FALSE(events->exit.known());
  EXPECT_EQ(events->exit.error.rfind(exec->label() + ": connection lost", 0), 0u)
      << events->exit.error;
  EXPECT_NE(events->exit.error.find("(stream to unix socket " + host.socket_path + ")"),
            std::string::npos)
      << events->exit.error;
  auto after = exec->OpenUnixStream(host.socket_path, {});
  EXPECT_FALSE(after.ok());
  if (sleep_pid > 0 && Cmdline(sleep_pid).rfind("sleep ", 0) == 0) kill(sleep_pid, SIGKILL);
}

}  // namespace
}  // namespace barge::ssh
