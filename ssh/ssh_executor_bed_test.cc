// SshExecutor against the real sshd of the test bed: exec channels, streams,
// exit codes, quoting through a real remote shell, concurrency, stdin, a
// connection that is cut, and hosts that stop answering (dead_after).
#include "ssh/connect_all.h"
#include "ssh/ssh_executor.h"

#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/bed_test_util.h"
#include "ssh/quote.h"
#include "tests/test_seed.h"

namespace barge::ssh {
namespace {

using std::chrono::milliseconds;
using testing::BedLabel;
using testing::BedOptions;
using testing::Collected;
using testing::CollectInto;
using testing::PollUntil;
using testing::RunProgram;
using testing::RunToEnd;
using testing::TempDir;
using testing::WriteFile;

std::unique_ptr<SshExecutor> ConnectToBed(EventLoop& loop, const TempDir& dir) {
  auto session = Session::Connect(BedOptions(dir));
  EXPECT_TRUE(session.ok()) << session.status().message();
  if (!session.ok()) return nullptr;
  return std::make_unique<SshExecutor>(std::move(session).value(), &loop);
}

bool AllFinished(const std::vector<std::shared_ptr<Collected>>& results) {
  for (const auto& r : results) {
    if (!r->finished()) return false;
  }
  return true;
}

// Random valid UTF-8 (no NUL) up to `max_bytes`, rich in shell syntax.
std::string RandomUtf8(std::mt19937& rng, size_t max_bytes) {
  static const std::vector<std::string> kPieces = {
      "'", "\"", "`", "$(", ")", "${", "}", ";", "&&", "||", "|", "\n", "\t", " ", "\\",
      "*", "?", "[", "]", "~", "#", "!", "<", ">", "é", "✓", "日本", "🚀", "a", "Z", "0"};
  std::uniform_int_distribution<size_t> size(0, max_bytes);
  std::uniform_int_distribution<size_t> pick(0, kPieces.size() - 1);
  size_t target = size(rng);
  std::string s;
  while (s.size() < target) s += kPieces[pick(rng)];
  return s;
}

// Random bytes 1..255 (not necessarily UTF-8).
std::string RandomBytes(std::mt19937& rng, size_t max_bytes) {
  std::uniform_int_distribution<size_t> size(0, max_bytes);
  std::uniform_int_distribution<int> byte(1, 255);
  std::string s(size(rng), ' ');
  for (char& c : s) c = static_cast<char>(byte(rng));
  return s;
}

TEST(SshExecutor, RunsACommandWithSeparateStreamsAndItsExitCode) {
  EventLoop loop;
  TempDir dir;
  auto exec = ConnectToBed(loop, dir);
  ASSERT_TRUE(exec);
  EXPECT_EQ(exec->label(), BedLabel());
  Collected r = RunToEnd(loop, *exec, "echo out; echo err >&2; echo out2; exit 3");
  EXPECT_EQ(r.out, "out\nout2\n");
  EXPECT_EQ(r.err, "err\n");
  EXPECT_TRUE(r.exit.known()) << r.exit.error;
  EXPECT_EQ(r.exit.code, 3);
  EXPECT_EQ(r.exit_calls, 1);
  EXPECT_TRUE(exec->health().ok());
}

TEST(SshExecutor, ReportsDeathBySignalAs128PlusTheSignalNumber) {
  EventLoop loop;
  TempDir dir;
  auto exec = ConnectToBed(loop, dir);
  ASSERT_TRUE(exec);
  Collected killed = RunToEnd(loop, *exec, "echo before; kill -KILL $$");
  EXPECT_EQ(killed.out, "before\n");
  EXPECT_EQ(killed.exit.code, 137);
  EXPECT_EQ(killed.exit.signal, "KILL");
  Collected term = RunToEnd(loop, *exec, "kill -TERM $$");
  EXPECT_EQ(term.exit.code, 143);
  EXPECT_EQ(term.exit.signal, "TERM");
}

TEST(SshExecutor, CallsOnExitOnceAfterAllOfALargeOutput) {
  EventLoop loop;
  TempDir dir;
  auto exec = ConnectToBed(loop, dir);
  ASSERT_TRUE(exec);
  // Several times the channel window on stdout, some on stderr.
  Collected r = RunToEnd(loop, *exec,
                         "head -c 5000000 /dev/zero; head -c 300000 /dev/zero >&2; exit 7");
  EXPECT_EQ(r.out.size(), 5000000u);
  EXPECT_EQ(r.err.size(), 300000u);
  EXPECT_EQ(r.bytes_at_exit, 5300000u);
  EXPECT_EQ(r.exit.code, 7);
  EXPECT_EQ(r.exit_calls, 1);
}

TEST(SshExecutor, PausedOutputStopsTheChannelWindowSoTheCommandBlocksAndAllOfItArrivesOnceUnpaused) {
  EventLoop loop;
  TempDir dir;
  auto exec = ConnectToBed(loop, dir);
  ASSERT_TRUE(exec);
  // Many times libssh's window (1.28 MB): the writer must block.
  const size_t kBytes = 16 << 20;
  testing::PausedRun run = testing::RunPaused(loop, *exec, kBytes, milliseconds(2000));
  EXPECT_EQ(run.out_during_pause, 0u);
  EXPECT_FALSE(run.exited_during_pause);
  EXPECT_FALSE(run.err_during_pause);
  EXPECT_EQ(run.end.out.size(), kBytes);
  EXPECT_EQ(run.end.out.find_first_not_of('\0'), std::string::npos);
  EXPECT_EQ(run.end.err, "written\n");
  EXPECT_EQ(run.end.exit.code, 0);
  EXPECT_EQ(run.end.exit_calls, 1);
}

TEST(SshExecutor, RoundTripsOneMebibyteThroughStdin) {
  EventLoop loop;
  TempDir dir;
  auto exec = ConnectToBed(loop, dir);
  ASSERT_TRUE(exec);
  std::mt19937 rng(barge::testing::TestSeed(1));
  std::string data(1 << 20, '\0');
  for (char& c : data) c = static_cast<char>(rng());
  // More than the channel's initial window, so writes must wait for it.
  std::string big = data + data + data;
  Collected r = RunToEnd(loop, *exec, "cat", big);
  EXPECT_EQ(r.exit.code, 0);
  ASSERT_EQ(r.out.size(), big.size());
  EXPECT_TRUE(r.out == big);
}

TEST(SshExecutor, QuotedArgumentsArriveByteExactThroughTheRemoteShell) {
  EventLoop loop;
  TempDir dir;
  auto exec = ConnectToBed(loop, dir);
  ASSERT_TRUE(exec);

  // A scratch directory on the host, to catch a payload that ran.
  Collected made = RunToEnd(loop, *exec, "mktemp -d");
  ASSERT_EQ(made.exit.code, 0);
  std::string remote_dir = made.out.substr(0, made.out.find('\n'));
  ASSERT_FALSE(remote_dir.empty());

  std::vector<std::string> words = {
      "",          "it's",       "'",           "\"x\"",         "$HOME",
      "${PATH}",   "$(touch MARKER)", "`touch MARKER`", "; touch MARKER", "&& touch MARKER",
      "| touch MARKER", "\ntouch MARKER\n", "a\tb  c",  "*",          "~",
      "~root",     "#no comment", "back\\slash", "héllo wörld ✓ 日本語 🚀",
      "'; touch MARKER; '", "x' && touch MARKER && echo '"};
  std::mt19937 rng(barge::testing::TestSeed(99));
  for (int i = 0; i < 60; ++i) words.push_back(RandomUtf8(rng, 4096));
  for (int i = 0; i < 40; ++i) words.push_back(RandomBytes(rng, 4096));

  // Up to 10 at a time (sshd's default MaxSessions).
  for (size_t start = 0; start < words.size(); start += 10) {
    std::vector<std::shared_ptr<Collected>> results;
    std::vector<std::unique_ptr<Command>> commands;
    size_t end = std::min(words.size(), start + 10);
    for (size_t i = start; i < end; ++i) {
      auto r = std::make_shared<Collected>();
      std::string line = ShellJoin({"cd", remote_dir}) + " && " + ShellJoin({"printf", "%s", words[i]});
      auto cmd = exec->Start(line, CollectInto(r));
      ASSERT_TRUE(cmd.ok());
      commands.push_back(std::move(cmd).value());
      results.push_back(r);
    }
    ASSERT_TRUE(PollUntil(loop, [&] { return AllFinished(results); }));
    for (size_t i = start; i < end; ++i) {
      const Collected& r = *results[i - start];
      EXPECT_EQ(r.exit.code, 0) << "word " << i << ": " << r.err;
      ASSERT_EQ(r.out, words[i]) << "word " << i << " quoted as " << ShellQuote(words[i]);
    }
  }
  Collected listing = RunToEnd(loop, *exec, ShellJoin({"ls", "-A", remote_dir}));
  EXPECT_EQ(listing.exit.code, 0);
  EXPECT_EQ(listing.out, "") << "a payload ran on the host";
  RunToEnd(loop, *exec, ShellJoin({"rm", "-rf", remote_dir}));
}

// A command line far longer than one argv string may be on Linux
// (MAX_ARG_STRLEN, 128 KiB: sshd runs the line as the one argument of
// `SHELL -c`) and than sshd's largest packet (256 KiB).
std::string LongWord(std::mt19937& rng, size_t bytes) {
  std::string word;
  while (word.size() < bytes) word += RandomUtf8(rng, 4096) + "'";
  word.resize(bytes);
  // Do not end inside a UTF-8 sequence.
  while (!word.empty() && (static_cast<unsigned char>(word.back()) & 0x80) != 0) word.pop_back();
  return word;
}

TEST(SshExecutor, ACommandLineLongerThanTheKernelAndSshdLimitsRunsAndItsStdinStillArrives) {
  EventLoop loop;
  TempDir dir;
  auto exec = ConnectToBed(loop, dir);
  ASSERT_TRUE(exec);
  std::mt19937 rng(barge::testing::TestSeed(300));
  const std::string word = LongWord(rng, 300 * 1024);
  const std::string line = ShellJoin({"printf", "%s", word}) + " && cat && exit 7";
  ASSERT_GT(line.size(), 300u * 1024);
  // More stdin than the channel's window, written before the channel opens.
  std::string data(3 << 20, '\0');
  for (char& c : data) c = static_cast<char>(rng());
  Collected r = RunToEnd(loop, *exec, line, data);
  EXPECT_TRUE(r.exit.known()) << r.exit.error;
  EXPECT_EQ(r.exit.code, 7) << r.err.substr(0, 500);
  EXPECT_EQ(r.err, "");
  ASSERT_EQ(r.out.size(), word.size() + data.size());
  EXPECT_TRUE(r.out.compare(0, word.size(), word) == 0) << "the argument changed";
  EXPECT_TRUE(r.out.compare(word.size(), data.size(), data) == 0) << "stdin changed";
  // The session is intact for the next command.
  EXPECT_TRUE(exec->health().ok()) << exec->health().message();
  EXPECT_EQ(RunToEnd(loop, *exec, "echo next").out, "next\n");
}

TEST(SshExecutor, CommandLinesOfEverySizeAroundTheLimitsRunByteExact) {
  EventLoop loop;
  TempDir dir;
  auto exec = ConnectToBed(loop, dir);
  ASSERT_TRUE(exec);
  // printf is a builtin of the remote sh: its argument never meets execve.
  const std::string prefix = "printf %s ";
  for (size_t size : {size_t{60} * 1024, size_t{64} * 1024 - 1, size_t{64} * 1024,
                      size_t{64} * 1024 + 1, size_t{128} * 1024, size_t{256} * 1024,
                      size_t{4} << 20}) {
    // A word that ShellQuote leaves as it is: the line is exactly `size` long.
    std::string word(size - prefix.size(), 'a');
    Collected r = RunToEnd(loop, *exec, prefix + word, "", std::chrono::seconds(60));
    EXPECT_EQ(r.exit.code, 0) << size << ": " << r.exit.error << r.err.substr(0, 300);
    EXPECT_TRUE(r.out == word) << size << ": got " << r.out.size() << " bytes";
  }
  // Quoting a 64 KiB run of single quotes makes it four times as long.
  const std::string quotes(64 * 1024, '\'');
  Collected r = RunToEnd(loop, *exec, ShellJoin({"printf", "%s", quotes}));
  EXPECT_EQ(r.exit.code, 0) << r.exit.error << r.err.substr(0, 300);
  EXPECT_TRUE(r.out == quotes) << "got " << r.out.size() << " bytes";
  EXPECT_TRUE(exec->health().ok()) << exec->health().message();
}

TEST(SshExecutor, ALongCommandLineLeavesNoScriptBehindOnTheHost) {
  EventLoop loop;
  TempDir dir;
  auto exec = ConnectToBed(loop, dir);
  ASSERT_TRUE(exec);
  // $0 names the script the long line was handed over in.
  const std::string filler(200 * 1024, 'x');
  Collected r = RunToEnd(loop, *exec, ": " + filler + "; printf %s \"$0\"");
  ASSERT_EQ(r.exit.code, 0) << r.exit.error << r.err;
  ASSERT_FALSE(r.out.empty());
  Collected gone = RunToEnd(loop, *exec, ShellJoin({"test", "-e", r.out}));
  EXPECT_EQ(gone.exit.code, 1) << r.out << " is still on the host";
  // Nor when the command is killed.
  Collected killed = RunToEnd(loop, *exec, ": " + filler + "; printf %s \"$0\"; kill -KILL $$");
  EXPECT_EQ(killed.exit.code, 137);
  Collected gone2 = RunToEnd(loop, *exec, ShellJoin({"test", "-e", killed.out}));
  EXPECT_EQ(gone2.exit.code, 1) << killed.out << " is still on the host";
}

TEST(SshExecutor, ALongCommandLineWhoseStdinIsNeverWrittenSeesEofOnClose) {
  EventLoop loop;
  TempDir dir;
  auto exec = ConnectToBed(loop, dir);
  ASSERT_TRUE(exec);
  const std::string filler(150 * 1024, 'y');
  Collected r = RunToEnd(loop, *exec, ": " + filler + "; wc -c");
  EXPECT_EQ(r.exit.code, 0) << r.exit.error << r.err;
  EXPECT_EQ(r.out, "0\n");
}

TEST(SshExecutor, ManyLongCommandLinesAtOnceEachGetTheirOwnStdin) {
  EventLoop loop;
  TempDir dir;
  auto exec = ConnectToBed(loop, dir);
  ASSERT_TRUE(exec);
  std::mt19937 rng(barge::testing::TestSeed(8));
  std::vector<std::string> words, inputs;
  std::vector<std::shared_ptr<Collected>> results;
  std::vector<std::unique_ptr<Command>> commands;
  for (int i = 0; i < 8; ++i) {
    words.push_back(LongWord(rng, (100 + 40 * i) * 1024));
    inputs.push_back("stdin of command " + std::to_string(i) + "\n" + RandomUtf8(rng, 200000));
    auto r = std::make_shared<Collected>();
    auto cmd = exec->Start(ShellJoin({"printf", "%s", words[i]}) + "; cat", CollectInto(r));
    ASSERT_TRUE(cmd.ok());
    // Stdin in two pieces, the second after the channel is running.
    (*cmd)->WriteStdin(inputs[i].substr(0, 1000));
    commands.push_back(std::move(cmd).value());
    results.push_back(r);
  }
  loop.Poll(milliseconds(50));
  for (int i = 0; i < 8; ++i) {
    commands[i]->WriteStdin(inputs[i].substr(1000));
    commands[i]->CloseStdin();
  }
  ASSERT_TRUE(PollUntil(loop, [&] { return AllFinished(results); }, std::chrono::seconds(60)));
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(results[i]->exit.code, 0) << i << ": " << results[i]->exit.error << results[i]->err;
    EXPECT_TRUE(results[i]->out == words[i] + inputs[i]) << i;
  }
}

TEST(SshExecutor, TheLongCommandBootstrapNeverRunsAScriptThatArrivedShort) {
  EventLoop loop;
  TempDir dir;
  auto exec = ConnectToBed(loop, dir);
  ASSERT_TRUE(exec);
  Collected made = RunToEnd(loop, *exec, "mktemp -d");
  ASSERT_EQ(made.exit.code, 0);
  const std::string remote_dir = made.out.substr(0, made.out.find('\n'));
  const std::string script = ShellJoin({"touch", remote_dir + "/ran"});
  // Stdin ends one byte short of what the bootstrap was told.
  Collected r = RunToEnd(loop, *exec,
                         "TMPDIR=" + ShellQuote(remote_dir) + "; export TMPDIR; " +
                             LongCommandBootstrap(script.size() + 1),
                         script);
  EXPECT_EQ(r.exit.code, 126);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("cannot hand the command line (" + std::to_string(script.size() + 1) +
                       " bytes) to the shell"),
            std::string::npos)
      << r.err;
  // Nothing ran, nothing is left.
  Collected listing = RunToEnd(loop, *exec, ShellJoin({"ls", "-A", remote_dir}));
  EXPECT_EQ(listing.out, "");
  // A directory that cannot be made: the same, with mktemp's reason.
  Collected nodir = RunToEnd(loop, *exec,
                             "TMPDIR=" + ShellQuote(remote_dir + "/missing") + "; export TMPDIR; " +
                                 LongCommandBootstrap(script.size()),
                             script);
  EXPECT_EQ(nodir.exit.code, 126);
  EXPECT_NE(nodir.err.find("mktemp"), std::string::npos) << nodir.err;
  // And the whole script runs.
  Collected whole = RunToEnd(loop, *exec,
                             "TMPDIR=" + ShellQuote(remote_dir) + "; export TMPDIR; " +
                                 LongCommandBootstrap(script.size()),
                             script);
  EXPECT_EQ(whole.exit.code, 0) << whole.err;
  EXPECT_EQ(RunToEnd(loop, *exec, ShellJoin({"test", "-e", remote_dir + "/ran"})).exit.code, 0);
  RunToEnd(loop, *exec, ShellJoin({"rm", "-rf", remote_dir}));
}

