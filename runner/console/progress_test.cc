#include "runner/console/progress.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace barge::runner {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Everything a Progress writes, and a clock the test moves by hand.
class Screen {
 public:
  Screen() { file_ = open_memstream(&buffer_, &size_); }
  ~Screen() {
    std::fclose(file_);
    std::free(buffer_);
  }
  std::FILE* file() { return file_; }
  std::function<Progress::Clock::time_point()> clock() {
    return [this] { return now_; };
  }
  void Advance(Progress::Clock::duration d) { now_ += d; }

  // The bytes written since the last call.
  std::string Take() {
    std::fflush(file_);
    std::string all(buffer_, size_);
    std::string fresh = all.substr(taken_);
    taken_ = all.size();
    return fresh;
  }

 private:
  std::FILE* file_ = nullptr;
  char* buffer_ = nullptr;
  size_t size_ = 0;
  size_t taken_ = 0;
  Progress::Clock::time_point now_{};
};

TEST(Progress, OnATerminalTheStatusLineIsOverprintedInPlace) {
  Screen screen;
  Progress progress(screen.file(), /*terminal=*/true, screen.clock(), /*width=*/80);
  progress.Begin("preflight", 3);
  EXPECT_EQ(screen.Take(), "\r[0/3] preflight\x1b[K");
  progress.Done("h1", true);
  EXPECT_EQ(screen.Take(), "\r[1/3] preflight: h1 ok\x1b[K");
  progress.Done("h2", true, "4 GPUs");
  EXPECT_EQ(screen.Take(), "\r[2/3] preflight: h2 ok: 4 GPUs\x1b[K");
  progress.Done("h3", true);
  EXPECT_EQ(screen.Take(), "\r[3/3] preflight: h3 ok\x1b[K");
  screen.Advance(milliseconds(1234));
  progress.End();
  EXPECT_EQ(screen.Take(), "\r\x1b[K[3/3] preflight: done in 1.2 s (3 ok)\n");
}

TEST(Progress, OnATerminalAFailureStaysAsAPermanentLine) {
  Screen screen;
  Progress progress(screen.file(), true, screen.clock(), 80);
  progress.Begin("preflight", 16);
  for (int i = 1; i <= 3; ++i) progress.Done("h" + std::to_string(i), true);
  screen.Take();
  progress.Done("h7", false, "docker: permission denied");
  EXPECT_EQ(screen.Take(),
            "\r\x1b[K[4/16] preflight: h7 FAILED: docker: permission denied\n"
            "\r[4/16] preflight\x1b[K");
  progress.Done("h8", true);
  EXPECT_EQ(screen.Take(), "\r[5/16] preflight: h8 ok\x1b[K");
  for (int i = 9; i <= 19; ++i) progress.Done("h" + std::to_string(i), true);
  screen.Take();
  screen.Advance(seconds(2));
  progress.End();
  EXPECT_EQ(screen.Take(), "\r\x1b[K[16/16] preflight: done in 2.0 s (15 ok, 1 failed)\n");
}

TEST(Progress, OnATerminalTheStatusLineIsElidedInTheMiddleToTheWidth) {
  Screen screen;
  Progress progress(screen.file(), true, screen.clock(), /*width=*/20);
  progress.Begin("pushing barge/torch:local", 2);
  // "[0/2] pushing barge/torch:local" is 31 columns: 9 + "..." + 8.
  EXPECT_EQ(screen.Take(), "\r[0/2] pus...ch:local\x1b[K");
  progress.Done("gpu-node-01.example.com", false, "no space left on device");
  // The permanent line is never elided; the status line is.
  EXPECT_EQ(screen.Take(),
            "\r\x1b[K[1/2] pushing barge/torch:local: gpu-node-01.example.com FAILED: "
            "no space left on device\n"
            "\r[1/2] pus...ch:local\x1b[K");
}

