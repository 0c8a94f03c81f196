#include "ssh/local_executor.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ssh/quote.h"
#include "tests/support/ssh_test_util.h"
#include "tests/test_seed.h"

namespace barge::ssh {
namespace {

using std::chrono::milliseconds;
using testing::Collected;
using testing::CollectInto;
using testing::PollUntil;
using testing::RunToEnd;

TEST(LocalExecutor, IsLabelledLocal) {
  EventLoop loop;
  LocalExecutor local(&loop);
  EXPECT_EQ(local.label(), "local");
}

TEST(LocalExecutor, KeepsStdoutAndStderrApartAndReturnsTheExitCode) {
  EventLoop loop;
  LocalExecutor local(&loop);
  Collected r = RunToEnd(loop, local, "echo out; echo err >&2; echo out2; exit 3");
  EXPECT_EQ(r.out, "out\nout2\n");
  EXPECT_EQ(r.err, "err\n");
  EXPECT_TRUE(r.exit.known()) << r.exit.error;
  EXPECT_EQ(r.exit.code, 3);
  EXPECT_EQ(r.exit.signal, "");
  EXPECT_EQ(r.exit_calls, 1);
}

TEST(LocalExecutor, PausedOutputIsNotReadSoTheCommandBlocksAndAllOfItArrivesInOrderOnceUnpaused) {
  EventLoop loop;
  LocalExecutor local(&loop);
  const size_t kBytes = 8 << 20;
  testing::PausedRun run = testing::RunPaused(loop, local, kBytes, milliseconds(1500));
  EXPECT_EQ(run.out_during_pause, 0u);
  EXPECT_FALSE(run.exited_during_pause);
  // The pipe (64 KiB) filled and the writer blocked: it never got to stderr.
  EXPECT_FALSE(run.err_during_pause);
  EXPECT_EQ(run.end.out.size(), kBytes);
  EXPECT_EQ(run.end.out.find_first_not_of('\0'), std::string::npos);
  EXPECT_EQ(run.end.err, "written\n");
  EXPECT_EQ(run.end.exit.code, 0);
  EXPECT_EQ(run.end.exit_calls, 1);
}

TEST(LocalExecutor, ReturnsExitCodesFromZeroTo255) {
  EventLoop loop;
  LocalExecutor local(&loop);
  for (int code : {0, 1, 2, 126, 255}) {
    Collected r = RunToEnd(loop, local, "exit " + std::to_string(code));
    EXPECT_EQ(r.exit.code, code);
  }
  EXPECT_EQ(RunToEnd(loop, local, "/nonexistent/program").exit.code, 127);
}

TEST(LocalExecutor, ReportsDeathBySignalAs128PlusTheSignalNumber) {
  EventLoop loop;
  LocalExecutor local(&loop);
  Collected term = RunToEnd(loop, local, "kill -TERM $$");
  EXPECT_EQ(term.exit.code, 128 + SIGTERM);
  EXPECT_EQ(term.exit.signal, "TERM");
  EXPECT_TRUE(term.exit.known());
  Collected kill = RunToEnd(loop, local, "echo before; kill -KILL $$");
  EXPECT_EQ(kill.exit.code, 137);
  EXPECT_EQ(kill.exit.signal, "KILL");
  EXPECT_EQ(kill.out, "before\n");
}

TEST(LocalExecutor, CallsOnExitOnceAndOnlyAfterAllOutput) {
  EventLoop loop;
  LocalExecutor local(&loop);
  // More than a pipe buffer on both streams, then exit at once.
  Collected r = RunToEnd(loop, local,
                         "head -c 300000 /dev/zero; head -c 200000 /dev/zero >&2; exit 5");
  EXPECT_EQ(r.out.size(), 300000u);
  EXPECT_EQ(r.err.size(), 200000u);
  EXPECT_EQ(r.bytes_at_exit, 500000u);
  EXPECT_EQ(r.exit_calls, 1);
  EXPECT_EQ(r.exit.code, 5);
}

TEST(LocalExecutor, NeverCallsOnExitFromInsideStart) {
  EventLoop loop;
  LocalExecutor local(&loop);
  auto r = std::make_shared<Collected>();
  auto cmd = local.Start("true", CollectInto(r));
  ASSERT_TRUE(cmd.ok());
  EXPECT_EQ(r->exit_calls, 0);
  EXPECT_FALSE((*cmd)->done());
  ASSERT_TRUE(PollUntil(loop, [&] { return r->finished(); }));
  EXPECT_TRUE((*cmd)->done());
}

TEST(LocalExecutor, RoundTripsOneMebibyteThroughStdin) {
  EventLoop loop;
  LocalExecutor local(&loop);
  std::mt19937 rng(barge::testing::TestSeed(42));
  std::string data(1 << 20, '\0');
  for (char& c : data) c = static_cast<char>(rng());
  Collected r = RunToEnd(loop, local, "cat", data);
  EXPECT_EQ(r.exit.code, 0);
  ASSERT_EQ(r.out.size(), data.size());
  EXPECT_TRUE(r.out == data);
}

TEST(LocalExecutor, StdinWrittenInPiecesArrivesInOrderAndEofEndsIt) {
  EventLoop loop;
  LocalExecutor local(&loop);
  auto r = std::make_shared<Collected>();
  auto cmd = local.Start("wc -c", CollectInto(r));
  ASSERT_TRUE(cmd.ok());
  for (int i = 0; i < 100; ++i) {
    (*cmd)->WriteStdin(std::string(1000, 'x'));
    loop.Poll(milliseconds(0));
  }
  loop.Poll(milliseconds(50));
  EXPECT_FALSE(r->finished());  // still waiting for EOF
  (*cmd)->CloseStdin();
  ASSERT_TRUE(PollUntil(loop, [&] { return r->finished(); }));
  EXPECT_EQ(r->out, "100000\n");
}

TEST(LocalExecutor, StdinToACommandThatDoesNotReadItIsDroppedQuietly) {
  EventLoop loop;
  LocalExecutor local(&loop);
  // More than a pipe holds, to a child that exits without reading.
  Collected r = RunToEnd(loop, local, "exec 0<&-; exit 4", std::string(1 << 20, 'x'));
  EXPECT_EQ(r.exit.code, 4);
  EXPECT_EQ(r.exit_calls, 1);
}

TEST(LocalExecutor, RunsFiftyCommandsAtOnce) {
  EventLoop loop;
  LocalExecutor local(&loop);
  std::vector<std::shared_ptr<Collected>> results;
  std::vector<std::unique_ptr<Command>> commands;
  for (int i = 0; i < 50; ++i) {
    auto r = std::make_shared<Collected>();
    auto cmd = local.Start("echo out " + std::to_string(i) + "; sleep 0.2; echo err " +
                               std::to_string(i) + " >&2; exit " + std::to_string(i % 7),
                           CollectInto(r));
    ASSERT_TRUE(cmd.ok()) << cmd.status().message();
    results.push_back(r);
    commands.push_back(std::move(cmd).value());
  }
  ASSERT_TRUE(PollUntil(loop, [&] {
    for (auto& r : results) {
      if (!r->finished()) return false;
    }
    return true;
  }));
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(results[i]->out, "out " + std::to_string(i) + "\n");
    EXPECT_EQ(results[i]->err, "err " + std::to_string(i) + "\n");
    EXPECT_EQ(results[i]->exit.code, i % 7);
    EXPECT_EQ(results[i]->exit_calls, 1);
  }
}

TEST(LocalExecutor, DestroyingACommandMidRunStopsItsCallbacks) {
  EventLoop loop;
  LocalExecutor local(&loop);
  auto r = std::make_shared<Collected>();
  auto cmd = local.Start("echo early; sleep 0.3; echo late", CollectInto(r));
  ASSERT_TRUE(cmd.ok());
  ASSERT_TRUE(PollUntil(loop, [&] { return !r->out.empty(); }));
  cmd = Status::Error("dropped");  // destroys the command
  // Past the child's exit: no more output, no on_exit, no crash.
  auto until = EventLoop::Clock::now() + milliseconds(600);
  while (EventLoop::Clock::now() < until) loop.Poll(milliseconds(50));
  EXPECT_EQ(r->out, "early\n");
  EXPECT_EQ(r->exit_calls, 0);
}

TEST(LocalExecutor, ACommandMayBeDestroyedFromItsOwnCallbacks) {
  EventLoop loop;
  LocalExecutor local(&loop);
  std::unique_ptr<Command> in_output, in_exit;
  int outputs = 0;
  bool exited = false;
  CommandCallbacks a;
  a.on_stdout = [&](std::string_view) {
    ++outputs;
    in_output.reset();
  };
  auto started = local.Start("echo one; sleep 0.05; echo two", std::move(a));
  ASSERT_TRUE(started.ok());
  in_output = std::move(started).value();
  CommandCallbacks b;
  b.on_exit = [&](const ExitStatus&) {
    exited = true;
    in_exit.reset();
  };
  auto started_b = local.Start("echo x", std::move(b));
  ASSERT_TRUE(started_b.ok());
  in_exit = std::move(started_b).value();
  ASSERT_TRUE(PollUntil(loop, [&] { return exited && !in_output; }));
  auto until = EventLoop::Clock::now() + milliseconds(200);
  while (EventLoop::Clock::now() < until) loop.Poll(milliseconds(20));
  EXPECT_EQ(outputs, 1);
  EXPECT_EQ(in_exit, nullptr);
}

TEST(LocalExecutor, ACommandMayOutliveItsExecutor) {
  EventLoop loop;
  auto local = std::make_unique<LocalExecutor>(&loop);
  auto r = std::make_shared<Collected>();
  auto cmd = local->Start("sleep 0.05; echo done", CollectInto(r));
  ASSERT_TRUE(cmd.ok());
  local.reset();
  ASSERT_TRUE(PollUntil(loop, [&] { return r->finished(); }));
  EXPECT_EQ(r->out, "done\n");
  EXPECT_EQ(r->exit.code, 0);
}

TEST(LocalExecutor, ChildrenGetDefaultSignalDispositions) {
  // barge may ignore SIGPIPE; its children must not inherit that.
  struct sigaction ignore = {}, previous = {};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &ignore, &previous);
  EventLoop loop;
  LocalExecutor local(&loop);
  Collected r = RunToEnd(loop, local, "grep SigIgn /proc/self/status");
  sigaction(SIGPIPE, &previous, nullptr);
  ASSERT_EQ(r.exit.code, 0);
  // SigIgn is a hex mask; bit 13 (SIGPIPE) is 0x1000.
  std::string mask = r.out.substr(r.out.find(':') + 1);
  unsigned long long bits = std::stoull(mask, nullptr, 16);
  EXPECT_EQ(bits & (1ull << (SIGPIPE - 1)), 0u) << r.out;
}