TEST(SshExecutor, RunsFortyCommandsAtOnceOnOneSession) {
  EventLoop loop;
  TempDir dir;
  auto exec = ConnectToBed(loop, dir);
  ASSERT_TRUE(exec);
  std::vector<std::shared_ptr<Collected>> results;
  std::vector<std::unique_ptr<Command>> commands;
  for (int i = 0; i < 40; ++i) {
    auto r = std::make_shared<Collected>();
    std::string n = std::to_string(i);
    auto cmd = exec->Start("echo start " + n + "; sleep 0.3; echo end " + n + " >&2; exit " +
                               std::to_string(i % 5),
                           CollectInto(r));
    ASSERT_TRUE(cmd.ok());
    results.push_back(r);
    commands.push_back(std::move(cmd).value());
  }
  ASSERT_TRUE(PollUntil(loop, [&] { return AllFinished(results); }, std::chrono::seconds(60)));
  for (int i = 0; i < 40; ++i) {
    EXPECT_TRUE(results[i]->exit.known()) << i << ": " << results[i]->exit.error;
    EXPECT_EQ(results[i]->out, "start " + std::to_string(i) + "\n");
    EXPECT_EQ(results[i]->err, "end " + std::to_string(i) + "\n");
    EXPECT_EQ(results[i]->exit.code, i % 5);
    EXPECT_EQ(results[i]->exit_calls, 1);
  }
  EXPECT_TRUE(exec->health().ok());
}

