// runner/cli/usage_cli.h: `barge usage` over a real store.
#include "runner/cli/usage_cli.h"

#include <gtest/gtest.h>
#include <pwd.h>
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <regex>

#include "tests/support/raw_sql.h"

namespace barge::runner {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;

// 2024-05-01T12:00:00Z plus `offset`.
TimePoint At(milliseconds offset = milliseconds(0)) {
  return TimePoint(milliseconds(int64_t{1714564800} * 1000)) + offset;
}

struct Output {
  int code = -1;
  std::string out;
  std::string err;
};

std::string ReadBack(std::FILE* f) {
  std::string text;
  std::rewind(f);
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
  std::fclose(f);
  return text;
}

Output Usage(const std::string& state_dir, UsageOptions options) {
  std::FILE* out = std::tmpfile();
  std::FILE* err = std::tmpfile();
  Output o;
  o.code = UsageCommand(state_dir, options, out, err);
  o.out = ReadBack(out);
  o.err = ReadBack(err);
  return o;
}

std::string Me() {
  const passwd* pw = getpwuid(geteuid());
  return pw ? pw->pw_name : "uid " + std::to_string(geteuid());
}

// A finished job whose node `rank` on host `host` started at `began` with
// `gpus` GPUs and whose host removed its container at `removed`.
struct Node {
  int host_id;
  std::string host;
  int rank;
  std::optional<int> gpus;
  TimePoint began;
  TimePoint removed;
};

void AddJob(JobStore& store, const std::string& id, bool ran_by_me, const std::vector<Node>& nodes) {
  JobRecord j;
  j.id = id;
  j.name = "train-" + id;
  j.status = JobStatus::kSucceeded;
  j.created = At();
  j.ended = At(hours(10));
  if (ran_by_me) j.controller_pid = getpid();  // the store records this process's uid
  ASSERT_TRUE(store.CreateJob(j).ok());
  std::vector<PhaseRecord> spans;
  for (const Node& n : nodes) {
    spans.push_back({0, id, n.host_id, n.host, n.rank, "start", n.began, n.began, "ok", n.gpus});
    spans.push_back({0, id, n.host_id, n.host, std::nullopt, "remove", n.removed - minutes(1), n.removed, "ok",
                     std::nullopt});
  }
  ASSERT_TRUE(store.WritePhases(spans).ok());
}

// Job a (run by this user): 2 GPUs on h1 for an hour, none on h2 for half
// an hour. Job b (no controller recorded): GPUs of an unknown count on h1
// for an hour, later.
class UsageCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = JobStore::Open(tmp_.path());
    ASSERT_TRUE(store.ok()) << store.status().message();
    AddJob(**store, "aaaa1111", true, {{0, "h1", 0, 2, At(), At(hours(1))}, {1, "h2", 1, 0, At(), At(minutes(30))}});
    AddJob(**store, "bbbb2222", false, {{0, "h1", 0, std::nullopt, At(hours(2)), At(hours(3))}});
  }
  barge::testing::TempDir tmp_;
};

TEST_F(UsageCommandTest, PerUserHostHoursCountEachHostOnceAndGpuHoursByTheGpusGiven) {
  const Output o = Usage(tmp_.path(), {});
  ASSERT_EQ(o.code, 0) << o.err;
  auto row = [&](const std::string& pattern) {
    return std::regex_search(o.out, std::regex("(^|\n)" + pattern + "\n"));
  };
  EXPECT_TRUE(row("USER +JOBS +HOST-HOURS +GPU-HOURS")) << o.out;
  // Per user: me 1.50 host-hours, 2.00 GPU-hours; "-" 1.00 and an unknown count.
  EXPECT_TRUE(row(Me() + " +1 +1\\.50 +2\\.00")) << o.out;
  EXPECT_TRUE(row("- +1 +1\\.00 +0\\*")) << o.out;
  EXPECT_TRUE(row("TOTAL +2\\.50 +2\\.00\\*")) << o.out;
  EXPECT_NE(o.out.find("* leaves out nodes given `gpus: all`"), std::string::npos) << o.out;
}