TEST(LocalExecutor, RunsQuotedArgumentsByteExact) {
  EventLoop loop;
  LocalExecutor local(&loop);
  const std::string word = "it's $(touch X) `id` ; && \n ~ * héllo ✓";
  Collected r = RunToEnd(loop, local, ShellJoin({"printf", "%s", word}));
  EXPECT_EQ(r.out, word);
}

// Far longer than one execve argument may be (MAX_ARG_STRLEN, 128 KiB).
TEST(LocalExecutor, ACommandLineLongerThanOneArgvStringRunsAndItsStdinStillArrives) {
  EventLoop loop;
  LocalExecutor local(&loop);
  std::mt19937 rng(barge::testing::TestSeed(300));
  std::string word;
  while (word.size() < 300 * 1024) word += "it's $(touch X) `id` ; && \n ~ * héllo ✓ 🚀 ";
  std::string data(1 << 20, '\0');
  for (char& c : data) c = static_cast<char>(rng());
  const std::string line = ShellJoin({"printf", "%s", word}) + " && cat && exit 7";
  ASSERT_GT(line.size(), 300u * 1024);
  Collected r = RunToEnd(loop, local, line, data);
  EXPECT_EQ(r.exit.code, 7) << r.exit.error << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_TRUE(r.out == word + data) << "got " << r.out.size() << " bytes";
}

