// runner/store/usage.h: how long a job held its hosts and GPUs.
#include "runner/store/usage.h"

#include <gtest/gtest.h>

#include "tests/support/raw_sql.h"

namespace barge::runner {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

const TimePoint kT0 = TimePoint(std::chrono::hours(24 * 365 * 50));

PhaseRecord Span(int host_id, const std::string& host, std::optional<int> rank, const std::string& phase,
                 seconds began, std::optional<seconds> ended, std::optional<int> gpus = std::nullopt) {
  PhaseRecord p;
  p.host_id = host_id;
  p.host = host;
  p.rank = rank;
  p.phase = phase;
  p.began = kT0 + began;
  if (ended) p.ended = kT0 + *ended;
  p.gpus = gpus;
  return p;
}

JobRecord EndedAt(seconds at) {
  JobRecord j;
  j.status = JobStatus::kSucceeded;
  j.ended = kT0 + at;
  return j;
}

TEST(NodeHolds, ANodeHoldsItsHostFromItsStartToTheEndOfItsHostsRemoval) {
  const std::vector<PhaseRecord> phases = {
      Span(0, "h1", std::nullopt, "preflight", seconds(0), seconds(5)),
      Span(0, "h1", 0, "start", seconds(10), seconds(11), 4),
      Span(0, "h1", 0, "running", seconds(11), seconds(3600)),
      Span(0, "h1", std::nullopt, "stop", seconds(3600), seconds(3610)),
      Span(0, "h1", std::nullopt, "remove", seconds(3610), seconds(3612)),
  };
  const std::vector<NodeHold> holds = NodeHolds(EndedAt(seconds(4000)), phases, kT0 + seconds(5000));
  ASSERT_EQ(holds.size(), 1u);
  EXPECT_EQ(holds[0].host, "h1");
  EXPECT_EQ(holds[0].rank, 0);
  EXPECT_EQ(holds[0].gpus, 4);
  EXPECT_EQ(holds[0].began, kT0 + seconds(10));
  EXPECT_EQ(holds[0].ended, kT0 + seconds(3612));
}

TEST(NodeHolds, ALostHostsNodeEndsWithItsRunningAndALiveJobsNodeAtNow) {
  const std::vector<PhaseRecord> phases = {
      Span(0, "h1", 0, "start", seconds(0), seconds(1), 1),
      Span(0, "h1", 0, "running", seconds(1), std::nullopt),
      Span(1, "h2", 1, "start", seconds(0), seconds(1), 1),
      Span(1, "h2", 1, "running", seconds(1), seconds(100)),  // its host was lost
  };
  JobRecord live;
  live.status = JobStatus::kRunning;
  const std::vector<NodeHold> holds = NodeHolds(live, phases, kT0 + seconds(500));
  ASSERT_EQ(holds.size(), 2u);
  EXPECT_EQ(holds[0].ended, kT0 + seconds(500));
  EXPECT_EQ(holds[1].ended, kT0 + seconds(100));
  // Once the job ended (lost, with no removal recorded), at its end.
  EXPECT_EQ(NodeHolds(EndedAt(seconds(300)), phases, kT0 + seconds(500))[0].ended, kT0 + seconds(300));
}

TEST(NodeHolds, EachAttemptOfARestartedJobIsItsOwnHoldEndedByItsOwnRemoval) {
  const std::vector<PhaseRecord> phases = {
      Span(0, "h1", 0, "start", seconds(0), seconds(1), 2),
      Span(0, "h1", std::nullopt, "remove", seconds(60), seconds(62)),
      Span(0, "h1", 0, "start", seconds(70), seconds(71), 1),  // a GPU was taken out at the restart
      Span(0, "h1", std::nullopt, "remove", seconds(200), seconds(205)),
  };
  const std::vector<NodeHold> holds = NodeHolds(EndedAt(seconds(210)), phases, kT0 + seconds(999));
  ASSERT_EQ(holds.size(), 2u);
  EXPECT_EQ(holds[0].ended, kT0 + seconds(62));
  EXPECT_EQ(holds[0].gpus, 2);
  EXPECT_EQ(holds[1].began, kT0 + seconds(70));
  EXPECT_EQ(holds[1].ended, kT0 + seconds(205));
  EXPECT_EQ(holds[1].gpus, 1);
  const Usage u = TotalUsage(holds, kT0, kT0 + seconds(999));
  EXPECT_DOUBLE_EQ(u.host_hours, (62.0 + 135.0) / 3600);
  EXPECT_DOUBLE_EQ(u.gpu_hours, (2 * 62.0 + 1 * 135.0) / 3600);
}

TEST(UsageByHost, NodesSharingAHostCountItOnceForHostHoursAndEachForGpuHours) {
  const std::vector<NodeHold> holds = {
      {"local", 0, 1, kT0, kT0 + minutes(60)},
      {"local", 1, 2, kT0 + minutes(30), kT0 + minutes(90)},
      {"other", 2, 0, kT0, kT0 + minutes(30)},
  };
  const auto by_host = UsageByHost(holds, kT0 - minutes(1), kT0 + minutes(120));
  ASSERT_EQ(by_host.size(), 2u);
  EXPECT_DOUBLE_EQ(by_host.at("local").host_hours, 1.5);
  EXPECT_DOUBLE_EQ(by_host.at("local").gpu_hours, 1.0 + 2.0);
  EXPECT_DOUBLE_EQ(by_host.at("other").host_hours, 0.5);
  EXPECT_DOUBLE_EQ(by_host.at("other").gpu_hours, 0.0);
  EXPECT_FALSE(by_host.at("local").gpus_unknown);
}

TEST(UsageByHost, OnlyThePartInsideTheWindowCountsAndAnUnknownGpuCountIsFlagged) {
  const std::vector<NodeHold> holds = {
      {"h1", 0, 4, kT0, kT0 + minutes(120)},
      {"h2", 1, std::nullopt, kT0, kT0 + minutes(120)},
      {"h3", 2, 4, kT0 - minutes(60), kT0 - minutes(1)},  // before the window
  };
  const auto by_host = UsageByHost(holds, kT0 + minutes(60), kT0 + minutes(90));
  ASSERT_EQ(by_host.size(), 2u);
  EXPECT_DOUBLE_EQ(by_host.at("h1").host_hours, 0.5);
  EXPECT_DOUBLE_EQ(by_host.at("h1").gpu_hours, 2.0);
  EXPECT_DOUBLE_EQ(by_host.at("h2").host_hours, 0.5);
  EXPECT_DOUBLE_EQ(by_host.at("h2").gpu_hours, 0.0);
  EXPECT_TRUE(by_host.at("h2").gpus_unknown);
  const Usage total = TotalUsage(holds, kT0 + minutes(60), kT0 + minutes(90));
  EXPECT_DOUBLE_EQ(total.host_hours, 1.0);
  EXPECT_DOUBLE_EQ(total.gpu_hours, 2.0);
  EXPECT_TRUE(total.gpus_unknown);
}

TEST(UsageByHostInStore, CountsAHostTwoJobsHeldAtOnceOnceAndOnlyInsideTheWindow) {
  barge::testing::TempDir tmp;
  auto store = JobStore::Open(tmp.path());
  ASSERT_TRUE(store.ok()) << store.status().message();
  auto add = [&](const std::string& id, seconds began, seconds removed, int gpus) {
    JobRecord j;
    j.id = id;
    j.name = id;
    j.status = JobStatus::kSucceeded;
    j.created = kT0 + began;
    j.ended = kT0 + removed;
    ASSERT_TRUE((*store)->CreateJob(j).ok());
    std::vector<PhaseRecord> spans = {Span(0, "h1", 0, "start", began, began, gpus),
                                      Span(0, "h1", std::nullopt, "remove", removed, removed)};
    for (PhaseRecord& p : spans) p.job_id = id;
    ASSERT_TRUE((*store)->WritePhases(spans).ok());
  };
  add("old", seconds(0), seconds(3600), 8);           // ended before the window
  add("a", seconds(7200), seconds(9000), 2);          // 30 min
  add("b", seconds(8100), seconds(10800), 1);         // 45 min, 15 of them inside a's
  Result<std::map<std::string, Usage>> use = UsageByHostInStore(**store, kT0 + seconds(7000), kT0 + seconds(20000));
  ASSERT_TRUE(use.ok()) << use.status().message();
  ASSERT_EQ(use->size(), 1u);
  EXPECT_DOUBLE_EQ(use->at("h1").host_hours, 1.0);
  EXPECT_DOUBLE_EQ(use->at("h1").gpu_hours, 2 * 0.5 + 1 * 0.75);
}

}  // namespace
}  // namespace barge::runner
