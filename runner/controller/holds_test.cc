// Holds on its own (holds.h): given the job's context, its hosts, the plan
// and the facts it is made from, on scripted fake hosts
// (tests/support/part_world.h). The hosts' answers are the hold script's
// lines (runner/remote/reservation.h: "now", "took", "stale", "hold").
#include "runner/controller/holds.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <string>
#include <vector>

#include "runner/controller/job_state.h"
#include "runner/remote/reservation.h"
#include "tests/support/part_world.h"

namespace barge::runner {
namespace holds_test {

using std::chrono::milliseconds;
using std::chrono::seconds;

struct HoldsWorld {
  explicit HoldsWorld(const std::string& extra = "", const std::string& hosts = "[h1, h2]")
      : world(PartWorld::Yaml(extra, hosts)),
        holds(&world.ctx(), &world.hosts(), &world.planner()) {}
  PartWorld world;
  internal::Holds holds;
};

// One line of a hold listing (reservation.h's "hold" fields).
std::string HoldLine(const std::string& id, const std::string& name, const std::string& job,
                     const std::string& gpus, long long since, long long lease = 600) {
  const std::string job_name = job == "abcd1234" ? "fake" : "other";
  const std::string who = job == "abcd1234" ? "me\tbox" : "bob\tbox";
  return "hold\t" + id + "\t" + name + "\t" + job + "\t" + job_name + "\t" + who + "\t" + gpus + "\t" +
         std::to_string(since) + "\t" + std::to_string(since + lease) + "\t" + std::to_string(lease) + "\t2\n";
}

// Another job (other123) holds the whole host, its lease renewed at 1000.
std::string OtherHoldsTheHost(long long now = 1000) {
  return "now " + std::to_string(now) + "\n" + HoldLine("id1", "barge-hold-host", "other123", "all", 1000) +
         HoldLine("id2", "barge-lease-other123.1000", "other123", "", 1000);
}

// This job took the whole host.
std::string TookTheHost(long long now = 1000) {
  return "now " + std::to_string(now) + "\ntook barge-hold-host\n" +
         HoldLine("id7", "barge-lease-abcd1234." + std::to_string(now), "abcd1234", "", now) +
         HoldLine("id8", "barge-hold-host", "abcd1234", "all", now);
}

int Count(const std::vector<std::string>& lines, const std::string& part) {
  return static_cast<int>(std::count_if(lines.begin(), lines.end(),
                                        [&](const std::string& l) { return l.find(part) != std::string::npos; }));
}

// The index of the first line containing `part`; lines.size() when none.
size_t First(const std::vector<std::string>& lines, const std::string& part) {
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find(part) != std::string::npos) return i;
  }
  return lines.size();
}

TEST(Holds, NoteHoldsCallsAFailedEngineAProblemButABusyHostNone) {
  HoldsWorld w;
  ASSERT_TRUE(w.world.Connect());
  internal::HostState& h1 = w.world.host_state(0);
  // The engine failed and said nothing more.
  EXPECT_EQ(w.holds.NoteHolds(h1, "now 1000\n", 1), "cannot reserve the host (a hold container on its engine): it failed");
  EXPECT_FALSE(h1.holds.holding);
  // Another job holds it: busy, which is SecureHolds' to decide.
  EXPECT_EQ(w.holds.NoteHolds(h1, OtherHoldsTheHost(), 0), "");
  EXPECT_FALSE(h1.holds.holding);
  ASSERT_TRUE(h1.holds.reply.has_value());
  EXPECT_EQ(h1.holds.reply->holds.size(), 2u);
  // Taken, with a stale hold of a gone job removed on the way.
  EXPECT_EQ(w.holds.NoteHolds(h1, "now 1000\nstale barge-hold-host (job dead1234)\ntook barge-hold-host\n", 0), "");
  EXPECT_TRUE(h1.holds.holding);
  EXPECT_TRUE(w.world.recorder().Said("barge: h1: removed a stale hold: barge-hold-host (job dead1234)"))
      << w.world.recorder().AllMessages();
}

TEST(Holds, ABusyHostFailsTheJobWithTheBusyTableAndTheHoldsItGotElsewhereAreReleased) {
  HoldsWorld w;
  ASSERT_TRUE(w.world.Connect());
  EXPECT_EQ(w.holds.NoteHolds(w.world.host_state(0), OtherHoldsTheHost(), 0), "");
  EXPECT_EQ(w.holds.NoteHolds(w.world.host_state(1), TookTheHost(), 0), "");
  ASSERT_TRUE(w.world.host_state(1).holds.holding);
  const Status s = w.holds.SecureHolds();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("1 host(s) are held by other jobs; nothing was started (--wait or `wait: 30m` waits for "
                             "them):"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("other123"), std::string::npos) << s.message();
  // What the job got on h2 goes; h1, where it holds nothing, is not asked.
  const std::string release = ReleaseHoldsCommand(*w.world.host_state(1).docker, "abcd1234");
  EXPECT_EQ(w.world.host("h2").lines(), std::vector<std::string>{release});
  EXPECT_TRUE(w.world.host("h1").lines().empty());
  EXPECT_FALSE(w.world.host_state(1).holds.holding);
  EXPECT_FALSE(w.world.recorder().Said("waiting for")) << w.world.recorder().AllMessages();
}