// An sshd of the test's own, for settings the bed's sshd does not have
// (e.g. a small MaxSessions). Listens on 127.0.0.1 at a free port, accepts
// the bed's key, runs in a mount namespace with private /run (for
// /run/sshd) and /root. Needs root, like the bed.
class PrivateSshd {
 public:
  PrivateSshd(const TempDir& dir, const std::string& extra_config) : dir_(dir) {
    const auto& bed = barge::testing::GetBed();
    int code = -1;
    RunProgram({"/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f",
                dir.File("host_key")},
               "", &code);
    EXPECT_EQ(code, 0);
    std::string pub = RunProgram({"/usr/bin/ssh-keygen", "-y", "-f", bed.key}, "", &code);
    EXPECT_EQ(code, 0);
    WriteFile(dir.File("authorized_keys"), pub);
    // sshd binds the port of its configuration itself, so a port found free
    // a moment ago may be taken by then: an sshd that exits at start is
    // started again on another port, up to 5 times. Ready once its own log
    // says it listens (a connect alone could reach whoever took the port).
    for (int attempt = 0; attempt < 5 && !Listening(); ++attempt) Start(extra_config);
    EXPECT_TRUE(Listening()) << testing::ReadFile(dir.File("sshd.log"));
  }
  ~PrivateSshd() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      int status;
      waitpid(pid_, &status, 0);
    }
  }
  PrivateSshd(const PrivateSshd&) = delete;
  PrivateSshd& operator=(const PrivateSshd&) = delete;

  SessionOptions Options() const {
    SessionOptions o = BedOptions(dir_);
    o.host = "127.0.0.1";
    o.port = port_;
    o.known_hosts_file = known_hosts_;
    return o;
  }
  std::string Log() const { return testing::ReadFile(dir_.File("sshd.log")); }

 private:
  // One try: sshd on a port free a moment ago; waits (at most 5 s) until
  // it listens or exits.
  void Start(const std::string& extra_config) {
    port_ = FreePort();
    WriteFile(dir_.File("sshd_config"),
              "ListenAddress 127.0.0.1:" + std::to_string(port_) + "\nHostKey " +
                  dir_.File("host_key") + "\nPidFile " + dir_.File("sshd.pid") +
                  "\nAuthorizedKeysFile " + dir_.File("authorized_keys") +
                  "\nStrictModes no\nUsePAM no\nPermitRootLogin prohibit-password\n"
                  "PasswordAuthentication no\nKbdInteractiveAuthentication no\n" +
                  extra_config + "\n");
    std::string host_pub = testing::ReadFile(dir_.File("host_key.pub"));
    known_hosts_ = dir_.File("known_hosts");
    WriteFile(known_hosts_, "[127.0.0.1]:" + std::to_string(port_) + " " +
                                host_pub.substr(0, host_pub.rfind(' ')) + "\n");
    std::string script =
        "mount --make-rprivate / && mount -t tmpfs tmpfs /run && mkdir -m 755 /run/sshd && "
        "mount -t tmpfs tmpfs /root && exec /usr/sbin/sshd -D -e -f " +
        dir_.File("sshd_config") + " 2>" + dir_.File("sshd.log");
    pid_ = fork();
    if (pid_ == 0) {
      execl("/usr/bin/unshare", "unshare", "-m", "/bin/sh", "-c", script.c_str(), nullptr);
      _exit(127);
    }
    for (int i = 0; i < 100 && !Listening(); ++i) {
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) {  // exited: the port was taken
        pid_ = -1;
        return;
      }
      usleep(50 * 1000);
    }
    if (!Listening()) {  // neither listens nor exited: stop it, a later try starts anew
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }
  bool Listening() const {
    return pid_ > 0 && testing::ReadFile(dir_.File("sshd.log"))
                               .find("Server listening on 127.0.0.1 port " + std::to_string(port_) +
                                     ".") != std::string::npos;
  }

  static int FreePort() {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr = {};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    socklen_t len = sizeof addr;
    getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    close(fd);
    return ntohs(addr.sin_port);
  }

  const TempDir& dir_;
  int port_ = 0;
  pid_t pid_ = -1;
  std::string known_hosts_;
};

