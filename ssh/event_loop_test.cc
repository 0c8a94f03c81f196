#include "ssh/event_loop.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace barge::ssh {
namespace {

using Clock = EventLoop::Clock;
using std::chrono::milliseconds;

struct Pipe {
  int r = -1, w = -1;
  Pipe() {
    int fds[2];
    EXPECT_EQ(pipe2(fds, O_CLOEXEC | O_NONBLOCK), 0);
    r = fds[0];
    w = fds[1];
  }
  ~Pipe() {
    if (r >= 0) close(r);
    if (w >= 0) close(w);
  }
};

TEST(EventLoop, PollWaitsForTheTimeoutWhenNothingHappens) {
  // libssh's poll returns at once on an empty event; the loop must not.
  EventLoop loop;
  auto start = Clock::now();
  loop.Poll(milliseconds(60));
  EXPECT_GE(Clock::now() - start, milliseconds(50));
}

TEST(EventLoop, ATimerRunsFromPollOnceItIsDueAndNotBefore) {
  EventLoop loop;
  int runs = 0;
  auto start = Clock::now();
  loop.AddTimer(start + milliseconds(80), [&] { ++runs; });
  loop.Poll(milliseconds(0));
  EXPECT_EQ(runs, 0);
  // One long Poll: its wait is cut short to the timer, which then runs.
  loop.Poll(milliseconds(20000));
  EXPECT_EQ(runs, 1);
  auto elapsed = Clock::now() - start;
  EXPECT_GE(elapsed, milliseconds(80));
  EXPECT_LT(elapsed, milliseconds(10000));  // bound against a hang only
  loop.Poll(milliseconds(0));
  EXPECT_EQ(runs, 1);
}

TEST(EventLoop, TimersRunInTimeOrder) {
  EventLoop loop;
  std::vector<int> order;
  auto now = Clock::now();
  loop.AddTimer(now + milliseconds(30), [&] { order.push_back(3); });
  loop.AddTimer(now + milliseconds(10), [&] { order.push_back(1); });
  loop.AddTimer(now + milliseconds(20), [&] { order.push_back(2); });
  while (order.size() < 3) loop.Poll(milliseconds(1000));
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
}

TEST(EventLoop, ACancelledTimerNeverRuns) {
  EventLoop loop;
  bool ran = false, other = false;
  auto id = loop.AddTimer(Clock::now() + milliseconds(10), [&] { ran = true; });
  loop.AddTimer(Clock::now() + milliseconds(30), [&] { other = true; });
  loop.CancelTimer(id);
  loop.CancelTimer(id);  // twice is harmless
  while (!other) loop.Poll(milliseconds(1000));
  EXPECT_FALSE(ran);
}

TEST(EventLoop, ATimerCanCancelAnotherDueTimer) {
  EventLoop loop;
  bool second = false;
  EventLoop::TimerId id2 = 0;
  auto when = Clock::now();
  loop.AddTimer(when, [&] { loop.CancelTimer(id2); });
  id2 = loop.AddTimer(when, [&] { second = true; });
  loop.Poll(milliseconds(0));
  loop.Poll(milliseconds(0));
  EXPECT_FALSE(second);
}

TEST(EventLoop, ATimerThatReArmsItselfForNowRunsOncePerPoll) {
  EventLoop loop;
  int runs = 0;
  std::function<void()> again = [&] {
    ++runs;
    loop.AddTimer(Clock::now(), again);
  };
  loop.AddTimer(Clock::now(), again);
  loop.Poll(milliseconds(0));
  // Once before the wait and once after it, at most: never a busy loop.
  EXPECT_GE(runs, 1);
  EXPECT_LE(runs, 2);
}

TEST(EventLoop, AWatchedFdReportsReadabilityWithItsRevents) {
  EventLoop loop;
  Pipe p;
  short seen = 0;
  std::string got;
  loop.WatchFd(p.r, POLLIN, [&](short revents) {
    seen = revents;
    char buf[16];
    ssize_t n = read(p.r, buf, sizeof buf);
    if (n > 0) got.append(buf, static_cast<size_t>(n));
  });
  loop.Poll(milliseconds(0));
  EXPECT_EQ(seen, 0);
  ASSERT_EQ(write(p.w, "hi", 2), 2);
  loop.Poll(milliseconds(5000));
  EXPECT_TRUE(seen & POLLIN);
  EXPECT_EQ(got, "hi");
  loop.UnwatchFd(p.r);
}

TEST(EventLoop, AWatchedFdReportsHangUp) {
  EventLoop loop;
  Pipe p;
  short seen = 0;
  loop.WatchFd(p.r, POLLIN, [&](short revents) { seen |= revents; });
  close(p.w);
  p.w = -1;
  loop.Poll(milliseconds(5000));
  EXPECT_TRUE(seen & POLLHUP);
  loop.UnwatchFd(p.r);
}

TEST(EventLoop, AnFdUnwatchedAndClosedInsideItsCallbackIsNeverCalledAgain) {
  EventLoop loop;
  auto first = std::make_unique<Pipe>();
  int calls = 0;
  int fd = first->r;
  loop.WatchFd(fd, POLLIN, [&](short) {
    ++calls;
    loop.UnwatchFd(fd);
    close(first->r);
    first->r = -1;
  });
  ASSERT_EQ(write(first->w, "x", 1), 1);
  loop.Poll(milliseconds(5000));
  EXPECT_EQ(calls, 1);

  // The fd number is likely reused at once; the new watch must work and the
  // old callback must stay silent.
  Pipe second;
  bool second_called = false;
  loop.WatchFd(second.r, POLLIN, [&](short) {
    second_called = true;
    char b;
    (void)!read(second.r, &b, 1);
  });
  ASSERT_EQ(write(second.w, "y", 1), 1);
  loop.Poll(milliseconds(5000));
  EXPECT_TRUE(second_called);
  EXPECT_EQ(calls, 1);
  loop.UnwatchFd(second.r);
}

TEST(EventLoop, OneCallbackMayUnwatchAnotherFdThatIsAlsoReady) {
  EventLoop loop;
  Pipe a, b;
  int a_calls = 0, b_calls = 0;
  loop.WatchFd(a.r, POLLIN, [&](short) {
    ++a_calls;
    loop.UnwatchFd(b.r);
    loop.UnwatchFd(a.r);
  });
  loop.WatchFd(b.r, POLLIN, [&](short) {
    ++b_calls;
    loop.UnwatchFd(a.r);
    loop.UnwatchFd(b.r);
  });
  ASSERT_EQ(write(a.w, "x", 1), 1);
  ASSERT_EQ(write(b.w, "x", 1), 1);
  loop.Poll(milliseconds(5000));
  loop.Poll(milliseconds(0));
  EXPECT_EQ(a_calls + b_calls, 1);
}

TEST(EventLoop, WatchingAnFdAgainReplacesItsCallback) {
  EventLoop loop;
  Pipe p;
  int old_calls = 0, new_calls = 0;
  loop.WatchFd(p.r, POLLIN, [&](short) { ++old_calls; });
  loop.WatchFd(p.r, POLLIN, [&](short) {
    ++new_calls;
    char c;
    (void)!read(p.r, &c, 1);
  });
  ASSERT_EQ(write(p.w, "x", 1), 1);
  loop.Poll(milliseconds(5000));
  EXPECT_EQ(old_calls, 0);
  EXPECT_EQ(new_calls, 1);
  loop.UnwatchFd(p.r);
}

TEST(EventLoop, WakeupFromAnotherThreadEndsAWaitingPoll) {
  EventLoop loop;
  std::atomic<bool> woke{false};
  std::thread t([&] {
    std::this_thread::sleep_for(milliseconds(50));
    woke = true;
    loop.Wakeup();
  });
  auto start = Clock::now();
  while (!woke) loop.Poll(milliseconds(20000));
  EXPECT_LT(Clock::now() - start, milliseconds(10000));  // bound against a hang only
  t.join();
}

TEST(EventLoop, PollHooksRunOnEveryPollUntilRemoved) {
  EventLoop loop;
  int runs = 0;
  EventLoop::HookId id = loop.AddPollHook([&] { ++runs; });
  loop.Poll(milliseconds(0));
  EXPECT_GE(runs, 1);
  int after_one = runs;
  loop.Poll(milliseconds(0));
  EXPECT_GT(runs, after_one);
  loop.RemovePollHook(id);
  int after_remove = runs;
  loop.Poll(milliseconds(0));
  EXPECT_EQ(runs, after_remove);
}

TEST(EventLoop, AHookMayRemoveItselfWhileRunning) {
  EventLoop loop;
  int runs = 0;
  EventLoop::HookId id = 0;
  id = loop.AddPollHook([&] {
    ++runs;
    loop.RemovePollHook(id);
  });
  loop.Poll(milliseconds(0));
  loop.Poll(milliseconds(0));
  EXPECT_EQ(runs, 1);
}

TEST(EventLoop, ACallbackThatThrowsDoesNotStopTheLoop) {
  EventLoop loop;
  bool later = false;
  loop.AddTimer(Clock::now(), [] { throw std::runtime_error("boom"); });
  loop.AddTimer(Clock::now() + milliseconds(5), [&] { later = true; });
  while (!later) loop.Poll(milliseconds(1000));
  EXPECT_TRUE(later);
}

// A virtual loop (the clock seam of the controller's fake-host tests).

TEST(EventLoop, AVirtualLoopJumpsToTheNextTimerInsteadOfWaiting) {
  EventLoop loop(EventLoop::TimeSource::kVirtual);
  const auto real_start = Clock::now();
  const auto start = loop.Now();
  std::vector<int> order;
  std::vector<Clock::duration> at;
  loop.AddTimer(start + std::chrono::hours(1), [&] { order.push_back(2); at.push_back(loop.Now() - start); });
  loop.AddTimer(start + std::chrono::minutes(10), [&] { order.push_back(1); at.push_back(loop.Now() - start); });
  loop.Poll(milliseconds(-1));  // no limit: up to the first timer
  ASSERT_EQ(order, std::vector<int>({1}));
  EXPECT_EQ(at[0], std::chrono::minutes(10));
  loop.Poll(milliseconds(-1));
  ASSERT_EQ(order, std::vector<int>({1, 2}));
  EXPECT_EQ(at[1], std::chrono::hours(1));
  // An hour and ten minutes of the loop's time took no real waiting.
  EXPECT_LT(Clock::now() - real_start, milliseconds(5000));  // bound against a wait only
}

TEST(EventLoop, AVirtualLoopMovesNoFurtherThanThePollsTimeout) {
  EventLoop loop(EventLoop::TimeSource::kVirtual);
  const auto start = loop.Now();
  bool ran = false;
  loop.AddTimer(start + milliseconds(500), [&] { ran = true; });
  loop.Poll(milliseconds(200));
  EXPECT_FALSE(ran);
  EXPECT_EQ(loop.Now() - start, milliseconds(200));
  loop.Poll(milliseconds(200));
  EXPECT_EQ(loop.Now() - start, milliseconds(400));
  loop.Poll(milliseconds(200));  // cut short at the timer
  EXPECT_TRUE(ran);
  EXPECT_EQ(loop.Now() - start, milliseconds(500));
  loop.Poll(milliseconds(0));
  EXPECT_EQ(loop.Now() - start, milliseconds(500));
}

TEST(EventLoop, AVirtualClockStandsStillWhileCallbacksRun) {
  EventLoop loop(EventLoop::TimeSource::kVirtual);
  const auto start = loop.Now();
  Clock::time_point seen{};
  loop.AddTimer(start + milliseconds(30), [&] {
    std::this_thread::sleep_for(milliseconds(20));  // real time passes
    seen = loop.Now();
  });
  loop.Poll(milliseconds(1000));
  EXPECT_EQ(seen, start + milliseconds(30));
  EXPECT_EQ(loop.Now(), start + milliseconds(30));
}

TEST(EventLoop, AVirtualLoopServesAReadyFdWithoutMovingItsClock) {
  EventLoop loop(EventLoop::TimeSource::kVirtual);
  Pipe p;
  int calls = 0;
  loop.WatchFd(p.r, POLLIN, [&](short) {
    ++calls;
    char c;
    (void)!read(p.r, &c, 1);
  });
  loop.AddTimer(loop.Now() + std::chrono::hours(1), [] {});
  const auto start = loop.Now();
  ASSERT_EQ(write(p.w, "x", 1), 1);
  loop.Poll(milliseconds(-1));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(loop.Now(), start) << "time moved although an fd had something";
  loop.Poll(milliseconds(-1));  // nothing ready now: on to the timer
  EXPECT_EQ(loop.Now() - start, std::chrono::hours(1));
  loop.UnwatchFd(p.r);
}

TEST(EventLoop, ARealLoopsClockIsTheSteadyClock) {
  EventLoop loop;
  const auto before = Clock::now();
  const auto now = loop.Now();
  EXPECT_LE(before, now);
  EXPECT_LE(now, Clock::now());
}

}  // namespace
}  // namespace barge::ssh