TEST(Holds, AWaitingJobTakesItsPlaceInLineOnEveryHostThenStartsOnceEveryHostIsFree) {
  HoldsWorld w("wait: 1m\n");
  ASSERT_TRUE(w.world.Connect());
  w.holds.NoteHolds(w.world.host_state(0), OtherHoldsTheHost(1000), 0);
  w.holds.NoteHolds(w.world.host_state(1), TookTheHost(1003), 0);
  // At the next try h1 is free.
  w.world.host("h1").Section("hold", TookTheHost(1005));
  w.world.host("h2").Section("hold", TookTheHost(1005));
  const Status s = w.holds.SecureHolds();
  ASSERT_TRUE(s.ok()) << s.message();
  const std::string ticket = "h_mk barge-ticket-abcd1234";
  for (const char* h : {"h1", "h2"}) {
    const std::vector<std::string>& lines = w.world.host(h).lines();
    const std::string remove = RemoveTicketCommand(DockerCommands({"docker"}), "abcd1234");
    // Its ticket (placed at the latest of its hosts' clocks), then a try,
    // then, holding every host, the ticket goes.
    EXPECT_EQ(Count(lines, ticket), 1) << h;
    EXPECT_NE(First(lines, "H_TS=1003;"), lines.size()) << h << ": its place is not h2's clock";
    const size_t placed = First(lines, ticket), tried = First(lines, "bs hold;"), removed = First(lines, remove);
    EXPECT_LT(placed, tried) << h;
    EXPECT_LT(tried, removed) << h;
    ASSERT_LT(removed, lines.size()) << h << ": its ticket was not removed";
  }
  EXPECT_FALSE(w.world.host_state(0).holds.in_line);
  EXPECT_FALSE(w.world.host_state(1).holds.in_line);
  EXPECT_TRUE(w.world.host_state(0).holds.holding);
  EXPECT_TRUE(w.world.recorder().Said("barge: waiting for h1 (held by other123 other bob@box)"))
      << w.world.recorder().AllMessages();
  EXPECT_TRUE(w.world.recorder().Said("barge: every host is free: starting")) << w.world.recorder().AllMessages();
  const auto& events = w.world.recorder().events;
  EXPECT_NE(std::find(events.begin(), events.end(), "waiting: for h1 (held by other123 other bob@box)"), events.end())
      << ::testing::PrintToString(events);
}

TEST(Holds, AWaitingJobGivesUpAtItsLimitAndReleasesWhatItHeld) {
  HoldsWorld w("wait: 5s\n");
  ASSERT_TRUE(w.world.Connect());
  w.holds.NoteHolds(w.world.host_state(0), OtherHoldsTheHost(), 0);
  w.holds.NoteHolds(w.world.host_state(1), TookTheHost(), 0);
  // h1 stays held at every try.
  w.world.host("h1").Section("hold", OtherHoldsTheHost(1002));
  w.world.host("h2").Section("hold", TookTheHost(1002));
  const auto began = w.world.loop().Now();
  const Status s = w.holds.SecureHolds();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message().rfind("gave up waiting after 5s: 1 host(s) are held by other jobs; nothing was started:\n", 0),
            0u)
      << s.message();
  EXPECT_GE(w.world.loop().Now() - began, seconds(5));
  const std::vector<std::string>& h2 = w.world.host("h2").lines();
  EXPECT_GE(Count(h2, "bs hold;"), 1) << "not tried again while it waited";
  ASSERT_FALSE(h2.empty());
  EXPECT_EQ(h2.back(), ReleaseHoldsCommand(*w.world.host_state(1).docker, "abcd1234"));
  EXPECT_FALSE(w.world.host_state(1).holds.holding);
  EXPECT_FALSE(w.world.host_state(1).holds.in_line);
}

TEST(Holds, TheGpusTheJobHoldsAreAdoptedSoThatThePlanGivesItsNodesThoseDevices) {
  HoldsWorld w("container: {gpus: 2}\n", "[{address: h1, gpus: 4}]");
  ASSERT_TRUE(w.world.Connect());
  internal::HostState& h1 = w.world.host_state(0);
  // Another job holds GPUs 0 and 2; the host script chose 1 and 3.
  w.holds.NoteHolds(h1,
                    "now 1000\ntook barge-hold-gpu-1\ntook barge-hold-gpu-3\n" +
                        HoldLine("id1", "barge-hold-gpu-0", "other123", "0", 1000) +
                        HoldLine("id2", "barge-hold-gpu-2", "other123", "2", 1000) +
                        HoldLine("id3", "barge-lease-other123.1000", "other123", "", 1000) +
                        HoldLine("id4", "barge-lease-abcd1234.1000", "abcd1234", "", 1000) +
                        HoldLine("id5", "barge-hold-gpu-1", "abcd1234", "1", 1000) +
                        HoldLine("id6", "barge-hold-gpu-3", "abcd1234", "3", 1000),
                    0);
  const Status s = w.holds.SecureHolds();
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(w.world.recorder().Said("barge: h1: holding GPU(s) 1,3")) << w.world.recorder().AllMessages();
  EXPECT_EQ(w.world.input().held_gpus.at(0), (std::set<int>{0, 2}));
  Result<cluster::Plan> plan = cluster::MakePlan(w.world.input());
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->nodes[0].gpu_devices, (std::vector<int>{1, 3}));
  EXPECT_TRUE(w.world.host("h1").lines().empty()) << "nothing was released";
}