TEST(SshExecutor, RunsMoreCommandsThanTheHostsMaxSessionsByWaitingForFreeSlots) {
  TempDir dir;
  PrivateSshd sshd(dir, "MaxSessions 4");
  EventLoop loop;
  auto session = Session::Connect(sshd.Options());
  ASSERT_TRUE(session.ok()) << session.status().message();
  auto exec = std::make_unique<SshExecutor>(std::move(session).value(), &loop);
  std::vector<std::shared_ptr<Collected>> results;
  std::vector<std::unique_ptr<Command>> commands;
  for (int i = 0; i < 20; ++i) {
    auto r = std::make_shared<Collected>();
    auto cmd = exec->Start("sleep 0.1; echo " + std::to_string(i), CollectInto(r));
    ASSERT_TRUE(cmd.ok());
    results.push_back(r);
    commands.push_back(std::move(cmd).value());
  }
  ASSERT_TRUE(PollUntil(loop, [&] { return AllFinished(results); }, std::chrono::seconds(60)));
  for (int i = 0; i < 20; ++i) {
    EXPECT_TRUE(results[i]->exit.known()) << i << ": " << results[i]->exit.error;
    EXPECT_EQ(results[i]->exit.code, 0);
    EXPECT_EQ(results[i]->out, std::to_string(i) + "\n");
  }
  // The host did refuse sessions beyond its limit: the waiting was real.
  EXPECT_NE(sshd.Log().find("no more sessions"), std::string::npos);
  // A later command still runs.
  Collected later = RunToEnd(loop, *exec, "echo later");
  EXPECT_EQ(later.out, "later\n");
  exec.reset();
}

