// Leases on its own (leases.h): given the job's context, its hosts, the plan
// and the Holds part it puts a lost lease back with, on scripted fake hosts
// (tests/support/part_world.h) on a virtual loop: the renewals' period is
// the loop's time, not the test's.
#include "runner/controller/leases.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "runner/controller/holds.h"
#include "runner/controller/job_state.h"
#include "runner/remote/reservation.h"
#include "runner/remote/watchdog.h"
#include "tests/support/part_world.h"

namespace barge::runner {
namespace leases_test {

using std::chrono::milliseconds;
using std::chrono::seconds;

struct LeasesWorld {
  explicit LeasesWorld(const std::string& extra = "", const std::string& hosts = "[h1, h2]")
      : world(PartWorld::Yaml(extra, hosts)),
        holds(&world.ctx(), &world.hosts(), &world.planner()),
        leases(&world.ctx(), &world.hosts(), &world.plan(), &holds) {}
  // Lets `d` of the loop's virtual time pass.
  void Pass(milliseconds d) { world.RunUntil([] { return false; }, d); }
  // h1 as preflight leaves it (after Connect): holding the whole host, its
  // lease on the engine renamed by ID id1, its watchdog armed.
  internal::HostState& HoldingH1();
  PartWorld world;
  internal::Holds holds;
  internal::Leases leases;
};

std::string HoldLine(const std::string& id, const std::string& name, const std::string& job,
                     const std::string& gpus, long long since, long long lease) {
  const std::string who = job == "abcd1234" ? "fake\tme\tbox" : "other\tbob\tbox";
  return "hold\t" + id + "\t" + name + "\t" + job + "\t" + who + "\t" + gpus + "\t" + std::to_string(since) + "\t" +
         std::to_string(since + lease) + "\t" + std::to_string(lease) + "\t2\n";
}

// Preflight made the job's lease on the engine (renewed by renaming id1)
// and its host hold.
std::string TookTheHostWithLeaseId1() {
  return "now 1000\ntook barge-hold-host\n" + HoldLine("id1", "barge-lease-abcd1234.1000", "abcd1234", "", 1000, 8) +
         HoldLine("id2", "barge-hold-host", "abcd1234", "all", 1000, 8);
}

internal::HostState& LeasesWorld::HoldingH1() {
  internal::HostState& h1 = world.host_state(0);
  holds.NoteHolds(h1, TookTheHostWithLeaseId1(), 0);
  h1.lease.armed = true;
  return h1;
}

int Count(const std::vector<std::string>& lines, const std::string& part) {
  return static_cast<int>(std::count_if(lines.begin(), lines.end(),
                                        [&](const std::string& l) { return l.find(part) != std::string::npos; }));
}

// What the put back's shell (Holds::PutBackLine) has and nothing else does.
const char kPutBack[] = "h_mk \"barge-lease-$H_J.$H_now\"";
const char kNoLease[] = "Error response from daemon: No such container: id1\n";

TEST(Leases, TheWatchdogsDeadlineIsWhatIsLeftOfTheJobsTimeoutPlusTheGraceAndTheHeadsHostNamesItsContainer) {
  LeasesWorld w("lease: 8s\ntimeout: 1m\n");
  ASSERT_TRUE(w.world.Connect());
  w.Pass(seconds(20));  // a host armed 20 s into the job (a spare, a reconnect)
  const WatchdogParams p = w.leases.WatchdogFor(w.world.host_state(0));
  EXPECT_EQ(p.job_id, "abcd1234");
  EXPECT_EQ(p.dir, w.world.host_state(0).job_dir);
  EXPECT_EQ(p.lease, seconds(8));
  EXPECT_EQ(p.grace, seconds(6));  // three renewals of a quarter lease
  EXPECT_EQ(p.deadline_after, seconds(60 + 6 - 20));
  EXPECT_EQ(p.head_container, w.world.plan().nodes[0].container.name);
  EXPECT_TRUE(w.leases.WatchdogFor(w.world.host_state(1)).head_container.empty());
  // Past the deadline: at least 1 s, never none.
  w.Pass(seconds(60));
  EXPECT_EQ(w.leases.WatchdogFor(w.world.host_state(1)).deadline_after, seconds(1));
}

TEST(Leases, ArmedHostsRenewTheLeaseFileAndTheEngineLeaseEveryQuarterLease) {
  LeasesWorld w("lease: 8s\n");
  ASSERT_TRUE(w.world.Connect());
  internal::HostState& h1 = w.HoldingH1();  // h2's watchdog is not armed
  w.leases.RenewLeases();
  w.leases.RenewLeases();  // renewing already: no second chain
  w.Pass(milliseconds(9000));
  const std::string renewal = RenewLeaseCommand(h1.job_dir) + " && " +
                              RenewEngineLeaseCommand(*h1.docker, "abcd1234", "id1", seconds(1));
  // At 2, 4, 6 and 8 s.
  EXPECT_EQ(w.world.host("h1").lines(), std::vector<std::string>(4, renewal));
  EXPECT_TRUE(w.world.host("h2").lines().empty());
  // A lost host is not asked.
  h1.lost = true;
  w.Pass(seconds(4));
  EXPECT_EQ(w.world.host("h1").lines().size(), 4u);
}

TEST(Leases, ALeaseTheEngineLostIsPutBackOnceAndAJobThatTookTheHostMeanwhileIsNamed) {
  LeasesWorld w("lease: 8s\n", "[h1]");
  ASSERT_TRUE(w.world.Connect());
  internal::HostState& h1 = w.HoldingH1();
  // `docker container prune`: the rename finds no lease; the put back
  // makes a new one (id3), but another job took the host in between.
  w.world.host("h1").On("rename id1", FakeReply{1, "", kNoLease});
  w.world.host("h1").On(kPutBack, FakeReply{0, "now 1002\ntook barge-lease-abcd1234.1002\n" +
                                                   HoldLine("id3", "barge-lease-abcd1234.1002", "abcd1234", "", 1002, 8) +
                                                   HoldLine("id4", "barge-hold-host", "other123", "all", 1001, 600) +
                                                   HoldLine("id5", "barge-lease-other123.1001", "other123", "", 1001, 600)});
  w.leases.RenewLeases();
  w.Pass(milliseconds(6500));  // renewals at 2, 4 and 6 s
  const std::vector<std::string>& lines = w.world.host("h1").lines();
  EXPECT_EQ(Count(lines, "rename id1"), 1);
  EXPECT_EQ(Count(lines, kPutBack), 1);
  EXPECT_EQ(Count(lines, "rename id3"), 2) << "the next renewals do not rename the new lease";
  EXPECT_FALSE(h1.lease.putting_back);
  EXPECT_TRUE(w.world.recorder().Said(
      "barge: h1: the job's lease and holds were removed from the engine (docker container prune?); put back"))
      << w.world.recorder().AllMessages();
  EXPECT_TRUE(w.world.recorder().Said("barge: h1: another job (other123 other bob@box) took this host's whole host "
                                      "while the lease was gone; this job keeps running beside it"))
      << w.world.recorder().AllMessages();
  EXPECT_EQ(w.world.recorder().events,
            (std::vector<std::string>{
                "lease_put_back h1: the job's lease and holds were removed from the engine (docker container prune?); "
                "put back",
                "lease_put_back h1: another job (other123 other bob@box) took this host's whole host while the lease "
                "was gone; this job keeps running beside it"}));
}

// All or nothing: a job that fails preflight (another host busy, a host's
// engine too slow) lets its holds and leases go everywhere, while the
// renewals run until the watchdogs are disarmed. A renewal after that
// release found the lease gone and put the lease and holds back, which
// then stayed after the job (seen at 1,000 emulated hosts, where preflight
// outlasts a renewal period).
TEST(Leases, AHostWhoseHoldsWereLetGoIsNeitherRenamedNorPutBack) {
  LeasesWorld w("lease: 8s\n", "[h1]");
  ASSERT_TRUE(w.world.Connect());
  internal::HostState& h1 = w.HoldingH1();
  w.world.host("h1").On("rename id1", FakeReply{1, "", kNoLease});  // gone with the holds
  w.leases.RenewLeases();
  w.holds.ReleaseHolds();
  w.Pass(milliseconds(6500));  // renewal times 2, 4 and 6 s
  const std::vector<std::string>& lines = w.world.host("h1").lines();
  EXPECT_EQ(Count(lines, ReleaseHoldsCommand(*h1.docker, "abcd1234")), 1);
  EXPECT_EQ(Count(lines, "rename id1"), 0);
  EXPECT_EQ(Count(lines, kPutBack), 0);
  EXPECT_TRUE(w.world.recorder().events.empty()) << ::testing::PrintToString(w.world.recorder().events);
}

// A put back that was running when the job let its holds go: what it put
// back is released when it ends.
TEST(Leases, APutBackRunningWhenTheHoldsAreLetGoIsUndoneWhenItEnds) {
  LeasesWorld w("lease: 8s\n", "[h1]");
  ASSERT_TRUE(w.world.Connect());
  internal::HostState& h1 = w.HoldingH1();
  w.world.host("h1").On("rename id1", FakeReply{1, "", kNoLease});
  w.world.host("h1").On(kPutBack, FakeReply{0, "now 1002\ntook barge-lease-abcd1234.1002\n" +
                                                   HoldLine("id3", "barge-lease-abcd1234.1002", "abcd1234", "", 1002, 8) +
                                                   HoldLine("id4", "barge-hold-host", "abcd1234", "all", 1002, 8),
                                               "", milliseconds(3000)});
  w.leases.RenewLeases();
  w.Pass(milliseconds(2500));  // the renewal at 2 s: its rename finds no lease, the put back runs
  ASSERT_TRUE(h1.lease.putting_back);
  w.holds.ReleaseHolds();
  w.Pass(milliseconds(4000));
  const std::vector<std::string>& lines = w.world.host("h1").lines();
  EXPECT_EQ(Count(lines, kPutBack), 1);
  EXPECT_EQ(Count(lines, ReleaseHoldsCommand(*h1.docker, "abcd1234")), 2) << "what the put back made stayed";
  EXPECT_EQ(Count(lines, "rename id3"), 0);
  EXPECT_FALSE(w.world.recorder().Said("put back")) << w.world.recorder().AllMessages();
}

TEST(Leases, APutBackThatFailsIsTriedAgainAtEachRenewalAndSaidOnceWithTheEnginesWords) {
  LeasesWorld w("lease: 8s\n", "[h1]");
  ASSERT_TRUE(w.world.Connect());
  internal::HostState& h1 = w.HoldingH1();
  // A flaky engine: every rename finds no lease, and every put back makes
  // one (listed) but then fails.
  w.world.host("h1").On("rename id", FakeReply{1, "", kNoLease});
  w.world.host("h1").On(kPutBack, FakeReply{1, "now 1002\ntook barge-lease-abcd1234.1002\n" +
                                                   HoldLine("id3", "barge-lease-abcd1234.1002", "abcd1234", "", 1002, 8) +
                                                   "error: Cannot connect to the Docker daemon\n"});
  w.leases.RenewLeases();
  w.Pass(milliseconds(9000));  // renewals at 2, 4, 6 and 8 s
  const std::vector<std::string>& lines = w.world.host("h1").lines();
  EXPECT_EQ(Count(lines, kPutBack), 4) << "not tried again at each renewal";
  EXPECT_EQ(Count(lines, "rename id3"), 3);
  const std::string warning =
      "barge: warning: h1: the job's lease was removed from the engine and putting it back failed: error: Cannot "
      "connect to the Docker daemon";
  const auto& messages = w.world.recorder().messages;
  EXPECT_EQ(std::count(messages.begin(), messages.end(), warning), 1) << w.world.recorder().AllMessages();
  EXPECT_TRUE(h1.lease.loss_said);
  EXPECT_TRUE(w.world.recorder().events.empty()) << ::testing::PrintToString(w.world.recorder().events);
  // The watchdog's file is renewed all along.
  EXPECT_EQ(Count(lines, RenewLeaseCommand(h1.job_dir)), 4);
}

// A put back whose listing shows no lease (the engine did not answer)
// replaces the host's listing (Holds::NotePutBack) with one that names no
// lease: the next renewal has no lease ID to rename, and still puts it back
// again (HostLease::put_back_due). It failed before that flag: one put
// back, never another.
TEST(Leases, APutBackWhoseEngineDidNotAnswerIsTriedAgainAtTheNextRenewal) {
  LeasesWorld w("lease: 8s\n", "[h1]");
  ASSERT_TRUE(w.world.Connect());
  w.HoldingH1();
  w.world.host("h1").On("rename id1", FakeReply{1, "", kNoLease});
  w.world.host("h1").On(kPutBack, FakeReply{1, "now 1002\nerror: Cannot connect to the Docker daemon\n"});
  w.leases.RenewLeases();
  w.Pass(milliseconds(9000));
  EXPECT_GE(Count(w.world.host("h1").lines(), kPutBack), 2);
}

TEST(Leases, DisarmingReachesEveryArmedHostStillThereAndNoRenewalFollows) {
  LeasesWorld w("lease: 8s\n", "[h1, h2, h3, h4]");
  ASSERT_TRUE(w.world.Connect());
  for (size_t i = 0; i < 4; ++i) w.world.host_state(i).lease.armed = true;
  w.world.host_state(1).lost = true;
  w.world.host_state(2).lease.armed = false;
  w.world.host_state(3).job_dir.clear();  // `barge down` of a job whose controller is gone
  w.world.host("h4").On("for d in", FakeReply{1, "", "rm: cannot remove\n"});
  w.leases.RenewLeases();
  w.Pass(milliseconds(2500));
  ASSERT_EQ(w.world.host("h1").lines().size(), 1u);  // one renewal
  w.leases.DisarmWatchdogs();
  const std::vector<std::string>& h1 = w.world.host("h1").lines();
  ASSERT_EQ(h1.size(), 2u);
  EXPECT_EQ(h1.back(), DisarmWatchdogCommand(w.world.host_state(0).job_dir));
  ASSERT_FALSE(w.world.host("h4").lines().empty());
  EXPECT_EQ(w.world.host("h4").lines().back(), DisarmJobWatchdogsCommand("abcd1234"));
  EXPECT_TRUE(w.world.host("h2").lines().empty()) << "a lost host was asked";
  EXPECT_TRUE(w.world.host("h3").lines().empty()) << "a host never armed was asked";
  EXPECT_FALSE(w.world.host_state(0).lease.armed);
  EXPECT_FALSE(w.world.host_state(3).lease.armed);
  EXPECT_TRUE(w.world.recorder().Said("barge: h4: disarming the watchdog failed: ")) << w.world.recorder().AllMessages();
  EXPECT_FALSE(w.world.recorder().Said("h1: disarming")) << w.world.recorder().AllMessages();
  // No renewal after it.
  w.Pass(seconds(10));
  EXPECT_EQ(h1.size(), 2u);
}

TEST(Leases, ARenewalThatFindsTheLeaseGoneAfterDisarmingPutsNothingBack) {
  LeasesWorld w("lease: 8s\n", "[h1]");
  ASSERT_TRUE(w.world.Connect());
  w.HoldingH1();
  // The renewal at 2 s answers at 5 s: the job's end removed the lease.
  w.world.host("h1").On("rename id1", FakeReply{1, "", kNoLease, milliseconds(3000)});
  w.leases.RenewLeases();
  w.Pass(milliseconds(2500));
  ASSERT_EQ(Count(w.world.host("h1").lines(), "rename id1"), 1);
  w.leases.DisarmWatchdogs();
  w.Pass(seconds(5));
  EXPECT_EQ(Count(w.world.host("h1").lines(), kPutBack), 0) << "a lease was made again after the job's end";
  EXPECT_FALSE(w.world.recorder().Said("put back")) << w.world.recorder().AllMessages();
}

// The same race with the teardown's removal (which removes the lease and
// holds, and runs before the disarming): a renewal in flight when it began
// puts nothing back (seen on 100 emulated hosts: 4 leases made again after
// the job), and no renewal starts on that host after it.
TEST(Leases, ARenewalThatFindsTheLeaseGoneOnceTheHostsRemovalBeganPutsNothingBack) {
  LeasesWorld w("lease: 8s\n", "[h1]");
  ASSERT_TRUE(w.world.Connect());
  internal::HostState& h1 = w.HoldingH1();
  w.world.host("h1").On("rename id1", FakeReply{1, "", kNoLease, milliseconds(3000)});
  w.leases.RenewLeases();
  w.Pass(milliseconds(2500));
  ASSERT_EQ(Count(w.world.host("h1").lines(), "rename id1"), 1);
  h1.lease.releasing = true;  // Teardown::StartRemoval, with the release
  w.Pass(seconds(5));
  EXPECT_EQ(Count(w.world.host("h1").lines(), kPutBack), 0) << "a lease was made again after the removal";
  EXPECT_EQ(Count(w.world.host("h1").lines(), "rename id1"), 1) << "a renewal after the removal began";
  EXPECT_FALSE(w.world.recorder().Said("put back")) << w.world.recorder().AllMessages();
}

}  // namespace leases_test
}  // namespace barge::runner