TEST(Holds, AHostCheckedAgainWhileTheJobRunsIsReleasedWhenAnotherJobHoldsIt) {
  HoldsWorld w;
  ASSERT_TRUE(w.world.Connect());
  internal::HostState& h2 = w.world.host_state(1);
  // The job's hold was made, but another job's live hold stands beside it.
  w.holds.NoteHolds(h2,
                    "now 1000\ntook barge-hold-host\n" + HoldLine("id8", "barge-hold-host", "abcd1234", "all", 1000) +
                        HoldLine("id1", "barge-hold-host", "other123", "all", 999) +
                        HoldLine("id2", "barge-lease-other123.1000", "other123", "", 1000),
                    0);
  ASSERT_TRUE(h2.holds.holding);
  const Status s = w.holds.SecureHoldsOn(h2);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message().rfind("it is held by another job:\n", 0), 0u) << s.message();
  EXPECT_NE(s.message().find("other123"), std::string::npos) << s.message();
  EXPECT_EQ(w.world.host("h2").lines(), std::vector<std::string>{ReleaseHoldsCommand(*h2.docker, "abcd1234")});
  EXPECT_TRUE(w.world.host("h1").lines().empty());
  EXPECT_FALSE(h2.holds.holding);
  // A host of the job's alone is its own.
  internal::HostState& h1 = w.world.host_state(0);
  w.holds.NoteHolds(h1, TookTheHost(), 0);
  EXPECT_TRUE(w.holds.SecureHoldsOn(h1).ok());
  EXPECT_TRUE(w.world.host("h1").lines().empty());
}

TEST(Holds, ReleasingReachesAHostASpareReplacedButLeavesALostHostToItsWatchdog) {
  HoldsWorld w("", "[h1, h2, h3]");
  ASSERT_TRUE(w.world.Connect());
  for (size_t i = 0; i < 3; ++i) w.holds.NoteHolds(w.world.host_state(i), TookTheHost(), 0);
  w.world.host_state(0).lost = true;
  w.world.host_state(2).holds.holding = false;  // released already
  // A spare took h2's place: h2 is retired, still reachable.
  auto& hosts = w.world.hosts();
  hosts.retired.push_back(std::move(hosts.by_index.at(1)));
  hosts.by_index.erase(1);
  w.holds.ReleaseHolds();
  EXPECT_EQ(w.world.host("h2").lines(),
            std::vector<std::string>{ReleaseHoldsCommand(*hosts.retired[0]->docker, "abcd1234")});
  EXPECT_FALSE(hosts.retired[0]->holds.holding);
  EXPECT_TRUE(w.world.host("h1").lines().empty()) << "a lost host was asked";
  EXPECT_TRUE(w.world.host("h3").lines().empty()) << "a host holding nothing was asked";
  EXPECT_TRUE(w.world.host_state(0).holds.holding);
}

TEST(Holds, APutBackNamesAnotherJobsHoldTakenMeanwhileButNotAWaitersTicket) {
  HoldsWorld w;
  ASSERT_TRUE(w.world.Connect());
  internal::HostState& h1 = w.world.host_state(0);
  w.holds.NoteHolds(h1, TookTheHost(), 0);
  const std::string answer = "now 1010\ntook barge-lease-abcd1234.1010\n" +
                             HoldLine("id9", "barge-lease-abcd1234.1010", "abcd1234", "", 1010) +
                             HoldLine("id1", "barge-hold-host", "other123", "all", 1005) +
                             HoldLine("id2", "barge-lease-other123.1005", "other123", "", 1005) +
                             HoldLine("id3", "barge-ticket-wait5678", "wait5678", "", 1004) +
                             HoldLine("id4", "barge-lease-wait5678.1009", "wait5678", "", 1009);
  // The put back asks again for what the job held: its lease is made anew.
  const std::string line = w.holds.PutBackLine(h1);
  EXPECT_NE(line.find("h_mk \"barge-lease-$H_J.$H_now\""), std::string::npos) << line;
  std::vector<Hold> taken = w.holds.NotePutBack(h1, answer);
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0].name, "barge-hold-host");
  EXPECT_EQ(taken[0].job_id, "other123");
  EXPECT_EQ(LeaseIdOf(h1.holds.reply->holds, "abcd1234"), "id9");
  // A waiting job's put back takes nothing from anyone.
  h1.holds.in_line = true;
  EXPECT_TRUE(w.holds.NotePutBack(h1, answer).empty());
}

}  // namespace holds_test
}  // namespace barge::runner