TEST_F(UsageCommandTest, PerHostAndPerJobAsJson) {
  Output o = Usage(tmp_.path(), {std::nullopt, "host", true});
  ASSERT_EQ(o.code, 0) << o.err;
  nlohmann::json j = nlohmann::json::parse(o.out);
  EXPECT_EQ(j["by"], "host");
  EXPECT_TRUE(j["since"].is_null());
  ASSERT_EQ(j["rows"].size(), 2u) << o.out;
  EXPECT_EQ(j["rows"][0]["host"], "h1");
  EXPECT_EQ(j["rows"][0]["jobs"], 2);
  EXPECT_DOUBLE_EQ(j["rows"][0]["host_hours"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(j["rows"][0]["gpu_hours"].get<double>(), 2.0);
  EXPECT_EQ(j["rows"][0]["gpus_unknown"], true);
  EXPECT_EQ(j["rows"][1]["host"], "h2");
  EXPECT_DOUBLE_EQ(j["rows"][1]["host_hours"].get<double>(), 0.5);
  EXPECT_EQ(j["rows"][1]["gpus_unknown"], false);
  EXPECT_DOUBLE_EQ(j["total"]["host_hours"].get<double>(), 2.5);

  o = Usage(tmp_.path(), {std::nullopt, "job", true});
  ASSERT_EQ(o.code, 0) << o.err;
  j = nlohmann::json::parse(o.out);
  ASSERT_EQ(j["rows"].size(), 2u) << o.out;
  EXPECT_EQ(j["rows"][0]["job"], "bbbb2222");  // newest first, as ls (same created: insertion order)
  EXPECT_EQ(j["rows"][0]["user"], "-");
  EXPECT_EQ(j["rows"][1]["job"], "aaaa1111");
  EXPECT_EQ(j["rows"][1]["name"], "train-aaaa1111");
  EXPECT_EQ(j["rows"][1]["user"], Me());
  EXPECT_EQ(j["rows"][1]["status"], "succeeded");
  EXPECT_DOUBLE_EQ(j["rows"][1]["host_hours"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(j["rows"][1]["gpu_hours"].get<double>(), 2.0);
}

TEST_F(UsageCommandTest, SinceCountsOnlyWhatWasHeldAfterIt) {
  const Output o = Usage(tmp_.path(), {"2024-05-01T14:30:00Z", "job", true});
  ASSERT_EQ(o.code, 0) << o.err;
  const nlohmann::json j = nlohmann::json::parse(o.out);
  EXPECT_EQ(j["since"], "2024-05-01T14:30:00.000Z");
  ASSERT_EQ(j["rows"].size(), 1u) << o.out;
  EXPECT_EQ(j["rows"][0]["job"], "bbbb2222");
  EXPECT_DOUBLE_EQ(j["rows"][0]["host_hours"].get<double>(), 0.5);
}

TEST_F(UsageCommandTest, ABadByOrSinceIsAClearErrorAndAMissingStoreIsEmpty) {
  Output o = Usage(tmp_.path(), {std::nullopt, "team", false});
  EXPECT_EQ(o.code, 125);
  EXPECT_EQ(o.err, "barge: --by: 'team' is not one of user, job, host\n");
  o = Usage(tmp_.path(), {"yesterday", "user", false});
  EXPECT_EQ(o.code, 125);
  EXPECT_NE(o.err.find("--since: 'yesterday' is neither a time"), std::string::npos) << o.err;
  o = Usage(tmp_.path() + "/none", {std::nullopt, "user", true});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_TRUE(nlohmann::json::parse(o.out)["rows"].empty());
  EXPECT_FALSE(std::filesystem::exists(tmp_.path() + "/none")) << "usage created a store";
}

}  // namespace
}  // namespace barge::runner
