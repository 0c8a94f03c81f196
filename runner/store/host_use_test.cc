#include "runner/store/host_use.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

namespace barge::runner {
namespace {

using std::chrono::seconds;

class HostUseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/barge-host-use-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
    auto opened = JobStore::Open(dir_);
    ASSERT_TRUE(opened.ok()) << opened.status().message();
    store_ = std::move(opened).value();
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  // 2024-05-01T12:00:00Z plus `s` seconds.
  static TimePoint At(int s) { return TimePoint(std::chrono::milliseconds(int64_t{1714564800} * 1000)) + seconds(s); }
  // A job of this process (its controller is alive) on `hosts`, made at At(created).
  void Job(const std::string& id, JobStatus status, int created, const std::vector<std::string>& hosts) {
    JobRecord j;
    j.id = id;
    j.name = "n-" + id;
    j.status = status;
    j.created = At(created);
    j.controller_pid = getpid();
    ASSERT_TRUE(store_->CreateJob(j).ok());
    for (size_t i = 0; i < hosts.size(); ++i) {
      ASSERT_TRUE(store_->UpsertHost({id, static_cast<int>(i), hosts[i], "", std::nullopt}).ok());
    }
  }
  std::string dir_;
  std::unique_ptr<JobStore> store_;
};

TEST_F(HostUseTest, HoldersAreListedFromTheirLastPreflightAndWaitersInTheOrderTheyBeganToWait) {
  // a: ran at once on h1, h2. b: waited for h1 from 30 s, still waits.
  // c: began to wait at 20 s (before b), waits for h1. d: waited, then got h3 at 50 s.
  Job("a", JobStatus::kPreflight, 0, {"h1", "h2"});
  ASSERT_TRUE(store_->SetStatus("a", JobStatus::kRunning).ok());
  Job("b", JobStatus::kPreflight, 25, {"h1"});
  ASSERT_TRUE(store_->AddEvent("b", "waiting", std::nullopt, "for h1 (held by a)", At(30)).ok());
  ASSERT_TRUE(store_->AddEvent("b", "waiting", std::nullopt, "for h1 (held by a, c first)", At(40)).ok());
  Job("c", JobStatus::kWaiting, 20, {"h1"});
  Job("d", JobStatus::kPreflight, 5, {"h3"});
  ASSERT_TRUE(store_->AddEvent("d", "waiting", std::nullopt, "for h3", At(10)).ok());
  ASSERT_TRUE(store_->AddEvent("d", "preflight", std::nullopt, "every host is free", At(50)).ok());
  ASSERT_TRUE(store_->SetStatus("d", JobStatus::kRunning).ok());
  // e: ended; f: its controller is gone (lost). Neither is listed.
  Job("e", JobStatus::kPreflight, 0, {"h1"});
  ASSERT_TRUE(store_->SetStatus("e", JobStatus::kSucceeded, 0).ok());
  JobRecord f;
  f.id = "f";
  f.status = JobStatus::kRunning;
  f.controller_pid = 999999999;
  ASSERT_TRUE(store_->CreateJob(f).ok());
  ASSERT_TRUE(store_->UpsertHost({"f", 0, "h1", "", std::nullopt}).ok());
  // b's status is waiting only now (SetStatus adds an event at the wall
  // clock, after At(40): the wait that began at 30 s goes on).
  ASSERT_TRUE(store_->SetStatus("b", JobStatus::kWaiting, std::nullopt, "for h1").ok());

  Result<std::vector<HostUse>> use = HostsInUse(*store_);
  ASSERT_TRUE(use.ok()) << use.status().message();
  ASSERT_EQ(use->size(), 3u);
  const HostUse& h1 = (*use)[0];
  EXPECT_EQ(h1.host, "h1");
  ASSERT_EQ(h1.holds.size(), 1u);
  EXPECT_EQ(h1.holds[0].job_id, "a");
  EXPECT_EQ(h1.holds[0].job_name, "n-a");
  EXPECT_EQ(h1.holds[0].status, JobStatus::kRunning);
  EXPECT_EQ(h1.holds[0].since, At(0));
  ASSERT_EQ(h1.queue.size(), 2u);
  EXPECT_EQ(h1.queue[0].job_id, "c");
  EXPECT_EQ(h1.queue[0].since, At(20));
  EXPECT_EQ(h1.queue[1].job_id, "b");
  EXPECT_EQ(h1.queue[1].since, At(30));
  EXPECT_EQ(h1.queue[1].detail, "for h1");
  EXPECT_EQ((*use)[1].host, "h2");
  EXPECT_EQ((*use)[1].holds.size(), 1u);
  const HostUse& h3 = (*use)[2];
  ASSERT_EQ(h3.holds.size(), 1u);
  EXPECT_EQ(h3.holds[0].job_id, "d");
  EXPECT_EQ(h3.holds[0].since, At(50));
  EXPECT_EQ(h3.holds[0].detail, "");
  EXPECT_TRUE(h3.queue.empty());
  Result<JobRecord> lost = store_->GetJob("f");
  ASSERT_TRUE(lost.ok());
  EXPECT_EQ(lost->status, JobStatus::kLost);
}

TEST_F(HostUseTest, AHostASpareReplacedIsNoLongerTheJobs) {
  Job("a", JobStatus::kRunning, 0, {"h1", "h2"});
  ASSERT_TRUE(store_->UpsertHost({"a", 2, "h9", "", 1}).ok());  // h9 took h2's place
  Result<std::vector<HostUse>> use = HostsInUse(*store_);
  ASSERT_TRUE(use.ok()) << use.status().message();
  ASSERT_EQ(use->size(), 2u);
  EXPECT_EQ((*use)[0].host, "h1");
  EXPECT_EQ((*use)[1].host, "h9");
}

}  // namespace
}  // namespace barge::runner