TEST(SshExecutor, DrivesManySessionsFromOneLoop) {
  EventLoop loop;
  TempDir dir;
  std::vector<SessionOptions> options(8, BedOptions(dir));
  auto sessions = ConnectAll(options, 4, &loop);
  std::vector<std::unique_ptr<SshExecutor>> executors;
  for (auto& s : sessions) {
    ASSERT_TRUE(s.ok()) << s.status().message();
    executors.push_back(std::make_unique<SshExecutor>(std::move(s).value(), &loop));
  }
  std::vector<std::shared_ptr<Collected>> results;
  std::vector<std::unique_ptr<Command>> commands;
  for (size_t i = 0; i < executors.size(); ++i) {
    for (int j = 0; j < 3; ++j) {
      auto r = std::make_shared<Collected>();
      auto cmd = executors[i]->Start("sleep 0.2; echo " + std::to_string(i * 10 + j),
                                     CollectInto(r));
      ASSERT_TRUE(cmd.ok());
      results.push_back(r);
      commands.push_back(std::move(cmd).value());
    }
  }
  ASSERT_TRUE(PollUntil(loop, [&] { return AllFinished(results); }));
  for (size_t i = 0; i < executors.size(); ++i) {
    for (int j = 0; j < 3; ++j) {
      EXPECT_EQ(results[i * 3 + j]->out, std::to_string(i * 10 + j) + "\n");
    }
  }
}

TEST(SshExecutor, NeverCallsOnExitFromInsideStart) {
  EventLoop loop;
  TempDir dir;
  auto exec = ConnectToBed(loop, dir);
  ASSERT_TRUE(exec);
  auto r = std::make_shared<Collected>();
  auto cmd = exec->Start("true", CollectInto(r));
  ASSERT_TRUE(cmd.ok());
  EXPECT_EQ(r->exit_calls, 0);
  EXPECT_FALSE((*cmd)->done());
  ASSERT_TRUE(PollUntil(loop, [&] { return r->finished(); }));
  EXPECT_TRUE((*cmd)->done());
}

TEST(SshExecutor, DroppingACommandMidRunStopsItsCallbacksAndKeepsTheSession) {
  EventLoop loop;
  TempDir dir;
  auto exec = ConnectToBed(loop, dir);
  ASSERT_TRUE(exec);
  auto r = std::make_shared<Collected>();
  auto cmd = exec->Start("echo early; sleep 0.4; echo late", CollectInto(r));
  ASSERT_TRUE(cmd.ok());
  ASSERT_TRUE(PollUntil(loop, [&] { return !r->out.empty(); }));
  cmd = Status::Error("dropped");
  auto until = EventLoop::Clock::now() + milliseconds(800);
  while (EventLoop::Clock::now() < until) loop.Poll(milliseconds(50));
  EXPECT_EQ(r->out, "early\n");
  EXPECT_EQ(r->exit_calls, 0);
  // Dropped right after Start, before the channel is even open.
  {
    auto quick = exec->Start("echo never seen", CollectInto(r));
    ASSERT_TRUE(quick.ok());
  }
  Collected after = RunToEnd(loop, *exec, "echo still fine");
  EXPECT_EQ(after.out, "still fine\n");
  EXPECT_EQ(r->exit_calls, 0);
}

TEST(SshExecutor, ACommandMayBeDroppedFromItsOwnCallbacks) {
  EventLoop loop;
  TempDir dir;
  auto exec = ConnectToBed(loop, dir);
  ASSERT_TRUE(exec);
  std::unique_ptr<Command> a, b;
  int outputs = 0;
  bool exited = false;
  CommandCallbacks ca;
  ca.on_stdout = [&](std::string_view) {
    ++outputs;
    a.reset();
  };
  CommandCallbacks cb;
  cb.on_exit = [&](const ExitStatus&) {
    exited = true;
    b.reset();
  };
  auto sa = exec->Start("echo one; sleep 0.1; echo two", std::move(ca));
  auto sb = exec->Start("echo x", std::move(cb));
  ASSERT_TRUE(sa.ok() && sb.ok());
  a = std::move(sa).value();
  b = std::move(sb).value();
  ASSERT_TRUE(PollUntil(loop, [&] { return exited && !a; }));
  auto until = EventLoop::Clock::now() + milliseconds(300);
  while (EventLoop::Clock::now() < until) loop.Poll(milliseconds(20));
  EXPECT_EQ(outputs, 1);
  EXPECT_EQ(b, nullptr);
}

TEST(SshExecutor, CommandsMayOutliveTheirExecutor) {
  EventLoop loop;
  TempDir dir;
  auto exec = ConnectToBed(loop, dir);
  ASSERT_TRUE(exec);
  auto r = std::make_shared<Collected>();
  auto cmd = exec->Start("sleep 0.2; echo x", CollectInto(r));
  ASSERT_TRUE(cmd.ok());
  loop.Poll(milliseconds(50));
  exec.reset();
  auto until = EventLoop::Clock::now() + milliseconds(500);
  while (EventLoop::Clock::now() < until) loop.Poll(milliseconds(50));
  EXPECT_EQ(r->exit_calls, 0);
  EXPECT_FALSE((*cmd)->done());
  (*cmd)->WriteStdin("ignored");
  (*cmd)->CloseStdin();
}

std::string ProcField(int pid, const std::string& file, const std::string& key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/" + file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) return line.substr(key.size());
  }
  return "";
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

// Kills the sshd processes that serve one connection (found from the remote
// shell's parent), never anything else: the listener survives.
void KillSshdServing(int session_pid) {
  std::string cmd = Cmdline(session_pid);
  ASSERT_EQ(cmd.rfind("sshd: ", 0), 0u) << "not an sshd session process: " << cmd;
  ASSERT_EQ(cmd.find("[listener]"), std::string::npos);
  int monitor = std::stoi(ProcField(session_pid, "status", "PPid:\t"));
  std::string monitor_cmd = Cmdline(monitor);
  ASSERT_EQ(kill(session_pid, SIGKILL), 0);
  if (monitor_cmd.rfind("sshd: ", 0) == 0 && monitor_cmd.find("[priv]") != std::string::npos) {
    kill(monitor, SIGKILL);
  }
}

