#include "runner/fleet/reservation.h"

#include <gtest/gtest.h>

namespace barge::runner::fleet {
namespace {

Hold MakeHold(std::string name, std::string job, long long since, long long lease) {
  Hold h;
  h.id = "id-" + name + "-" + job;
  h.name = std::move(name);
  h.job_id = std::move(job);
  h.job_name = "train";
  h.user = "alice";
  h.machine = "box";
  h.since = since;
  h.expires = since + lease;
  h.lease = lease;
  return h;
}

TEST(HoldRequest, AJobWithoutGpuCountsHoldsTheWholeHost) {
  EXPECT_TRUE(RequestFor({{std::nullopt, false}}, 8, {}).exclusive);
  EXPECT_TRUE(RequestFor({{"all", false}}, 8, {}).exclusive);
  // One node with a count and one without: still the whole host.
  EXPECT_TRUE(RequestFor({{"2", false}, {std::nullopt, false}}, 8, {}).exclusive);
  // A count but no known GPU total: the whole host.
  EXPECT_TRUE(RequestFor({{"2", false}}, std::nullopt, {}).exclusive);
}

TEST(HoldRequest, EveryNodeAskingForACountSharesTheHostForTheSumOfTheCounts) {
  HoldRequest r = RequestFor({{"2", true}, {"3", false}}, 8, {29500, 29500});
  EXPECT_FALSE(r.exclusive);
  EXPECT_EQ(r.gpu_count, 5);
  EXPECT_EQ(r.gpu_total, 8);
  EXPECT_EQ(r.ports, std::vector<int>{29500});
}

TEST(HoldRequest, ADeviceListHoldsExactlyThoseDevices) {
  HoldRequest r = RequestFor({{"\"device=0,3\""}, {"device=5"}}, 8, {});
  EXPECT_FALSE(r.exclusive);
  EXPECT_EQ(r.gpu_count, 0);
  EXPECT_EQ(r.gpu_devices, (std::vector<int>{0, 3, 5}));
  EXPECT_TRUE(RequestFor({{"\"device=GPU-abc\""}}, 8, {}).exclusive);
}

TEST(ChooseGpus, TakesTheLowestFreeIndices) {
  EXPECT_EQ(ChooseGpus(8, {0, 1, 3}, 2), (std::vector<int>{2, 4}));
  EXPECT_EQ(ChooseGpus(4, {0, 1, 2}, 2), (std::vector<int>{3}));  // fewer when fewer are free
  EXPECT_TRUE(ChooseGpus(0, {}, 1).empty());
}

TEST(StaleRule, AHoldIsStaleOnlyOnceItsRenewedLeasePlusTheGraceHasPassed) {
  Hold h = MakeHold(HostHoldName(), "j1", 1000, 600);
  h.lease_renewed = 5000;
  h.job_dir = true;
  EXPECT_EQ(StaleGrace(600), 60);
  EXPECT_EQ(StaleAt(h), 5000 + 600 + 60);
  EXPECT_FALSE(IsStale(h, 5660));
  EXPECT_TRUE(IsStale(h, 5661));
}

TEST(StaleRule, TheGraceIsTheLeaseWhenTheLeaseIsShorterThanAMinute) {
  Hold h = MakeHold(HostHoldName(), "j1", 1000, 5);
  h.lease_renewed = 1000;
  EXPECT_EQ(StaleAt(h), 1010);
}

TEST(StaleRule, AHoldWhoseJobDirectoryExistsButCannotBeReadIsNeverStale) {
  Hold h = MakeHold(HostHoldName(), "j1", 1000, 5);
  h.job_dir = true;
  EXPECT_FALSE(StaleAt(h).has_value());
  EXPECT_FALSE(IsStale(h, 1000000));
}

TEST(StaleRule, AHoldWithoutItsJobDirectoryExpiresAtItsLabelPlusTheGrace) {
  Hold h = MakeHold(HostHoldName(), "j1", 1000, 600);
  EXPECT_EQ(StaleAt(h), 1000 + 600 + 60);
  EXPECT_TRUE(IsStale(h, 1661));
  // Not barge's (no job, no lease): never stale, never removed.
  Hold foreign;
  foreign.name = HostHoldName();
  EXPECT_FALSE(IsStale(foreign, 1000000));
}

TEST(HoldReply, ParsesTheHostsLinesAndKeepsAnythingElseAsErrors) {
  const std::string text =
      "now 2000\n"
      "stale barge-hold-host (job 0ld0ld00 old)\n"
      "took barge-hold-gpu-2\n"
      "hold\tabc\tbarge-hold-gpu-2\tj2\ttrain\tbob\tbox2\t2\t1990\t2590\t600\t1995\t1\n"
      "hold\tdef\tbarge-hold-gpu-0\tj1\teval\talice\tbox\t0\t1900\t2500\t600\t\t0\n"
      "error: barge-hold-gpu-3: no space left\n";
  HoldReply r = ParseHoldReply(text);
  EXPECT_EQ(r.now, 2000);
  EXPECT_EQ(r.taken, std::vector<std::string>{"barge-hold-gpu-2"});
  EXPECT_EQ(r.removed_stale, std::vector<std::string>{"barge-hold-host (job 0ld0ld00 old)"});
  ASSERT_EQ(r.holds.size(), 2u);
  EXPECT_EQ(r.holds[0].job_id, "j2");
  EXPECT_EQ(r.holds[0].user, "bob");
  EXPECT_EQ(r.holds[0].lease_renewed, 1995);
  EXPECT_TRUE(r.holds[0].job_dir);
  EXPECT_EQ(r.holds[1].since, 1900);
  EXPECT_FALSE(r.holds[1].lease_renewed.has_value());
  EXPECT_FALSE(r.holds[1].job_dir);
  EXPECT_EQ(r.errors, "error: barge-hold-gpu-3: no space left");
  EXPECT_EQ(HeldGpus(r, "j2"), std::vector<int>{2});
}

TEST(Conflicts, AnExclusiveJobConflictsWithAnyOtherJobsHoldButNotWithAStaleOne) {
  HoldReply r;
  r.now = 10000;
  r.taken = {HostHoldName()};
  r.holds = {MakeHold(HostHoldName(), "me", 9990, 600), MakeHold(GpuHoldName(0), "other", 9000, 600)};
  r.holds[1].job_dir = true;
  r.holds[1].lease_renewed = 9995;
  HoldRequest exclusive;
  ASSERT_EQ(Conflicts(exclusive, r, "me").size(), 1u);
  EXPECT_EQ(Conflicts(exclusive, r, "me")[0].job_id, "other");
  r.holds[1].lease_renewed = 1000;  // lapsed long ago
  EXPECT_TRUE(Conflicts(exclusive, r, "me").empty());
}

TEST(Conflicts, SharingJobsConflictOnlyWithAHostHoldTooFewGpusOrTheirPorts) {
  HoldRequest share = RequestFor({{"2", true}}, 8, {29500});
  HoldReply r;
  r.now = 100;
  r.holds = {MakeHold(GpuHoldName(0), "other", 90, 600), MakeHold(GpuHoldName(1), "other", 90, 600),
             MakeHold(GpuHoldName(2), "me", 95, 600), MakeHold(GpuHoldName(3), "me", 95, 600),
             MakeHold(PortHoldName(29501), "other", 90, 600)};
  for (Hold& h : r.holds) h.job_dir = true;
  EXPECT_TRUE(Conflicts(share, r, "me").empty());
  EXPECT_EQ(HeldGpus(r, "me"), (std::vector<int>{2, 3}));
  r.holds.push_back(MakeHold(PortHoldName(29500), "third", 90, 600));
  r.holds.back().job_dir = true;
  ASSERT_EQ(Conflicts(share, r, "me").size(), 1u);
  EXPECT_EQ(Conflicts(share, r, "me")[0].job_id, "third");
  r.holds.pop_back();
  r.holds.push_back(MakeHold(HostHoldName(), "excl", 99, 600));
  r.holds.back().job_dir = true;
  ASSERT_EQ(Conflicts(share, r, "me").size(), 1u);
  // Too few GPUs: the other jobs' GPU holds are what stands in the way.
  r.holds.pop_back();
  r.holds.erase(r.holds.begin() + 3);
  EXPECT_EQ(Conflicts(share, r, "me").size(), 2u);
}

TEST(HoldScript, QuotesTheOwnerAndTakesTheLowestFreeGpusInOrder) {
  DockerCommands docker({"sudo", "-n", "docker"});
  HoldOwner owner{"1a2b3c4d", "it's", "alice", "box", std::chrono::seconds(300)};
  const std::string s = TakeHoldsScript(docker, RequestFor({{"2"}}, 4, {}), owner, std::chrono::seconds(20));
  EXPECT_NE(s.find("'barge.hold.name=it'\\''s'"), std::string::npos) << s;
  EXPECT_NE(s.find("for h_i in 0 1 2 3;"), std::string::npos) << s;
  EXPECT_NE(s.find("h_dk() { $H_T sudo -n docker \"$@\"; }"), std::string::npos) << s;
  EXPECT_NE(s.find("barge.hold.lease=300"), std::string::npos) << s;
  const std::string excl = TakeHoldsScript(docker, HoldRequest{}, owner, std::chrono::seconds(20));
  EXPECT_NE(excl.find("h_mk barge-hold-host host all"), std::string::npos) << excl;
  EXPECT_EQ(excl.find("for h_i in"), std::string::npos);
}

TEST(BusyTable, NamesTheHolderWhenItStartedItsGpusAndWhenItGoesStale) {
  Hold h = MakeHold(HostHoldName(), "9f8e7d6c", 1000, 600);
  h.gpus = "all";
  h.job_dir = true;
  h.lease_renewed = 1100;
  const std::string t = BusyTable({{"10.77.0.1", 1130, {h}}});
  EXPECT_NE(t.find("HOST"), std::string::npos) << t;
  EXPECT_NE(t.find("HELD BY (job id, name, user@machine)"), std::string::npos) << t;
  EXPECT_NE(t.find("10.77.0.1"), std::string::npos) << t;
  EXPECT_NE(t.find("9f8e7d6c train alice@box"), std::string::npos) << t;
  EXPECT_NE(t.find("00:16:40Z (2m10s ago)"), std::string::npos) << t;
  EXPECT_NE(t.find("all"), std::string::npos) << t;
  EXPECT_NE(t.find("in 10m30s unless renewed"), std::string::npos) << t;
  EXPECT_EQ(WaitingFor({{"h1", 1130, {h, h}}}), "h1 (held by 9f8e7d6c train alice@box)");
  // A job's GPU holds on a host are one row.
  Hold g3 = MakeHold(GpuHoldName(3), "5e5e5e5e", 1000, 600), g2 = MakeHold(GpuHoldName(2), "5e5e5e5e", 1000, 600);
  g3.gpus = "3";
  g2.gpus = "2";
  const std::string shared = BusyTable({{"h2", 1130, {g3, g2}}});
  EXPECT_NE(shared.find(" 2,3 "), std::string::npos) << shared;
  EXPECT_EQ(shared.find("5e5e5e5e"), shared.rfind("5e5e5e5e")) << shared;
}

TEST(ShortDuration, ReadsAsSecondsMinutesOrHours) {
  EXPECT_EQ(ShortDuration(45), "45s");
  EXPECT_EQ(ShortDuration(185), "3m05s");
  EXPECT_EQ(ShortDuration(7800), "2h10m");
  EXPECT_EQ(ShortDuration(-3), "0s");
}

}  // namespace
}  // namespace barge::runner::fleet
