// `barge down JOB` (Down) when the job's recorded controller pid now names
// an unrelated process: after a crash or a reboot the kernel gives the pid
// to someone else's process, or to another of this user's.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <thread>

#include "runner/cli/verbs.h"
#include "runner/store/job_store.h"
#include "runner/store/process_identity.h"
#include "tests/support/raw_sql.h"
#include "tests/support/sleeper.h"

namespace barge::runner {
namespace {

namespace fs = std::filesystem;

using barge::testing::RawExec;
using barge::testing::Sleeper;

class DownTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/barge-down-test-XXXXXX";
    root_ = mkdtemp(tmpl);
    state_ = root_ + "/state";
    if (const char* home = std::getenv("BARGE_HOME")) saved_home_ = home;
    setenv("BARGE_HOME", state_.c_str(), 1);
  }
  void TearDown() override {
    if (saved_home_) {
      setenv("BARGE_HOME", saved_home_->c_str(), 1);
    } else {
      unsetenv("BARGE_HOME");
    }
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  // A running job recorded by its controller (this process, whose identity
  // the store records), whose pid then went to process `pid`.
  void AddJobWhoseControllerPidIsNow(const std::string& id, int pid, bool with_identity = true) {
    {
      Result<std::unique_ptr<JobStore>> store = JobStore::Open(state_);
      ASSERT_TRUE(store.ok()) << store.status().message();
      JobRecord j;
      j.id = id;
      j.name = id;
      j.status = JobStatus::kRunning;
      j.created = WallNow();
      j.controller_pid = getpid();
      ASSERT_TRUE((*store)->CreateJob(j).ok());
      ASSERT_TRUE((*store)->GetJob(id)->controller_identity);
    }
    std::string sql = "UPDATE jobs SET controller_pid = " + std::to_string(pid);
    if (!with_identity) sql += ", controller_boot_id = NULL, controller_start_time = NULL, controller_uid = NULL";
    RawExec(state_ + "/barge.db", sql + " WHERE id = '" + id + "'");
  }

  JobStatus StatusOf(const std::string& id) {
    Result<std::unique_ptr<JobStore>> store = JobStore::Open(state_);
    EXPECT_TRUE(store.ok());
    Result<JobRecord> job = (*store)->GetJob(id);
    EXPECT_TRUE(job.ok());
    return job.ok() ? job->status : JobStatus::kPreflight;
  }

  // `barge down ID`, with what it printed on stdout.
  std::string Down(const std::string& id) {
    ::testing::internal::CaptureStdout();
    (void)runner::Down(id, std::chrono::steady_clock::now() + std::chrono::seconds(3));
    return ::testing::internal::GetCapturedStdout();
  }

  std::string root_;
  std::string state_;
  std::optional<std::string> saved_home_;
};

TEST_F(DownTest, DownOfAJobWhoseRecordedControllerRunsSignalsIt) {
  Sleeper controller;
  ASSERT_GT(controller.pid(), 0);
  {
    Result<std::unique_ptr<JobStore>> store = JobStore::Open(state_);
    ASSERT_TRUE(store.ok()) << store.status().message();
    JobRecord j;
    j.id = "live";
    j.name = "live";
    j.status = JobStatus::kRunning;
    j.created = WallNow();
    j.controller_pid = controller.pid();  // recorded with its identity
    ASSERT_TRUE((*store)->CreateJob(j).ok());
  }
  const std::string out = Down("live");
  EXPECT_NE(out.find("stopping job live (controller pid " + std::to_string(controller.pid()) + ")"),
            std::string::npos)
      << out;
  EXPECT_FALSE(controller.Running());
}

TEST_F(DownTest, DownOfAJobWhosePidIsNowAnotherProcessOfThisUserSignalsNothingAndMarksItLost) {
  // The record keeps this test process's identity; the sleeper must start
  // in a later clock tick (10 ms) than this process did, or the two would
  // share a start time and the sleeper would be the recorded controller.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  Sleeper mine;
  ASSERT_GT(mine.pid(), 0);
  ASSERT_NE(ReadProcessIdentity(mine.pid())->start_time, ReadProcessIdentity(getpid())->start_time);
  AddJobWhoseControllerPidIsNow("mine", mine.pid());
  const std::string out = Down("mine");
  EXPECT_EQ(out.find("stopping job"), std::string::npos) << out;
  EXPECT_TRUE(mine.Running());
  EXPECT_EQ(StatusOf("mine"), JobStatus::kLost);
}

TEST_F(DownTest, DownOfAJobWhosePidIsNowAProcessOfUid65534SignalsNothingAndMarksItLost) {
  ASSERT_EQ(geteuid(), 0u) << "this test plays another user (uid 65534): it needs root";
  Sleeper nobody(65534), nobody_too(65534);
  ASSERT_GT(nobody.pid(), 0);
  ASSERT_GT(nobody_too.pid(), 0);
  AddJobWhoseControllerPidIsNow("theirs", nobody.pid());
  // A record of an older barge, without the controller's identity.
  AddJobWhoseControllerPidIsNow("old", nobody_too.pid(), /*with_identity=*/false);
  for (const char* id : {"theirs", "old"}) {
    const std::string out = Down(id);
    EXPECT_EQ(out.find("stopping job"), std::string::npos) << id << ": " << out;
    EXPECT_EQ(StatusOf(id), JobStatus::kLost) << id;
  }
  EXPECT_TRUE(nobody.Running());
  EXPECT_TRUE(nobody_too.Running());
}

}  // namespace
}  // namespace barge::runner