TEST(Progress, OnATerminalPrintClearsTheStatusLineWritesAndRedrawsIt) {
  Screen screen;
  Progress progress(screen.file(), true, screen.clock(), 80);
  progress.Begin("starting workers", 4);
  progress.Done("h1", true);
  screen.Take();
  progress.Print("barge: h2: pulling image (first run on this host)");
  EXPECT_EQ(screen.Take(),
            "\r\x1b[K"
            "barge: h2: pulling image (first run on this host)\n"
            "\r[1/4] starting workers: h1 ok\x1b[K");
}

TEST(Progress, OnATerminalClearAndRedrawBracketOutputThatBypassesIt) {
  Screen screen;
  Progress progress(screen.file(), true, screen.clock(), 80);
  progress.Begin("starting workers", 4);
  screen.Take();
  progress.Clear();
  EXPECT_EQ(screen.Take(), "\r\x1b[K");
  progress.Clear();  // already clear: nothing to do
  EXPECT_EQ(screen.Take(), "");
  progress.Redraw();
  EXPECT_EQ(screen.Take(), "\r[0/4] starting workers\x1b[K");
  progress.Redraw();  // already shown: nothing to do
  EXPECT_EQ(screen.Take(), "");
}

TEST(Progress, PrintOutsideAPhaseIsAPlainLine) {
  Screen screen;
  Progress progress(screen.file(), true, screen.clock(), 80);
  progress.Print("barge: job a1b2c3d4 on 16 hosts");
  EXPECT_EQ(screen.Take(), "barge: job a1b2c3d4 on 16 hosts\n");
  progress.Begin("preflight", 1);
  progress.Done("h1", true);
  progress.End();
  screen.Take();
  progress.Print("barge: done");
  progress.Redraw();
  EXPECT_EQ(screen.Take(), "barge: done\n");
}

TEST(Progress, NotOnATerminalThereAreOnlyPlainLines) {
  Screen screen;
  Progress progress(screen.file(), /*terminal=*/false, screen.clock());
  progress.Begin("preflight", 4);
  EXPECT_EQ(screen.Take(), "[0/4] preflight\n");
  progress.Done("h1", true);
  progress.Done("h2", true, "4 GPUs");
  EXPECT_EQ(screen.Take(), "");
  progress.Done("h3", false, "ssh: connection refused");
  EXPECT_EQ(screen.Take(), "[3/4] preflight: h3 FAILED: ssh: connection refused\n");
  progress.Print("barge: h3 is unreachable");
  EXPECT_EQ(screen.Take(), "barge: h3 is unreachable\n");
  progress.Clear();
  progress.Redraw();
  EXPECT_EQ(screen.Take(), "");
  progress.Done("h4", true);
  screen.Advance(milliseconds(450));
  progress.End();
  EXPECT_EQ(screen.Take(), "[4/4] preflight: done in 0.5 s (3 ok, 1 failed)\n");
}

TEST(Progress, NotOnATerminalTheCountIsPrintedAtMostEveryFiveSeconds) {
  Screen screen;
  Progress progress(screen.file(), false, screen.clock());
  progress.Begin("preflight", 100);
  std::string log = screen.Take();
  for (int i = 1; i <= 100; ++i) {
    screen.Advance(milliseconds(100));  // 10 s in all
    progress.Done("h" + std::to_string(i), i != 70, "disk full");
  }
  progress.End();
  log += screen.Take();
  EXPECT_EQ(log,
            "[0/100] preflight\n"
            "[50/100] preflight\n"  // 5 s after Begin
            "[70/100] preflight: h70 FAILED: disk full\n"
            "[100/100] preflight: done in 10.0 s (99 ok, 1 failed)\n");
}