TEST(SshExecutor, WhenTheConnectionIsCutEveryCommandFailsAndTheExecutorSaysSo) {
  EventLoop loop;
  TempDir dir;
  auto exec = ConnectToBed(loop, dir);
  ASSERT_TRUE(exec);
  int lost_calls = 0;
  Status lost;
  exec->set_on_connection_lost([&](const Status& s) {
    ++lost_calls;
    lost = s;
  });
  auto a = std::make_shared<Collected>();
  auto b = std::make_shared<Collected>();
  auto ca = exec->Start("echo $PPID $$; exec sleep 30", CollectInto(a));
  auto cb = exec->Start("echo $$; exec sleep 31", CollectInto(b));
  ASSERT_TRUE(ca.ok() && cb.ok());
  ASSERT_TRUE(PollUntil(loop, [&] {
    return a->out.find('\n') != std::string::npos && b->out.find('\n') != std::string::npos;
  }));
  std::istringstream pids(a->out);
  int sshd_pid = 0, sleep_a = 0, sleep_b = std::stoi(b->out);
  pids >> sshd_pid >> sleep_a;
  KillSshdServing(sshd_pid);

  // Correctness bound only: an EOF on the socket is noticed at once.
  ASSERT_TRUE(PollUntil(loop, [&] { return a->finished() && b->finished(); },
                        std::chrono::seconds(10)));
  for (const auto& r : {a, b}) {
    EXPECT_EQ(r->exit_calls, 1);
    EXPECT_FALSE(r->exit.known());
    EXPECT_EQ(r->exit.code, -1);
    EXPECT_EQ(r->exit.error.rfind(BedLabel() + ": connection lost", 0), 0u) << r->exit.error;
  }
  EXPECT_EQ(lost_calls, 1);
  EXPECT_FALSE(exec->health().ok());
  EXPECT_EQ(exec->health().message(), lost.message());
  auto after = exec->Start("true", CollectInto(std::make_shared<Collected>()));
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.status().message(), lost.message());
  // The dead session leaves nothing in the loop that keeps Poll from
  // sleeping (no busy loop on a closed fd).
  auto before = EventLoop::Clock::now();
  loop.Poll(milliseconds(200));
  EXPECT_GE(EventLoop::Clock::now() - before, milliseconds(150));
  EXPECT_EQ(lost_calls, 1);

  // The remote sleeps outlive their sshd; remove them.
  for (int pid : {sleep_a, sleep_b}) {
    if (Cmdline(pid).rfind("sleep ", 0) == 0) kill(pid, SIGKILL);
  }
}

// One host's dead connection must never be charged to another host. libssh
// reads a session's socket inside channel calls (open, read, write) by
// polling the poll context that socket is in, and marks the session it was
// called for as failed whenever that poll reports an error for ANY socket in
// it: with every session in one shared context, B's EOF found while A opens a
// channel failed A. Here B's sshd is killed while the loop is not polling, so
// the first thing that reads B's socket is A's channel open.
TEST(SshExecutor, AConnectionThatDiesIsChargedToItsOwnSessionNotToTheOneThatReadItFirst) {
  EventLoop loop;
  TempDir dir;
  auto a = ConnectToBed(loop, dir);
  auto b = ConnectToBed(loop, dir);
  ASSERT_TRUE(a && b);
  int a_lost = 0, b_lost = 0;
  a->set_on_connection_lost([&](const Status&) { ++a_lost; });
  b->set_on_connection_lost([&](const Status&) { ++b_lost; });
  auto on_b = std::make_shared<Collected>();
  auto cb = b->Start("echo $PPID $$; exec sleep 30", CollectInto(on_b));
  ASSERT_TRUE(cb.ok());
  ASSERT_TRUE(PollUntil(loop, [&] { return on_b->out.find('\n') != std::string::npos; }));
  std::istringstream pids(on_b->out);
  int sshd_pid = 0, sleep_pid = 0;
  pids >> sshd_pid >> sleep_pid;
  KillSshdServing(sshd_pid);
  // Let B's EOF reach the socket before anything reads it.
  std::this_thread::sleep_for(milliseconds(300));

  auto on_a = std::make_shared<Collected>();
  auto ca = a->Start("echo still here", CollectInto(on_a));
  ASSERT_TRUE(ca.ok());
  ASSERT_TRUE(PollUntil(loop, [&] { return on_a->finished() && on_b->finished(); },
                        std::chrono::seconds(10)));
  EXPECT_TRUE(on_a->exit.known()) << on_a->exit.error;
  EXPECT_EQ(on_a->exit.code, 0) << on_a->exit.error;
  EXPECT_EQ(on_a->out, "still here\n");
  EXPECT_TRUE(a->health().ok()) << a->health().message();
  EXPECT_EQ(a_lost, 0);
  EXPECT_FALSE(b->health().ok());
  EXPECT_EQ(b_lost, 1);
  // A keeps working afterwards.
  auto again = std::make_shared<Collected>();
  auto cagain = a->Start("echo again", CollectInto(again));
  ASSERT_TRUE(cagain.ok());
  ASSERT_TRUE(PollUntil(loop, [&] { return again->finished(); }));
  EXPECT_EQ(again->out, "again\n");
  if (Cmdline(sleep_pid).rfind("sleep ", 0) == 0) kill(sleep_pid, SIGKILL);
}

// --- Dead-connection detection (dead_after) ---------------------------------

int CountLines(const std::string& s) {
  return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

// The "client-address client-port server-port" a remote shell sees in
// $SSH_CLIENT, as the client port.
int ClientPort(const std::string& ssh_client_line) {
  std::istringstream in(ssh_client_line);
  std::string address;
  int client_port = 0;
  in >> address >> client_port;
  return client_port;
}

char ProcState(int pid) {
  std::string state = ProcField(pid, "status", "State:\t");
  return state.empty() ? '?' : state[0];
}

// The processes holding the server side of the TCP connection from local
// port `client_port` to `server_port` in this network namespace (from
// /proc/net/tcp and every process's fds), and their sshd ancestors up to,
// not including, the listener: every sshd process serving that connection.
std::set<int> SshdProcessesServing(int server_port, int client_port) {
  std::set<std::string> inodes;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
      fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >>
          timeout >> inode;
      auto port = [](const std::string& address) {
        return std::stoi(address.substr(address.rfind(':') + 1), nullptr, 16);
      };
      if (state == "01" && port(local) == server_port && port(remote) == client_port) {
        inodes.insert("socket:[" + inode + "]");
      }
    }
  }
  std::set<int> pids;
  if (inodes.empty()) return pids;
  DIR* proc = opendir("/proc");
  while (dirent* e = proc ? readdir(proc) : nullptr) {
    int pid = std::atoi(e->d_name);
    if (pid <= 0) continue;
    std::string fd_dir = "/proc/" + std::string(e->d_name) + "/fd";
    DIR* fds = opendir(fd_dir.c_str());
    while (dirent* f = fds ? readdir(fds) : nullptr) {
      char target[128];
      ssize_t n = readlink((fd_dir + "/" + f->d_name).c_str(), target, sizeof target - 1);
      if (n > 0 && inodes.count(std::string(target, static_cast<size_t>(n)))) pids.insert(pid);
    }
    if (fds) closedir(fds);
  }
  if (proc) closedir(proc);
  std::set<int> serving = pids;
  for (int pid : pids) {
    for (int up = std::atoi(ProcField(pid, "status", "PPid:\t").c_str()); up > 1;
         up = std::atoi(ProcField(up, "status", "PPid:\t").c_str())) {
      std::string cmd = Cmdline(up);
      if (cmd.rfind("sshd: ", 0) != 0 || cmd.find("[listener]") != std::string::npos) break;
      serving.insert(up);
    }
  }
  return serving;
}

