// CommandGroup's Engine API calls on a virtual loop: the limit abandons a
// call that has not ended, and a call that ends first is never timed out.
#include "runner/remote/command_group.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "ssh/local_executor.h"

namespace barge::runner {
namespace {

using std::chrono::milliseconds;

// A call that never ends by itself; says when it was destroyed.
class Pending : public container::DockerApi::Call {
 public:
  explicit Pending(bool* destroyed) : destroyed_(destroyed) {}
  ~Pending() override { *destroyed_ = true; }

 private:
  bool* destroyed_;
};

// One API call of 500 ms limit on a virtual loop, started by the fixture;
// `finish` is the call's own completion, `ends` counts the group's reports.
class CommandGroupApi : public ::testing::Test {
 protected:
  void SetUp() override {
    group.Api(
        [&](CommandGroup::Finish f) -> Result<CommandGroup::ApiCall> {
          finish = f;
          return CommandGroup::ApiCall(std::make_unique<Pending>(&destroyed));
        },
        [&](const Outcome& o) {
          ++ends;
          got = o;
        },
        kLimit);
  }

  static constexpr milliseconds kLimit{500};
  ssh::EventLoop loop{ssh::EventLoop::TimeSource::kVirtual};
  const ssh::EventLoop::Clock::time_point began = loop.Now();
  CommandGroup group{&loop};
  bool destroyed = false;
  CommandGroup::Finish finish;
  int ends = 0;
  Outcome got;
};

TEST_F(CommandGroupApi, ACallStillRunningAtItsLimitIsDestroyedAndEndsAsTimedOutOnce) {
  EXPECT_EQ(group.pending(), 1);
  for (int i = 0; i < 10 && ends == 0; ++i) loop.Poll(milliseconds(100));
  ASSERT_EQ(ends, 1);
  EXPECT_TRUE(got.timed_out());
  EXPECT_TRUE(destroyed) << "the abandoned call was not destroyed (its stream stays open)";
  EXPECT_GE(loop.Now() - began, kLimit);
  EXPECT_TRUE(group.idle());
  // A late finish from the call (had it not been destroyed) is ignored.
  Outcome late;
  late.exit.code = 0;
  finish(late);
  EXPECT_EQ(ends, 1);
}

TEST_F(CommandGroupApi, ACallThatEndsBeforeItsLimitIsNotTimedOutAfterwards) {
  loop.AddTimer(loop.Now() + milliseconds(100), [&] {
    Outcome ok;
    ok.exit.code = 0;
    finish(ok);
  });
  for (int i = 0; i < 20; ++i) loop.Poll(milliseconds(100));
  ASSERT_EQ(ends, 1);
  EXPECT_TRUE(got.ok());
  EXPECT_FALSE(got.timed_out());
}

TEST(CommandGroupAfter, RunsOnceItsDelayHasPassedKeepingTheGroupBusyUntilThenAndCancelDropsIt) {
  ssh::EventLoop loop{ssh::EventLoop::TimeSource::kVirtual};
  const auto began = loop.Now();
  CommandGroup group{&loop};
  int ran = 0;
  ssh::EventLoop::Clock::time_point ran_at{};
  group.After(milliseconds(300), [&] {
    ++ran;
    ran_at = loop.Now();
  });
  EXPECT_FALSE(group.idle());
  for (int i = 0; i < 10; ++i) loop.Poll(milliseconds(100));
  EXPECT_EQ(ran, 1);
  EXPECT_GE(ran_at - began, milliseconds(300));
  EXPECT_TRUE(group.idle());
  EXPECT_EQ(group.finished(), 1u);
  group.After(milliseconds(100), [&] { ++ran; });
  group.Cancel();
  for (int i = 0; i < 5; ++i) loop.Poll(milliseconds(100));
  EXPECT_EQ(ran, 1) << "a cancelled delay ran";
  EXPECT_TRUE(group.idle());
}

// A host command's output is bounded (issue #40): a real process on this
// machine writes more than the group keeps, on stdout and then on stderr.
// Under the bound the whole output arrives; past it, at most the bound is
// kept and the command fails, naming the stream, though it exited 0.
Outcome RunHere(const std::string& line, size_t max_output) {
  ssh::EventLoop loop;
  ssh::LocalExecutor here(&loop);
  CommandGroup group(&loop, nullptr, max_output);
  Outcome got;
  bool ended = false;
  group.Run(here, line, [&](const Outcome& o) {
    got = o;
    ended = true;
  });
  for (int i = 0; i < 1000 && !ended; ++i) loop.Poll(milliseconds(20));
  EXPECT_TRUE(ended) << line;
  return got;
}

TEST(CommandGroupOutput, OutputPastTheBoundIsDroppedAndTheCommandFailsNamingTheStream) {
  Outcome under = RunHere("head -c 4096 /dev/zero", 4096);
  EXPECT_TRUE(under.ok()) << under.Reason();
  EXPECT_EQ(under.out.size(), 4096u);

  Outcome over = RunHere("head -c 1000000 /dev/zero", 4096);
  EXPECT_FALSE(over.ok());
  EXPECT_LE(over.out.size(), 4096u);
  EXPECT_EQ(over.Reason(), "its stdout passed the 4096 bytes barge reads from a host command; the rest was dropped");

  Outcome err = RunHere("head -c 1000000 /dev/zero >&2", 4096);
  EXPECT_FALSE(err.ok());
  EXPECT_LE(err.err.size(), 4096u);
  EXPECT_NE(err.Reason().find("its stderr passed"), std::string::npos) << err.Reason();
}

}  // namespace
}  // namespace barge::runner
