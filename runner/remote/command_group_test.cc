// CommandGroup's Engine API calls on a virtual loop: the limit abandons a
// call that has not ended, and a call that ends first is never timed out.
#include "runner/remote/command_group.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>

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

}  // namespace
}  // namespace barge::runner
