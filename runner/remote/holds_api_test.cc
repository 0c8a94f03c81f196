// Tests of the pure parts of taking holds through the Engine API; the
// taking itself runs on the bed's engines (reservation_bed_test.cc).
#include "runner/remote/holds_api.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utime.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "ssh/quote.h"

namespace barge::runner::fleet {
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

  const nlohmann::json gpu = nlohmann::json::parse(HoldCreateBody(Owner(), GpuHoldName(7), 5));
  EXPECT_EQ(gpu["Labels"]["barge.hold"], "gpu");
  EXPECT_EQ(gpu["Labels"]["barge.hold.gpus"], "7");
  const nlohmann::json port = nlohmann::json::parse(HoldCreateBody(Owner(), PortHoldName(29500), 5));
  EXPECT_EQ(port["Labels"]["barge.hold"], "port");
  EXPECT_EQ(port["Labels"]["barge.hold.gpus"], "");
}

TEST(HoldsOf, ReadsTheLabelsAndMarksOnlyTheJobsOwnDirectoryAsThere) {
  container::PsEntry mine;
  mine.id = "aaa";
  mine.names = "barge-hold-port-29500";
  mine.labels = {{"barge.job", "1a2b3c4d"}, {"barge.hold", "port"}, {"barge.hold.lease", "600"},
                 {"barge.hold.since", "10"}, {"barge.hold.expires", "610"}};
  container::PsEntry other;
  other.id = "bbb";
  other.names = "barge-hold-host";
  other.labels = {{"barge.job", "ffff0000"}, {"barge.hold", "host"}, {"barge.hold.name", "eval"},
                  {"barge.hold.user", "bob"},  {"barge.hold.machine", "m2"}, {"barge.hold.gpus", "all"},
                  {"barge.hold.since", "20"},  {"barge.hold.expires", "80"}, {"barge.hold.lease", "60"}};
  const std::vector<Hold> holds = HoldsOf({mine, other}, "1a2b3c4d");
  ASSERT_EQ(holds.size(), 2u);
  EXPECT_TRUE(holds[0].job_dir);
  EXPECT_EQ(holds[0].lease, 600);
  EXPECT_FALSE(holds[1].job_dir);
  EXPECT_FALSE(holds[1].lease_renewed);
  EXPECT_EQ(holds[1].name, "barge-hold-host");
  EXPECT_EQ(holds[1].job_name, "eval");
  EXPECT_EQ(holds[1].user, "bob");
  EXPECT_EQ(holds[1].machine, "m2");
  EXPECT_EQ(holds[1].gpus, "all");
  EXPECT_EQ(holds[1].since, 20);
  EXPECT_EQ(holds[1].expires, 80);
  EXPECT_EQ(holds[1].lease, 60);
  EXPECT_EQ(OtherJobs(holds, "1a2b3c4d"), std::vector<std::string>{"ffff0000"});
}

TEST(HoldFactsCommand, ReportsADirectorysLeaseMtimeAndAMissingDirectoryUnderSh) {
  std::mt19937 random(std::random_device{}());
  const std::string there = "facts" + std::to_string(random() % 1000000);
  const std::string gone = there + "x";
  const std::string noleas = there + "y";
  const std::filesystem::path dir = "/tmp/barge-" + there;
  const std::filesystem::path dir2 = "/tmp/barge-" + noleas;
  std::filesystem::create_directories(dir);
  std::filesystem::create_directories(dir2);
  { std::ofstream(dir / "lease") << ""; }
  utimbuf times{1234567, 1234567};
  ASSERT_EQ(utime((dir / "lease").c_str(), &times), 0);

  FILE* p = popen(("sh -c " + ssh::ShellQuote(HoldFactsCommand({there, gone, noleas}))).c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[256];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  EXPECT_EQ(pclose(p), 0);
  std::filesystem::remove_all(dir);
  std::filesystem::remove_all(dir2);

  std::vector<Hold> holds(4);
  holds[0].job_id = there;
  holds[1].job_id = gone;
  holds[1].job_dir = true;  // overwritten: the host says it is gone
  holds[2].job_id = noleas;
  holds[3].job_id = "unasked";
  holds[3].lease_renewed = 5;
  ApplyHoldFacts(out, &holds);
  EXPECT_TRUE(holds[0].job_dir) << out;
  EXPECT_EQ(holds[0].lease_renewed, 1234567) << out;
  EXPECT_FALSE(holds[1].job_dir) << out;
  EXPECT_FALSE(holds[1].lease_renewed);
  EXPECT_TRUE(holds[2].job_dir) << out;
  EXPECT_FALSE(holds[2].lease_renewed) << out;  // unreadable lease: never stale (IsStale)
  EXPECT_EQ(holds[3].lease_renewed, 5);         // not named: left as it was
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
}  // namespace barge::runner::fleet