TEST(Progress, EndingEarlySaysHowManyHostsDidNotFinish) {
  Screen screen;
  Progress progress(screen.file(), false, screen.clock());
  progress.Begin("pushing barge/torch:local", 3);
  progress.Done("h1", false, "no space left on device");
  screen.Advance(seconds(12));
  progress.End();
  EXPECT_EQ(screen.Take(),
            "[0/3] pushing barge/torch:local\n"
            "[1/3] pushing barge/torch:local: h1 FAILED: no space left on device\n"
            "[1/3] pushing barge/torch:local: stopped after 12.0 s (0 ok, 1 failed, 2 not "
            "finished)\n");
}

TEST(Progress, BeginAndDestructionEndAnUnfinishedPhase) {
  Screen screen;
  {
    Progress progress(screen.file(), true, screen.clock(), 80);
    progress.Begin("preflight", 1);
    progress.Begin("starting workers", 1);
    EXPECT_EQ(screen.Take(),
              "\r[0/1] preflight\x1b[K"
              "\r\x1b[K[0/1] preflight: stopped after 0.0 s (0 ok, 1 not finished)\n"
              "\r[0/1] starting workers\x1b[K");
  }
  EXPECT_EQ(screen.Take(),
            "\r\x1b[K[0/1] starting workers: stopped after 0.0 s (0 ok, 1 not finished)\n");
}

TEST(Progress, DoneAndEndOutsideAPhaseWriteNothing) {
  Screen screen;
  Progress progress(screen.file(), true, screen.clock(), 80);
  progress.Done("h1", true);
  progress.End();
  EXPECT_EQ(screen.Take(), "");
}

TEST(Progress, ControlCharactersInNamesAndDetailsBecomeSpaces) {
  Screen screen;
  Progress progress(screen.file(), false, screen.clock());
  progress.Begin("preflight", 1);
  screen.Take();
  progress.Done("h1", false, "docker: error\r\nsee \x1b[31mlog\x1b[0m\n");
  EXPECT_EQ(screen.Take(), "[1/1] preflight: h1 FAILED: docker: error  see  [31mlog [0m\n");
}

TEST(Progress, WithoutATerminalToAskTheWidthIs80) {
  Screen screen;  // a memstream has no file descriptor
  Progress progress(screen.file(), true, screen.clock());
  progress.Begin(std::string(100, 'p'), 1);
  std::string status = screen.Take();
  ASSERT_EQ(status.substr(0, 1), "\r");
  ASSERT_EQ(status.substr(status.size() - 3), "\x1b[K");
  EXPECT_EQ(status.size() - 4, 80u);
  EXPECT_EQ(status.substr(1, 39), "[0/1] " + std::string(33, 'p'));
  EXPECT_EQ(status.substr(40, 3), "...");
}

TEST(ElideMiddle, KeepsTextThatFits) {
  EXPECT_EQ(ElideMiddle("abcdef", 6), "abcdef");
  EXPECT_EQ(ElideMiddle("", 0), "");
}

TEST(ElideMiddle, CutsTheMiddleToExactlyTheWidth) {
  EXPECT_EQ(ElideMiddle("abcdefghij", 9), "abc...hij");
  EXPECT_EQ(ElideMiddle("abcdefghij", 8), "abc...ij");
  EXPECT_EQ(ElideMiddle("abcdefghij", 4), "a...");
}

TEST(ElideMiddle, NarrowWidthsCutTheEnd) {
  EXPECT_EQ(ElideMiddle("abcdefghij", 3), "abc");
  EXPECT_EQ(ElideMiddle("abcdefghij", 0), "");
  EXPECT_EQ(ElideMiddle("abcdefghij", -5), "");
}

TEST(ElideMiddle, CountsCodePointsAndNeverSplitsOne) {
  // 10 code points, 20 bytes.
  const std::string greek = "αβγδεζηθικ";
  EXPECT_EQ(ElideMiddle(greek, 10), greek);
  EXPECT_EQ(ElideMiddle(greek, 9), "αβγ...θικ");
  EXPECT_EQ(ElideMiddle(greek, 2), "αβ");
}

}  // namespace
}  // namespace barge::runner