// Stops (SIGSTOP) processes for its lifetime and resumes them (SIGCONT) when
// destroyed, however the test ends.
class StoppedProcesses {
 public:
  explicit StoppedProcesses(std::set<int> pids) : pids_(std::move(pids)) {
    for (int pid : pids_) EXPECT_EQ(kill(pid, SIGSTOP), 0) << "pid " << pid;
  }
  ~StoppedProcesses() {
    for (int pid : pids_) kill(pid, SIGCONT);
  }
  StoppedProcesses(const StoppedProcesses&) = delete;
  StoppedProcesses& operator=(const StoppedProcesses&) = delete;

  bool AllStopped() const {
    for (int pid : pids_) {
      if (ProcState(pid) != 'T') return false;
    }
    return true;
  }

 private:
  std::set<int> pids_;
};

// Takes a namespace host's link down for its lifetime (bed.sh exec NAME ip
// link set DEV down) and always brings it back up when destroyed.
class LinkDown {
 public:
  LinkDown(std::string host, std::string device)
      : host_(std::move(host)), device_(std::move(device)) {
    ok_ = Set("down");
  }
  ~LinkDown() {
    if (!Set("up")) ADD_FAILURE() << "cannot bring " << host_ << "'s " << device_ << " back up";
  }
  LinkDown(const LinkDown&) = delete;
  LinkDown& operator=(const LinkDown&) = delete;
  bool ok() const { return ok_; }

 private:
  bool Set(const std::string& state) {
    const std::string& script = barge::testing::GetBed().raw.at("BED_SCRIPT");
    int code = -1;
    RunProgram({script, "exec", host_, "ip", "link", "set", device_, state}, "", &code);
    return code == 0;
  }

  std::string host_;
  std::string device_;
  bool ok_ = false;
};

// Bytes this machine has received on its TCP connection from local port
// `client_port` to `server_port` (ss -ti), or -1 if it cannot tell.
long long BytesReceived(int client_port, int server_port) {
  int code = -1;
  std::string out = barge::testing::RunShell(
      "ss -tinH state established '( sport = :" + std::to_string(client_port) +
          " and dport = :" + std::to_string(server_port) + " )'",
      &code);
  size_t at = out.find("bytes_received:");
  if (code != 0 || at == std::string::npos) return -1;
  return std::atoll(out.c_str() + at + std::strlen("bytes_received:"));
}

long long Millis(EventLoop::Clock::duration d) {
  return std::chrono::duration_cast<milliseconds>(d).count();
}

// The slack the two detection tests below assert dead_after with: the bed
// shares 2 cores, so the loop's timer may fire late by this much. The
// design bound is dead_after itself: a connection is lost once nothing has
// come back for dead_after (ssh_executor.h), and nothing comes back after
// the fault.
constexpr milliseconds kDetectionSlack(1000);

TEST(SshExecutor, AConnectionWhoseServerStopsAnsweringIsDeclaredDeadWithinDeadAfterPlusOneSecond) {
  const milliseconds dead_after(2000);
  EventLoop loop;
  TempDir dir;
  auto exec = ConnectToBed(loop, dir);
  ASSERT_TRUE(exec);
  exec->set_dead_after(dead_after);
  int lost_calls = 0;
  Status lost;
  exec->set_on_connection_lost([&](const Status& s) {
    ++lost_calls;
    lost = s;
  });
  auto r = std::make_shared<Collected>();
  auto cmd = exec->Start("echo $SSH_CLIENT; echo $$; exec sleep 60", CollectInto(r));
  ASSERT_TRUE(cmd.ok());
  ASSERT_TRUE(PollUntil(loop, [&] { return CountLines(r->out) >= 2; }));
  std::istringstream lines(r->out);
  std::string ssh_client, shell_pid;
  std::getline(lines, ssh_client);
  std::getline(lines, shell_pid);
  const int sleep_pid = std::stoi(shell_pid);
  std::set<int> sshds =
      SshdProcessesServing(barge::testing::GetBed().loopback.port, ClientPort(ssh_client));
  ASSERT_FALSE(sshds.empty()) << "no sshd found for " << ssh_client;
  for (int pid : sshds) {
    ASSERT_EQ(Cmdline(pid).rfind("sshd: ", 0), 0u) << pid << ": " << Cmdline(pid);
    ASSERT_EQ(Cmdline(pid).find("[listener]"), std::string::npos);
  }

  // Healthy first: a few rounds of requests and answers.
  auto until = EventLoop::Clock::now() + milliseconds(1200);
  while (EventLoop::Clock::now() < until) loop.Poll(milliseconds(100));
  ASSERT_TRUE(exec->health().ok()) << exec->health().message();

  {
    const auto stopped_at = EventLoop::Clock::now();  // just before the fault
    StoppedProcesses stopped(sshds);
    bool dead = PollUntil(
        loop, [&] { return r->finished(); }, dead_after + kDetectionSlack);
    const long long detected_ms = Millis(EventLoop::Clock::now() - stopped_at);
    EXPECT_TRUE(stopped.AllStopped()) << "an sshd was not stopped: the test proves nothing";
    std::printf(
        "[ detection ] server stopped (SIGSTOP of %zu sshd) -> declared dead after %lld ms "
        "(dead_after %lld ms)\n",
        sshds.size(), detected_ms, static_cast<long long>(dead_after.count()));
    RecordProperty("detection_ms", std::to_string(detected_ms));
    ASSERT_TRUE(dead) << "not declared dead within dead_after + 1 s";
    // Not before the host was silent for most of dead_after (it answered
    // every dead_after/4 until it was stopped).
    EXPECT_GE(detected_ms, dead_after.count() / 2);
    EXPECT_LE(detected_ms, (dead_after + kDetectionSlack).count());

    const std::string expected =
        BedLabel() + ": no answer for 2 s (ssh.dead_after): connection lost";
    EXPECT_EQ(r->exit_calls, 1);
    EXPECT_FALSE(r->exit.known());
    EXPECT_EQ(r->exit.error, expected);
    EXPECT_EQ(lost_calls, 1);
    EXPECT_EQ(lost.message(), expected);
    EXPECT_EQ(exec->health().message(), expected);
    auto after = exec->Start("true", CollectInto(std::make_shared<Collected>()));
    ASSERT_FALSE(after.ok());
    EXPECT_EQ(after.status().message(), expected);
    // Nothing more happens while the host stays silent.
    loop.Poll(milliseconds(300));
    EXPECT_EQ(lost_calls, 1);
    EXPECT_EQ(r->exit_calls, 1);
  }  // SIGCONT

  // The resumed host's late answers change nothing.
  until = EventLoop::Clock::now() + milliseconds(300);
  while (EventLoop::Clock::now() < until) loop.Poll(milliseconds(50));
  EXPECT_EQ(lost_calls, 1);
  EXPECT_EQ(r->exit_calls, 1);
  exec.reset();
  if (Cmdline(sleep_pid).rfind("sleep ", 0) == 0) kill(sleep_pid, SIGKILL);
}

