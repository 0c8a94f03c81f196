// ProgressWatch on its own (progress_watch.h): given the job's context, the
// attempt and Faults, on the virtual clock (tests/support/part_world.h); the
// nodes' lines are fed at scripted times.
#include "runner/controller/progress_watch.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "runner/controller/job_state.h"
#include "tests/support/part_world.h"

namespace barge::runner {
namespace progress_watch_test {

using std::chrono::milliseconds;
using std::chrono::seconds;

struct WatchWorld {
  explicit WatchWorld(const std::string& extra)
      : world(PartWorld::Yaml(extra)),
        faults(&world.ctx(), &world.hosts(), &world.attempt(), &world.plan()),
        watch(&world.ctx(), &world.attempt(), &faults) {
    EXPECT_TRUE(world.Connect());
    world.MakeNodes();
  }
  // Rank `rank` prints `text` `at` after now.
  void LineAt(milliseconds at, int rank, std::string text) {
    world.loop().AddTimer(world.loop().Now() + at, [this, rank, text] { watch.Line(rank, text); });
  }
  // Runs until the attempt's fault or `limit`; the virtual time it took.
  milliseconds RunToFault(milliseconds limit = std::chrono::minutes(10)) {
    const auto began = world.loop().Now();
    world.RunUntil([this] { return world.attempt().fault.has_value(); }, limit);
    return std::chrono::duration_cast<milliseconds>(world.loop().Now() - began);
  }
  PartWorld world;
  internal::Faults faults;
  internal::ProgressWatch watch;
};

TEST(ProgressWatch, EveryRankSilentForTheBoundIsAHangWithinTheBoundPlusOnePeriod) {
  WatchWorld w("progress: {silence: 30s, every: 10s}\n");
  w.watch.Start();
  w.LineAt(seconds(5), 0, "loading");
  w.LineAt(seconds(21), 1, "epoch 1");
  const milliseconds took = w.RunToFault();
  ASSERT_TRUE(w.world.attempt().fault.has_value());
  const internal::Fault& f = *w.world.attempt().fault;
  EXPECT_EQ(f.cause, RestartCause::kHang);
  // The last line at 21 s: silent for 30 s at 51 s, seen at the check of 60 s.
  EXPECT_GE(took, seconds(51));
  EXPECT_LE(took, seconds(21 + 30 + 10));
  EXPECT_NE(f.detail.find("no rank printed anything for 39s"), std::string::npos) << f.detail;
  EXPECT_NE(f.detail.find("ranks silent:\n  rank 0 (h1): last line 55s ago\n  rank 1 (h2): last line 39s ago"),
            std::string::npos)
      << f.detail;
  EXPECT_EQ(w.world.recorder().events.size(), 1u);
  EXPECT_EQ(w.world.recorder().events[0].rfind("hang ", 0), 0u) << w.world.recorder().events[0];
}

TEST(ProgressWatch, NoProgressLineForWithinIsAHangAndTheRanksStillPrintingAreNamedFirst) {
  WatchWorld w("progress: {pattern: 'step \\d+', within: 30s, every: 10s}\n");
  w.watch.Start();
  for (int i = 1; i <= 3; ++i) w.LineAt(seconds(3 * i), 0, "step " + std::to_string(i) + " loss 0.5");
  // Rank 1 never shows progress but keeps printing (a warning loop).
  for (int s = 1; s <= 119; s += 2) w.LineAt(seconds(s), 1, "NCCL WARN waiting for rank 0");
  const milliseconds took = w.RunToFault();
  ASSERT_TRUE(w.world.attempt().fault.has_value());
  const std::string& d = w.world.attempt().fault->detail;
  // The last step at 9 s: past the bound at 39 s, seen at the check of 40 s.
  EXPECT_GE(took, seconds(39));
  EXPECT_LE(took, seconds(9 + 30 + 10));
  EXPECT_NE(d.find("no rank printed a line matching /step \\d+/ for 31s"), std::string::npos) << d;
  EXPECT_NE(d.find("ranks still printing (where to look first):\n  rank 1 (h2): last line 1s ago, no progress line"),
            std::string::npos)
      << d;
  EXPECT_NE(d.find("ranks silent:\n  rank 0 (h1): last line 31s ago, last progress 31s ago"), std::string::npos) << d;
}

TEST(ProgressWatch, StepsThatKeepComingAreNoHang) {
  WatchWorld w("progress: {pattern: 'step \\d+', within: 30s, silence: 1m, every: 5s}\n");
  w.watch.Start();
  for (int s = 20; s <= 600; s += 20) w.LineAt(seconds(s), s % 40 == 0 ? 0 : 1, "step " + std::to_string(s));
  const milliseconds took = w.RunToFault(seconds(600));
  EXPECT_FALSE(w.world.attempt().fault.has_value()) << w.world.attempt().fault->detail;
  EXPECT_GE(took, seconds(600));
}

TEST(ProgressWatch, WithoutAProgressBlockNothingIsWatched) {
  WatchWorld w("");
  w.watch.Start();
  w.RunToFault(std::chrono::hours(1));
  EXPECT_FALSE(w.world.attempt().fault.has_value());
}

TEST(ProgressWatch, NoHangOnceTeardownHasBegunAndANewAttemptsClocksStartAgain) {
  WatchWorld w("progress: {silence: 30s, every: 10s}\n");
  w.watch.Start();
  w.world.attempt().tearing_down = true;
  w.RunToFault(seconds(120));
  EXPECT_FALSE(w.world.attempt().fault.has_value());
  // The next attempt (Faults::StartMonitors moves the generation on).
  w.world.attempt().tearing_down = false;
  ++w.world.attempt().generation;
  w.watch.Start();
  const milliseconds took = w.RunToFault();
  ASSERT_TRUE(w.world.attempt().fault.has_value());
  EXPECT_EQ(took, seconds(30)) << "silent since the new attempt began, checked every 10 s";
}

}  // namespace progress_watch_test
}  // namespace barge::runner
