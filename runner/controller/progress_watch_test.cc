// ProgressWatch on its own (progress_watch.h): given the job's context, the
// attempt and Faults, on the virtual clock (tests/support/part_world.h); the
// nodes' lines are fed at scripted times.
#include "runner/controller/progress_watch.h"

#include <gtest/gtest.h>

#include <chrono>
#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "runner/controller/host_records.h"
#include "runner/controller/job_state.h"
#include "tests/support/part_world.h"

namespace barge::runner {
namespace progress_watch_test {

using std::chrono::milliseconds;
using std::chrono::seconds;

struct WatchWorld {
  explicit WatchWorld(const std::string& extra, const std::string& hosts = "[h1, h2]")
      : world(PartWorld::Yaml(extra, hosts)),
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

TEST(TraceHang, OneHostsRanksQuietABoundBeforeEveryRankOfTheOtherHostsAreTracedToIt) {
  const internal::Clock::time_point t0{};
  // h2's ranks went quiet at 10 s and 12 s; h1's and h3's went on to 58 s
  // and more.
  const std::vector<internal::RankSign> ranks = {{"h1", t0 + seconds(60)}, {"h1", t0 + seconds(62)},
                                                 {"h2", t0 + seconds(10)}, {"h2", t0 + seconds(12)},
                                                 {"h3", t0 + seconds(58)}};
  const std::optional<internal::HangTrace> trace = internal::TraceHang(ranks, seconds(30));
  ASSERT_TRUE(trace.has_value());
  EXPECT_EQ(trace->host, "h2");
  EXPECT_EQ(trace->lead, seconds(46)) << "from h2's last rank (12 s) to the first of another host (h3, 58 s)";
  // Exactly the bound still counts; a millisecond less does not.
  EXPECT_TRUE(internal::TraceHang(ranks, seconds(46)).has_value());
  EXPECT_FALSE(internal::TraceHang(ranks, seconds(46) + milliseconds(1)).has_value());
}

TEST(TraceHang, RanksThatStallTogetherTwoQuietHostsOrOneHostAloneAreTracedToNoHost) {
  const internal::Clock::time_point t0{};
  // The whole job stalls: every rank's last sign within one bound.
  EXPECT_FALSE(internal::TraceHang({{"h1", t0 + seconds(40)}, {"h2", t0 + seconds(31)}, {"h3", t0 + seconds(45)}},
                                   seconds(30))
                   .has_value());
  // Two hosts went quiet early: not one host's doing.
  EXPECT_FALSE(internal::TraceHang({{"h1", t0 + seconds(90)}, {"h2", t0 + seconds(10)}, {"h3", t0 + seconds(12)}},
                                   seconds(30))
                   .has_value());
  // One rank of a host went on while its other rank stopped early: the
  // host's last rank counts, which went on with the others.
  EXPECT_FALSE(internal::TraceHang({{"h1", t0 + seconds(90)}, {"h2", t0 + seconds(10)}, {"h2", t0 + seconds(88)}},
                                   seconds(30))
                   .has_value());
  // Every rank on one host.
  EXPECT_FALSE(internal::TraceHang({{"h1", t0 + seconds(90)}, {"h1", t0 + seconds(10)}}, seconds(30)).has_value());
  EXPECT_FALSE(internal::TraceHang({}, seconds(30)).has_value());
}

// ProgressWatch with HostRecords listening (as the controller has it): the
// hang's event names the host it is traced to, and its record gets the entry.
struct TracedWorld : WatchWorld {
  explicit TracedWorld(const std::string& extra) : WatchWorld(extra, "[h1, h2, h3]"), records(&world.ctx(), &world.hosts()) {
    world.ctx().observer.Add(&records);
  }
  // The command lines that write `host`'s failure record.
  std::vector<std::string> Writes(const std::string& host) {
    std::vector<std::string> out;
    for (const std::string& l : world.host(host).lines()) {
      if (l.find("barge-fault-") != std::string::npos) out.push_back(l);
    }
    return out;
  }
  internal::HostRecords records;
};

TEST(ProgressWatch, AHangWhoseRanksOnOneHostWentQuietABoundBeforeTheOthersIsRecordedOnThatHostOnly) {
  TracedWorld w("progress: {pattern: 'step', within: 20s, every: 5s}\n");
  w.watch.Start();
  // Rank 1 (h2) steps until 10 s; ranks 0 (h1) and 2 (h3) every 2 s until
  // 50 s (then they wait for it).
  for (int s = 2; s <= 10; s += 2) w.LineAt(seconds(s), 1, "step");
  for (int s = 2; s <= 50; s += 2) {
    w.LineAt(seconds(s), 0, "step");
    w.LineAt(seconds(s), 2, "step");
  }
  w.RunToFault();
  ASSERT_TRUE(w.world.attempt().fault.has_value());
  const internal::Fault& f = *w.world.attempt().fault;
  EXPECT_EQ(f.cause, RestartCause::kHang);
  EXPECT_EQ(f.host, "h2");
  EXPECT_NE(f.detail.find("(progress:)\ntraced to h2: its ranks went quiet 40s before any rank of another host did "
                          "(the bound: 20s)\nranks silent:"),
            std::string::npos)
      << f.detail;
  ASSERT_EQ(w.world.recorder().events.size(), 1u);
  EXPECT_EQ(w.world.recorder().events[0].rfind("hang h2: ", 0), 0u) << w.world.recorder().events[0];
  w.records.WriteRecords();
  const std::vector<std::string> writes = w.Writes("h2");
  ASSERT_EQ(writes.size(), 1u) << w.world.recorder().AllMessages();
  EXPECT_NE(writes[0].find("barge.fault=hang"), std::string::npos) << writes[0];
  EXPECT_NE(writes[0].find("traced to h2: its ranks went quiet 40s"), std::string::npos) << writes[0];
  EXPECT_TRUE(w.Writes("h1").empty()) << w.Writes("h1").front();
  EXPECT_TRUE(w.Writes("h3").empty()) << w.Writes("h3").front();
}

TEST(ProgressWatch, AHangOfTheWholeJobNamesNoHostAndIsRecordedNowhere) {
  TracedWorld w("progress: {pattern: 'step', within: 20s, every: 5s}\n");
  w.watch.Start();
  // Every rank steps until about 30 s (within a second of each other),
  // then none does; rank 1 keeps printing other lines.
  for (int s = 2; s <= 30; s += 2) {
    for (int rank = 0; rank < 3; ++rank) w.LineAt(seconds(s) + milliseconds(300 * rank), rank, "step");
  }
  for (int s = 31; s <= 90; ++s) w.LineAt(seconds(s), 1, "waiting for the others");
  w.RunToFault();
  ASSERT_TRUE(w.world.attempt().fault.has_value());
  const internal::Fault& f = *w.world.attempt().fault;
  EXPECT_EQ(f.cause, RestartCause::kHang);
  EXPECT_EQ(f.host, "");
  EXPECT_EQ(f.detail.find("traced to"), std::string::npos) << f.detail;
  w.records.WriteRecords();
  for (const char* h : {"h1", "h2", "h3"}) EXPECT_TRUE(w.Writes(h).empty()) << h << ": " << w.Writes(h).front();
  EXPECT_FALSE(w.world.recorder().Said("recorded on the host")) << w.world.recorder().AllMessages();
}

TEST(ProgressWatch, ASilenceHangOrOneWhereOnlySomeRanksShowProgressNamesNoHost) {
  // Ranks 1 and 2 print only as they start; rank 0 steps until 50 s.
  for (const char* progress : {"{silence: 20s, every: 5s}", "{pattern: 'step', within: 20s, every: 5s}"}) {
    TracedWorld w(std::string("progress: ") + progress + "\n");
    w.watch.Start();
    w.LineAt(seconds(1), 1, "loading shards");
    w.LineAt(seconds(1), 2, "loading shards");
    for (int s = 2; s <= 50; s += 2) w.LineAt(seconds(s), 0, "step");
    w.RunToFault();
    ASSERT_TRUE(w.world.attempt().fault.has_value()) << progress;
    EXPECT_EQ(w.world.attempt().fault->host, "") << progress;
    EXPECT_EQ(w.world.attempt().fault->detail.find("traced to"), std::string::npos) << w.world.attempt().fault->detail;
    w.records.WriteRecords();
    for (const char* h : {"h1", "h2", "h3"}) EXPECT_TRUE(w.Writes(h).empty()) << progress << " " << h;
  }
  // The silence hang of the traced test's ranks: no host either.
  TracedWorld w("progress: {silence: 20s, every: 5s}\n");
  w.watch.Start();
  for (int s = 2; s <= 10; s += 2) w.LineAt(seconds(s), 1, "step");
  for (int s = 2; s <= 50; s += 2) {
    w.LineAt(seconds(s), 0, "step");
    w.LineAt(seconds(s), 2, "step");
  }
  w.RunToFault();
  ASSERT_TRUE(w.world.attempt().fault.has_value());
  EXPECT_EQ(w.world.attempt().fault->host, "");
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

// Each rank's node runs (heartbeats are asked of running nodes only).
void AllRunning(PartWorld& world) {
  for (auto& n : world.attempt().nodes) n->phase = internal::NodePhase::kRunning;
}

// From `from` on, every second of virtual time, the hosts answer the
// heartbeat question as if rank r's file was last modified at
// `touched(r, now)` seconds (nullopt: no file).
void AnswerHeartbeats(PartWorld& world, int from, int until,
                      const std::function<std::optional<int>(size_t, int)>& touched) {
  for (int s = from; s <= until; ++s) {
    world.loop().AddTimer(world.loop().Now() + seconds(s), [&world, s, touched] {
      for (size_t r = 0; r < world.attempt().nodes.size(); ++r) {
        const internal::NodeState& n = *world.attempt().nodes[r];
        const std::optional<int> t = touched(r, s);
        world.host(n.host->name).On("stat -c %Y", {0, n.plan->container.name + " " + std::to_string(1000 + s) + " " +
                                                          (t ? std::to_string(1000 + *t) : "-") + "\n"});
      }
    });
  }
}

TEST(ProgressWatch, FileTimesAnswersAreReadAsAgesAndAMissingFileHasNone) {
  const std::vector<internal::FileAge> ages = internal::ParseFileTimes("job-0 1700000100 1700000040\njob-1 1700000100 -\nbad\n");
  ASSERT_EQ(ages.size(), 2u);
  EXPECT_EQ(ages[0].container, "job-0");
  EXPECT_EQ(ages[0].age, seconds(60));
  EXPECT_EQ(ages[1].container, "job-1");
  EXPECT_FALSE(ages[1].age.has_value());
  EXPECT_EQ(internal::LowerMedian({3, 1, 2}), 2);
  EXPECT_EQ(internal::LowerMedian({4, 1, 3, 2}), 2);
}

TEST(ProgressWatch, AHeartbeatFileNoRankTouchesForWithinIsAHangWithinTheBoundPlusOnePeriod) {
  WatchWorld w("progress: {heartbeat: {file: /ckpt/beat, within: 30s}, every: 10s}\n");
  AllRunning(w.world);
  // Both ranks touch their file every 5 s until 40 s, then stop.
  AnswerHeartbeats(w.world, 0, 200, [](size_t, int now) { return std::min(now, 40) / 5 * 5; });
  w.watch.Start();
  const milliseconds took = w.RunToFault();
  ASSERT_TRUE(w.world.attempt().fault.has_value());
  const internal::Fault& f = *w.world.attempt().fault;
  EXPECT_EQ(f.cause, RestartCause::kHang);
  EXPECT_GE(took, seconds(70));
  EXPECT_LE(took, seconds(40 + 30 + 10));
  EXPECT_NE(f.detail.find("no rank touched /ckpt/beat for 30s"), std::string::npos) << f.detail;
  EXPECT_NE(f.detail.find("rank 1 (h2): no line since the attempt began 1m10s ago, heartbeat 30s ago"), std::string::npos)
      << f.detail;
  // The question goes to each host, over the job's connection, bounded.
  EXPECT_NE(w.world.host("h1").lines().back().find("docker exec \"$c\" stat -c %Y /ckpt/beat"), std::string::npos)
      << w.world.host("h1").lines().back();
}

TEST(ProgressWatch, OneRanksFreshHeartbeatIsNoHangAndNoFileAtAllIsOneFromTheStart) {
  WatchWorld w("progress: {heartbeat: {file: /beat, within: 30s}, every: 10s}\n");
  AllRunning(w.world);
  AnswerHeartbeats(w.world, 0, 300, [](size_t r, int now) -> std::optional<int> {
    if (r == 1) return now;  // rank 1 keeps touching its file
    return std::nullopt;
  });
  w.watch.Start();
  w.RunToFault(seconds(300));
  EXPECT_FALSE(w.world.attempt().fault.has_value()) << w.world.attempt().fault->detail;

  WatchWorld none("progress: {heartbeat: {file: /beat, within: 30s}, every: 10s}\n");
  AllRunning(none.world);
  AnswerHeartbeats(none.world, 0, 100, [](size_t, int) -> std::optional<int> { return std::nullopt; });
  none.watch.Start();
  const milliseconds took = none.RunToFault();
  EXPECT_GE(took, seconds(30));
  EXPECT_LE(took, seconds(31)) << "the answer of the round at 30 s (the fake hosts answer in milliseconds)";
  ASSERT_TRUE(none.world.attempt().fault.has_value());
  EXPECT_NE(none.world.attempt().fault->detail.find("rank 0 (h1): no line since the attempt began 30s ago, no heartbeat file seen"),
            std::string::npos)
      << none.world.attempt().fault->detail;
}

TEST(ProgressWatch, AHeartbeatHangWhoseOneHostStoppedABoundBeforeTheOthersIsTracedToIt) {
  WatchWorld w("progress: {heartbeat: {file: /beat, within: 30s}, every: 10s}\n", "[h1, h2, h3]");
  AllRunning(w.world);
  // Rank 1 (h2) touches its file every 5 s until 20 s; ranks 0 and 2 until 60 s.
  AnswerHeartbeats(w.world, 0, 200, [](size_t r, int now) { return std::min(now, r == 1 ? 20 : 60) / 5 * 5; });
  w.watch.Start();
  w.RunToFault();
  ASSERT_TRUE(w.world.attempt().fault.has_value());
  const internal::Fault& f = *w.world.attempt().fault;
  EXPECT_EQ(f.host, "h2") << f.detail;
  EXPECT_NE(f.detail.find("traced to h2: its ranks went quiet 40s before any rank of another host did (the bound: "
                          "30s)"),
            std::string::npos)
      << f.detail;
}

TEST(ProgressWatch, ARankWhoseStepsTakeTwiceTheMediansIsAStragglerUntilItKeepsUpAgain) {
  WatchWorld w("progress: {pattern: 'step \\d+', stragglers: {factor: 1.5, steps: 3}, every: 5s}\n", "[h1, h2, h3]");
  w.watch.Start();
  // Ranks 0 and 1 step every second; rank 2 every 3 s until 30 s, then
  // every second.
  for (int s = 1; s <= 60; ++s) {
    w.LineAt(seconds(s), 0, "step " + std::to_string(s));
    w.LineAt(seconds(s) + milliseconds(10), 1, "step " + std::to_string(s));
    if (s >= 30 || s % 3 == 0) w.LineAt(seconds(s) + milliseconds(20), 2, "step " + std::to_string(s));
  }
  w.RunToFault(seconds(20));
  const auto& events = w.world.recorder().events;
  ASSERT_FALSE(events.empty());
  EXPECT_TRUE(w.world.recorder().Said("straggler: rank 2 (h3): its last 3 steps took 3.00 s on average, 3.0x the median rank's 1.00 s (stragglers.factor 1.50)"))
      << w.world.recorder().AllMessages();
  auto has = [&](const std::string& prefix) {
    return std::any_of(events.begin(), events.end(), [&](const std::string& e) { return e.rfind(prefix, 0) == 0; });
  };
  EXPECT_TRUE(has("straggler h3: rank 2 (h3): its last 3 steps took 3.00 s")) << ::testing::PrintToString(events);
  EXPECT_TRUE(has("running: 3 node(s); straggling: rank 2 (h3)")) << ::testing::PrintToString(events);
  EXPECT_FALSE(has("straggler h1:") || has("straggler h2:")) << ::testing::PrintToString(events);
  EXPECT_FALSE(has("straggler_cleared"));
  w.RunToFault(seconds(40));
  EXPECT_TRUE(has("straggler_cleared h3: rank 2 (h3) keeps up again")) << ::testing::PrintToString(events);
  EXPECT_EQ(events.back(), "running: 3 node(s)") << ::testing::PrintToString(events);
  EXPECT_FALSE(w.world.attempt().fault.has_value()) << "a straggler is reported, the job goes on";
}

TEST(ProgressWatch, WithATimePatternTheStepTimesAreTheRanksOwnEvenWhenTheirLinesComeTogether) {
  WatchWorld w("progress: {stragglers: {steps: 4, time: 'compute ([0-9.]+)s'}, every: 10s}\n", "[h1, h2, h3]");
  w.watch.Start();
  // A synchronous job: every rank prints at the same instant (the
  // all-reduce waits for the slowest), rank 1's compute takes 2.5 times
  // as long.
  for (int s = 1; s <= 30; ++s) {
    for (int r = 0; r < 3; ++r) w.LineAt(seconds(s), r, "step " + std::to_string(s) + " compute " + (r == 1 ? "0.50s" : "0.20s"));
  }
  w.RunToFault(seconds(25));
  EXPECT_TRUE(w.world.recorder().Said("straggler: rank 1 (h2): its last 4 steps took 0.50 s on average, 2.5x the median rank's 0.20 s"))
      << w.world.recorder().AllMessages();
  EXPECT_FALSE(w.world.recorder().Said("rank 0 (h1): its")) << w.world.recorder().AllMessages();
}

}  // namespace progress_watch_test
}  // namespace barge::runner