TEST(SshExecutor, AHealthyIdleConnectionSurvivesManyDeadAfterPeriods) {
  const milliseconds dead_after(1000);
  EventLoop loop;
  TempDir dir;
  auto exec = ConnectToBed(loop, dir);
  ASSERT_TRUE(exec);
  exec->set_dead_after(dead_after);
  int lost_calls = 0;
  exec->set_on_connection_lost([&](const Status&) { ++lost_calls; });
  // The connection's local port, to watch its traffic from outside.
  Collected who = RunToEnd(loop, *exec, "echo $SSH_CLIENT");
  ASSERT_EQ(who.exit.code, 0);
  const int client_port = ClientPort(who.out);
  const long long received_before =
      BytesReceived(client_port, barge::testing::GetBed().loopback.port);

  // Idle (no commands) for five dead_after periods.
  int polls = 0;
  auto until = EventLoop::Clock::now() + std::chrono::seconds(5);
  while (EventLoop::Clock::now() < until) {
    loop.Poll(milliseconds(100));
    ++polls;
  }
  EXPECT_TRUE(exec->health().ok()) << exec->health().message();
  EXPECT_EQ(lost_calls, 0);
  // The host was asked and answered while idle (a keepalive answer is a
  // few dozen bytes; one every dead_after/4 at most).
  const long long received_after =
      BytesReceived(client_port, barge::testing::GetBed().loopback.port);
  ASSERT_GE(received_before, 0);
  EXPECT_GT(received_after - received_before, 5 * 30) << "no keepalive answers while idle";
  // The timers do not make the loop spin: ~50 Polls of 100 ms, plus one
  // wake-up per dead_after/4 or so.
  EXPECT_LT(polls, 200);

  Collected ok = RunToEnd(loop, *exec, "echo ok");
  EXPECT_EQ(ok.out, "ok\n");
  EXPECT_TRUE(ok.exit.known()) << ok.exit.error;
  EXPECT_EQ(lost_calls, 0);
}

TEST(SshExecutor, AHostWhoseLinkIsCutIsDeclaredDeadWithinDeadAfterPlusOneSecond) {
  const milliseconds dead_after(2000);
  const auto& bed = barge::testing::GetBed();
  const barge::testing::BedHost* h3 = nullptr;
  for (const auto& h : bed.hosts) {
    if (h.name == "h3") h3 = &h;
  }
  ASSERT_NE(h3, nullptr) << "the bed has no host h3 (BARGE_BED_HOSTS >= 3 needed)";
  TempDir dir;
  SessionOptions options = BedOptions(dir);
  options.host = h3->address;
  options.port = h3->port;
  EventLoop loop;
  auto session = Session::Connect(options);
  ASSERT_TRUE(session.ok()) << session.status().message();
  auto exec = std::make_unique<SshExecutor>(std::move(session).value(), &loop);
  exec->set_dead_after(dead_after);
  int lost_calls = 0;
  exec->set_on_connection_lost([&](const Status&) { ++lost_calls; });
  auto r = std::make_shared<Collected>();
  auto cmd = exec->Start("echo $$; exec sleep 60", CollectInto(r));
  ASSERT_TRUE(cmd.ok());
  ASSERT_TRUE(PollUntil(loop, [&] { return CountLines(r->out) >= 1; }));
  const std::string sleep_pid = r->out.substr(0, r->out.find('\n'));

  {
    // The fault's instant: just before it is made, so the figure is never
    // too small.
    const auto cut_at = EventLoop::Clock::now();
    LinkDown down("h3", "eth0");
    ASSERT_TRUE(down.ok()) << "cannot take h3's eth0 down";
    bool dead = PollUntil(
        loop, [&] { return r->finished(); }, dead_after + kDetectionSlack);
    const long long detected_ms = Millis(EventLoop::Clock::now() - cut_at);
    std::printf(
        "[ detection ] link cut (h3 eth0 down) -> declared dead after %lld ms (dead_after "
        "%lld ms): %s\n",
        detected_ms, static_cast<long long>(dead_after.count()), r->exit.error.c_str());
    RecordProperty("detection_ms", std::to_string(detected_ms));
    ASSERT_TRUE(dead) << "not declared dead within dead_after + 1 s";
    EXPECT_LE(detected_ms, (dead_after + kDetectionSlack).count());
    EXPECT_EQ(r->exit_calls, 1);
    EXPECT_FALSE(r->exit.known());
    // Ours, or the kernel's TCP_USER_TIMEOUT if it came first.
    EXPECT_EQ(r->exit.error.rfind(exec->label() + ": ", 0), 0u) << r->exit.error;
    EXPECT_NE(r->exit.error.find("connection lost"), std::string::npos) << r->exit.error;
    EXPECT_EQ(lost_calls, 1);
    EXPECT_EQ(exec->health().message(), r->exit.error);
    EXPECT_FALSE(exec->Start("true", CollectInto(std::make_shared<Collected>())).ok());
  }  // link up again
  exec.reset();

  // h3 answers again (the link may take a moment to carry traffic).
  Status last = Status::Error("not tried");
  for (int attempt = 0; attempt < 10; ++attempt) {
    auto again = Session::Connect(options);
    if (!again.ok()) {
      last = again.status();
      usleep(500 * 1000);
      continue;
    }
    SshExecutor fresh(std::move(again).value(), &loop);
    Collected ok = RunToEnd(loop, fresh, ShellJoin({"kill", sleep_pid}) + "; echo ok");
    EXPECT_EQ(ok.out, "ok\n");
    last = Status::Ok();
    break;
  }
  EXPECT_TRUE(last.ok()) << "h3 does not answer after its link came back: " << last.message();
}

}  // namespace
}  // namespace barge::ssh
