// Tests of the pure parts of taking holds through the Engine API; the
// taking itself runs on the bed's engines (reservation_bed_test.cc).
#include "runner/remote/holds_api.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace barge::runner {
namespace {

HoldOwner Owner() {
  HoldOwner o;
  o.job_id = "1a2b3c4d";
  o.job_name = "train";
  o.user = "alice";
  o.machine = "box";
  o.lease = std::chrono::seconds(600);
  return o;
}

TEST(HoldCreateBody, CarriesTheScriptsLabelsWithKindAndGpusFromTheName) {
  const nlohmann::json host = nlohmann::json::parse(HoldCreateBody(Owner(), HostHoldName(), 1000));
  EXPECT_EQ(host["Image"], "barge/hold:1");
  EXPECT_EQ(host["Cmd"], nlohmann::json({"hold"}));
  EXPECT_EQ(host["HostConfig"]["NetworkMode"], "none");
  const nlohmann::json& l = host["Labels"];
  EXPECT_EQ(l["barge.job"], "1a2b3c4d");
  EXPECT_EQ(l["barge.hold"], "host");
  EXPECT_EQ(l["barge.hold.gpus"], "all");
  EXPECT_EQ(l["barge.hold.name"], "train");
  EXPECT_EQ(l["barge.hold.user"], "alice");
  EXPECT_EQ(l["barge.hold.machine"], "box");
  EXPECT_EQ(l["barge.hold.since"], "1000");
  EXPECT_EQ(l["barge.hold.expires"], "1600");
  EXPECT_EQ(l["barge.hold.lease"], "600");
  EXPECT_EQ(l["barge.hold.v"], "2");

  const nlohmann::json gpu = nlohmann::json::parse(HoldCreateBody(Owner(), GpuHoldName(7), 5));
  EXPECT_EQ(gpu["Labels"]["barge.hold"], "gpu");
  EXPECT_EQ(gpu["Labels"]["barge.hold.gpus"], "7");
  const nlohmann::json port = nlohmann::json::parse(HoldCreateBody(Owner(), PortHoldName(29500), 5));
  EXPECT_EQ(port["Labels"]["barge.hold"], "port");
  EXPECT_EQ(port["Labels"]["barge.hold.gpus"], "");
  const nlohmann::json lease = nlohmann::json::parse(HoldCreateBody(Owner(), LeaseName("1a2b3c4d", 5), 5));
  EXPECT_EQ(lease["Labels"]["barge.hold"], "lease");
  EXPECT_EQ(lease["Labels"]["barge.hold.gpus"], "");
}

TEST(HoldsOf, ReadsTheLabelsAndEachJobsNewestLeaseOnTheEngine) {
  container::PsEntry mine;
  mine.id = "aaa";
  mine.names = "barge-hold-port-29500";
  mine.labels = {{"barge.job", "1a2b3c4d"}, {"barge.hold", "port"}, {"barge.hold.lease", "600"},
                 {"barge.hold.since", "10"}, {"barge.hold.expires", "610"}, {"barge.hold.v", "2"}};
  container::PsEntry my_lease = mine;
  my_lease.id = "aab";
  my_lease.names = "barge-lease-1a2b3c4d.42";
  my_lease.labels["barge.hold"] = "lease";
  container::PsEntry other;
  other.id = "bbb";
  other.names = "barge-hold-host";
  other.labels = {{"barge.job", "ffff0000"}, {"barge.hold", "host"}, {"barge.hold.name", "eval"},
                  {"barge.hold.user", "bob"},  {"barge.hold.machine", "m2"}, {"barge.hold.gpus", "all"},
                  {"barge.hold.since", "20"},  {"barge.hold.expires", "80"}, {"barge.hold.lease", "60"}};
  const std::vector<Hold> holds = HoldsOf({mine, my_lease, other});
  ASSERT_EQ(holds.size(), 3u);
  EXPECT_EQ(holds[0].lease, 600);
  EXPECT_EQ(holds[0].format, 2);
  EXPECT_EQ(holds[0].lease_renewed, 42);
  EXPECT_TRUE(IsLease(holds[1]));
  EXPECT_EQ(LeaseIdOf(holds, "1a2b3c4d"), "aab");
  EXPECT_FALSE(holds[2].lease_renewed);
  EXPECT_EQ(holds[2].format, 1);  // an older barge's: no barge.hold.v
  EXPECT_EQ(holds[2].name, "barge-hold-host");
  EXPECT_EQ(holds[2].job_name, "eval");
  EXPECT_EQ(holds[2].user, "bob");
  EXPECT_EQ(holds[2].machine, "m2");
  EXPECT_EQ(holds[2].gpus, "all");
  EXPECT_EQ(holds[2].since, 20);
  EXPECT_EQ(holds[2].expires, 80);
  EXPECT_EQ(holds[2].lease, 60);
}

TEST(IsHoldOrRecordEntry, TakesWhatCarriesAHoldsOrAnEntrysLabelNotWhatIsOnlyNamedLikeOne) {
  container::PsEntry hold;
  hold.names = "barge-hold-host";
  hold.labels = {{"barge.hold", "host"}};
  container::PsEntry entry;
  entry.names = "barge-fault-1990-j9-0-0";
  entry.labels = {{"barge.fault", "engine"}};
  container::PsEntry named;
  named.names = "barge-hold-gpu-7";
  named.labels = {{"owner", "someone"}};
  EXPECT_TRUE(IsHoldOrRecordEntry(hold));
  EXPECT_TRUE(IsHoldOrRecordEntry(entry));
  EXPECT_FALSE(IsHoldOrRecordEntry(named));
}

TEST(ParseHttpDate, ReadsAnImfFixdateAsUtcAndRefusesAnythingElse) {
  EXPECT_EQ(ParseHttpDate("Sun, 06 Nov 1994 08:49:37 GMT"), 784111777);
  EXPECT_EQ(ParseHttpDate("Wed, 25 Nov 2026 04:23:13 GMT"), 1795580593);
  EXPECT_FALSE(ParseHttpDate("Sun, 06 Nov 1994 08:49:37 CET"));
  EXPECT_FALSE(ParseHttpDate("Sunday, 06-Nov-94 08:49:37 GMT"));
  EXPECT_FALSE(ParseHttpDate("Sun, 06 Foo 1994 08:49:37 GMT"));
  EXPECT_FALSE(ParseHttpDate(""));
}

}  // namespace
}  // namespace barge::runner
