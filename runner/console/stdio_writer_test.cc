// Tests of StdioWriter with LogSink as its backlog: real pipes, a real
// pseudo-terminal and the real event loop.
#include "runner/console/stdio_writer.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <pty.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "runner/logs/log_sink.h"
#include "ssh/event_loop.h"

namespace barge::runner {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

// A pipe whose read end a thread drains into `got` once started.
struct Reader {
  int fds[2] = {-1, -1};
  std::string got;
  std::thread thread;
  std::atomic<bool> eof{false};
  Reader() { EXPECT_EQ(pipe2(fds, O_CLOEXEC), 0); }
  ~Reader() {
    if (fds[1] >= 0) close(fds[1]);
    if (thread.joinable()) thread.join();
    close(fds[0]);
  }
  void Start() {
    thread = std::thread([this] {
      char buf[65536];
      for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
      eof = true;
    });
  }
  // Closes the write end and waits for the reader to see the end.
  std::string Finish() {
    close(fds[1]);
    fds[1] = -1;
    if (thread.joinable()) thread.join();
    return got;
  }
};

std::string Line(int i) {
  char buf[128];
  std::snprintf(buf, sizeof buf, "%08d %s", i, std::string(80, 'x').c_str());
  return buf;
}

class StdioWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("barge-stdio-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // Runs the loop until `done` or 60 s.
  static bool PollUntil(ssh::EventLoop& loop, const std::function<bool()>& done) {
    const auto limit = steady_clock::now() + std::chrono::seconds(60);
    while (!done() && steady_clock::now() < limit) loop.Poll(milliseconds(20));
    return done();
  }
  fs::path dir_;
};

TEST_F(StdioWriterTest, APipeNobodyReadsNeverBlocksTheWriterWhichHoldsAtMostItsBoundAndThenDeliversEveryLineOnceInOrder) {
  constexpr size_t kBound = 64 << 10;
  constexpr int kLines = 100000;  // about 9.6 MB, 150 times the bound
  ssh::EventLoop loop;
  Reader reader;
  size_t most_queued = 0;
  {
    StdioWriter writer(&loop, reader.fds[1], reader.fds[1], kBound);
    auto sink = LogSink::Open(dir_.string(), {{0, "head", "h1"}}, true, &writer);
    ASSERT_TRUE(sink.ok()) << sink.status().message();
    // Nobody reads yet: a blocking write would hang here at the pipe's 64 KiB.
    for (int i = 1; i <= kLines; ++i) {
      (*sink)->Line(0, i % 3 ? Stream::kStdout : Stream::kStderr, "", Line(i));
      most_queued = std::max(most_queued, writer.queued(Stream::kStdout));
    }
    EXPECT_TRUE(writer.behind());
    EXPECT_LE(most_queued, kBound + 200) << "one line past the bound at most";
    // The kept file has every line already (flushed by the loop's pass).
    loop.Poll(milliseconds(0));
    std::ifstream kept(dir_ / "0-h1.log");
    int lines = 0;
    for (std::string l; std::getline(kept, l);) ++lines;
    EXPECT_EQ(lines, kLines);

    reader.Start();
    ASSERT_TRUE(PollUntil(loop, [&] { return !writer.behind() && writer.queued(Stream::kStdout) == 0; }));
  }
  std::istringstream got(reader.Finish());
  int i = 0;
  for (std::string l; std::getline(got, l);) {
    ++i;
    ASSERT_EQ(l, "[0 head h1] " + Line(i)) << "line " << i;
  }
  EXPECT_EQ(i, kLines);
}

TEST_F(StdioWriterTest, TwoNodesOnSeparateStdoutAndStderrPipesEachGetTheirLinesOnceInOrderAfterAStall) {
  constexpr size_t kBound = 16 << 10;
  constexpr int kLines = 20000;
  ssh::EventLoop loop;
  Reader out, err;
  {
    StdioWriter writer(&loop, out.fds[1], err.fds[1], kBound);
    auto sink = LogSink::Open(dir_.string(), {{0, "head", "h1"}, {1, "worker", "h2"}}, true, &writer);
    ASSERT_TRUE(sink.ok());
    for (int i = 1; i <= kLines; ++i) {
      (*sink)->Line(i % 2, i % 4 < 2 ? Stream::kStdout : Stream::kStderr, "", Line(i));
      if (i == kLines / 2) err.Start();  // stderr's reader comes back first
    }
    EXPECT_LE(writer.queued(Stream::kStdout), kBound + 200);
    out.Start();
    // The writer's destructor (with the sink's) drains the rest.
  }
  for (Reader* r : {&out, &err}) {
    const bool is_err = r == &err;
    std::istringstream got(r->Finish());
    std::vector<int> last(2, 0);
    int count = 0;
    for (std::string l; std::getline(got, l);) {
      const int node = l.rfind("[0 head h1] ", 0) == 0 ? 0 : 1;
      const int n = std::stoi(l.substr(l.find("] ") + 2, 8));
      ASSERT_EQ(n % 2, node) << l;
      ASSERT_EQ(n % 4 < 2, !is_err) << l;
      ASSERT_GT(n, last[node]) << "out of order or repeated: " << l;
      last[node] = n;
      ++count;
    }
    EXPECT_EQ(count, kLines / 2) << (is_err ? "stderr" : "stdout");
  }
}

TEST_F(StdioWriterTest, ATerminalIsWrittenAtOnceAndNeverQueues) {
  int master = -1, slave = -1;
  ASSERT_EQ(openpty(&master, &slave, nullptr, nullptr, nullptr), 0);
  ssh::EventLoop loop;
  {
    StdioWriter writer(&loop, slave, slave);
    EXPECT_TRUE(writer.direct(Stream::kStdout));
    writer.Write(Stream::kStdout, "hello\n");
    EXPECT_EQ(writer.queued(Stream::kStdout), 0u);
    char buf[64] = {};
    ssize_t n = read(master, buf, sizeof buf - 1);  // there without any loop pass
    ASSERT_GT(n, 0);
    EXPECT_NE(std::string(buf, static_cast<size_t>(n)).find("hello"), std::string::npos);
  }
  close(master);
  close(slave);
}

TEST_F(StdioWriterTest, AReaderThatHasGoneDropsTheStreamAndNothingBlocksOrFails) {
  ssh::EventLoop loop;
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
  close(fds[0]);
  signal(SIGPIPE, SIG_IGN);  // as barge does (main.cc)
  {
    StdioWriter writer(&loop, fds[1], fds[1], 4096);
    auto sink = LogSink::Open(dir_.string(), {{0, "head", "h1"}}, true, &writer);
    ASSERT_TRUE(sink.ok());
    for (int i = 1; i <= 10000; ++i) (*sink)->Line(0, Stream::kStdout, "", Line(i));
    loop.Poll(milliseconds(0));
    EXPECT_EQ(writer.queued(Stream::kStdout), 0u);
  }
  close(fds[1]);
  // The kept file is whole all the same.
  std::ifstream kept(dir_ / "0-h1.log");
  int lines = 0;
  for (std::string l; std::getline(kept, l);) ++lines;
  EXPECT_EQ(lines, 10000);
}

TEST_F(StdioWriterTest, MessagesThroughTheStderrFileKeepTheirOrderWithJobLinesOnOneSharedPipe) {
  ssh::EventLoop loop;
  Reader reader;
  reader.Start();
  {
    StdioWriter writer(&loop, reader.fds[1], reader.fds[1]);
    auto sink = LogSink::Open(dir_.string(), {{0, "head", "h1"}}, true, &writer);
    ASSERT_TRUE(sink.ok());
    std::FILE* err = writer.err_file();
    ASSERT_NE(err, nullptr);
    (*sink)->Line(0, Stream::kStdout, "", "one");
    std::fprintf(err, "barge: two\n");
    (*sink)->Line(0, Stream::kStderr, "", "three");
  }
  EXPECT_EQ(reader.Finish(), "[0 head h1] one\nbarge: two\n[0 head h1] three\n");
}

}  // namespace
}  // namespace barge::runner