TEST(LocalExecutor, CommandLinesOfEverySizeAroundTheLimitRunByteExact) {
  EventLoop loop;
  LocalExecutor local(&loop);
  const std::string prefix = "printf %s ";
  for (size_t size : {LocalExecutor::kMaxArgvCommandLine - 1, LocalExecutor::kMaxArgvCommandLine,
                      LocalExecutor::kMaxArgvCommandLine + 1, size_t{128} * 1024,
                      size_t{128} * 1024 + 1, size_t{4} << 20}) {
    std::string word(size - prefix.size(), 'a');
    Collected r = RunToEnd(loop, local, prefix + word);
    EXPECT_EQ(r.exit.code, 0) << size << ": " << r.exit.error << r.err;
    EXPECT_TRUE(r.out == word) << size << ": got " << r.out.size() << " bytes";
  }
}

TEST(LocalExecutor, ALongCommandLineLeavesNoScriptBehind) {
  EventLoop loop;
  LocalExecutor local(&loop);
  const std::string filler(200 * 1024, 'x');
  // $0 names the script the long line was written to.
  Collected r = RunToEnd(loop, local, ": " + filler + "; printf %s \"$0\"");
  ASSERT_EQ(r.exit.code, 0) << r.exit.error << r.err;
  ASSERT_FALSE(r.out.empty());
  EXPECT_NE(access(r.out.c_str(), F_OK), 0) << r.out << " is still there";
  EXPECT_NE(access(r.out.substr(0, r.out.rfind('/')).c_str(), F_OK), 0);
  Collected eof = RunToEnd(loop, local, ": " + filler + "; wc -c");
  EXPECT_EQ(eof.out, "0\n");
}

TEST(LocalExecutor, ALongCommandLineThatCannotBeWrittenDownFailsToStartWithTheReason) {
  EventLoop loop;
  LocalExecutor local(&loop);
  const char* old = std::getenv("TMPDIR");
  const std::string saved = old ? old : "";
  setenv("TMPDIR", "/nonexistent-barge-test-dir", 1);
  auto r = std::make_shared<Collected>();
  auto cmd = local.Start(": " + std::string(100 * 1024, 'x'), CollectInto(r));
  if (old) {
    setenv("TMPDIR", saved.c_str(), 1);
  } else {
    unsetenv("TMPDIR");
  }
  ASSERT_FALSE(cmd.ok());
  EXPECT_NE(cmd.status().message().find("cannot create a directory for a long command line"),
            std::string::npos)
      << cmd.status().message();
  EXPECT_NE(cmd.status().message().find("/nonexistent-barge-test-dir"), std::string::npos);
}

}  // namespace
}  // namespace barge::ssh
