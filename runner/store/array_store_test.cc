#include "runner/store/array_store.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "runner/store/array_view.h"
#include "tests/support/raw_sql.h"

namespace barge::runner {
namespace {

class ArrayStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("barge-array-store-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

using barge::testing::RawExec;

// A child that sleeps until the destructor kills and reaps it.
class SleepingChild {
 public:
  SleepingChild() : pid_(fork()) {
    if (pid_ == 0) {
      for (;;) pause();
    }
  }
  ~SleepingChild() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  int pid() const { return pid_; }
  bool Running() const { return waitpid(pid_, nullptr, WNOHANG) == 0; }

 private:
  pid_t pid_;
};

ArrayRecord RunningArray(const std::string& id, int controller_pid) {
  ArrayRecord a;
  a.id = id;
  a.name = "sweep";
  a.size = 1;
  a.created = WallNow();
  a.controller_pid = controller_pid;
  return a;
}

TEST_F(ArrayStoreTest, TheControllersIdentityIsRecordedWithItsPidAndKeptWhenAnotherProcessMarksItLost) {
  Result<std::unique_ptr<ArrayStore>> store = ArrayStore::Open(dir_.string());
  ASSERT_TRUE(store.ok()) << store.status().message();
  ASSERT_TRUE((*store)->CreateArray(RunningArray("a1", getpid()), {MemberRecord{}}).ok());
  EXPECT_EQ((*store)->GetArray("a1")->controller_identity, ReadProcessIdentity(getpid()));
  ASSERT_TRUE((*store)->GetArray("a1")->controller_identity);
  // Another controller takes the array over (its pid is not this process's).
  SleepingChild child;
  ASSERT_TRUE((*store)->UpdateArray(RunningArray("a1", child.pid())).ok());
  EXPECT_EQ((*store)->GetArray("a1")->controller_identity, ReadProcessIdentity(child.pid()));
  Result<ArrayRecord> live = LiveArray(**store, dir_.string(), "a1");
  ASSERT_TRUE(live.ok()) << live.status().message();
  EXPECT_EQ(live->status, "running");
  // It dies and its pid goes to a process of another start time.
  RawExec(dir_.string() + "/barge.db", "UPDATE arrays SET controller_start_time = controller_start_time - 1");
  live = LiveArray(**store, dir_.string(), "a1");
  ASSERT_TRUE(live.ok()) << live.status().message();
  EXPECT_EQ(live->status, "lost");
  // Marking it lost wrote the pid again but kept what was recorded with it.
  std::optional<ProcessIdentity> recorded = (*store)->GetArray("a1")->controller_identity;
  ASSERT_TRUE(recorded);
  EXPECT_EQ(recorded->start_time, ReadProcessIdentity(child.pid())->start_time - 1);
  EXPECT_TRUE(child.Running());
}

TEST_F(ArrayStoreTest, AnOlderBargesArrayTableGainsTheIdentityColumnsAndItsRowsHaveNone) {
  std::filesystem::create_directories(dir_);
  ASSERT_TRUE(JobStore::Open(dir_.string()).ok());
  SleepingChild child;
  RawExec(dir_.string() + "/barge.db", R"sql(
CREATE TABLE arrays (id TEXT PRIMARY KEY, name TEXT NOT NULL, status TEXT NOT NULL, size INTEGER NOT NULL,
  parallel INTEGER NOT NULL, retries INTEGER NOT NULL, params_json TEXT NOT NULL, created_ms INTEGER NOT NULL,
  ended_ms INTEGER, exit_code INTEGER, controller_pid INTEGER, run_dir TEXT NOT NULL);
INSERT INTO arrays VALUES ('old', 'sweep', 'running', 1, 1, 0, '{}', 1714564800000, NULL, NULL, )sql" +
                                            std::to_string(child.pid()) + ", '');");
  Result<std::unique_ptr<ArrayStore>> store = ArrayStore::Open(dir_.string());
  ASSERT_TRUE(store.ok()) << store.status().message();
  Result<ArrayRecord> old = (*store)->GetArray("old");
  ASSERT_TRUE(old.ok()) << old.status().message();
  EXPECT_EQ(old->controller_pid, child.pid());
  EXPECT_FALSE(old->controller_identity);
  // Judged by its pid alone: a live process of this user.
  EXPECT_EQ(LiveArray(**store, dir_.string(), "old")->status, "running");
  ASSERT_TRUE(ArrayStore::Open(dir_.string()).ok());  // opening again adds nothing
}

TEST_F(ArrayStoreTest, MembersAndTheirJobIdsAreKeptAndFoundByNameOrPrefix) {
  Result<std::unique_ptr<ArrayStore>> none = ArrayStore::OpenIfPresent(dir_.string());
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, nullptr);
  Result<std::unique_ptr<ArrayStore>> store = ArrayStore::Open(dir_.string());
  ASSERT_TRUE(store.ok()) << store.status().message();
  ArrayRecord a;
  a.id = "abcd1234";
  a.name = "sweep";
  a.size = 2;
  a.created = WallNow();
  std::vector<MemberRecord> members(2);
  members[0].index = 0;
  members[1].index = 1;
  ASSERT_TRUE((*store)->CreateArray(a, members).ok());
  members[1].array_id = a.id;
  members[1].status = MemberStatus::kFailed;
  members[1].attempts = 2;
  members[1].job_ids = {"j1", "j2"};
  members[1].exit_code = 3;
  ASSERT_TRUE((*store)->UpdateMember(members[1]).ok());
  Result<std::vector<MemberRecord>> back = (*store)->GetMembers(a.id);
  ASSERT_TRUE(back.ok());
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[1].status, MemberStatus::kFailed);
  EXPECT_EQ((*back)[1].job_ids, (std::vector<std::string>{"j1", "j2"}));
  EXPECT_EQ((*back)[1].exit_code, 3);
  EXPECT_EQ((*back)[0].status, MemberStatus::kWaiting);
  Result<std::vector<std::string>> ids = (*store)->MemberJobIds();
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(*ids, (std::vector<std::string>{"j1", "j2"}));
  EXPECT_EQ(*(*store)->ResolveArray("sweep"), std::optional<std::string>("abcd1234"));
  EXPECT_EQ(*(*store)->ResolveArray("abc"), std::optional<std::string>("abcd1234"));
  EXPECT_EQ(*(*store)->ResolveArray("zzz"), std::nullopt);
  // The job store opens the same database unharmed.
  EXPECT_TRUE(JobStore::Open(dir_.string()).ok());
}

TEST_F(ArrayStoreTest, RemoveArrayDeletesTheArrayItsMembersAndItsRunRequestAndNothingElse) {
  Result<std::unique_ptr<ArrayStore>> store = ArrayStore::Open(dir_.string());
  ASSERT_TRUE(store.ok()) << store.status().message();
  for (const char* id : {"gone", "stays"}) {
    ArrayRecord a;
    a.id = id;
    a.name = id;
    a.size = 1;
    a.created = WallNow();
    std::vector<MemberRecord> members(1);
    members[0].job_ids = {std::string(id) + "-job"};
    ASSERT_TRUE((*store)->CreateArray(a, members).ok());
    Result<std::unique_ptr<JobStore>> jobs = JobStore::Open(dir_.string());
    ASSERT_TRUE((*jobs)->SetRunRequest(id, "{}").ok());
  }
  ASSERT_TRUE((*store)->RemoveArray("gone").ok());
  EXPECT_FALSE((*store)->GetArray("gone").ok());
  Result<std::vector<MemberRecord>> members = (*store)->GetMembers("gone");
  ASSERT_TRUE(members.ok());
  EXPECT_TRUE(members->empty());
  Result<std::unique_ptr<JobStore>> jobs = JobStore::Open(dir_.string());
  EXPECT_EQ(*(*jobs)->GetRunRequest("gone"), std::nullopt);
  EXPECT_EQ(*(*jobs)->GetRunRequest("stays"), std::optional<std::string>("{}"));
  EXPECT_EQ(*(*store)->MemberJobIds(), (std::vector<std::string>{"stays-job"}));
  Status again = (*store)->RemoveArray("gone");
  EXPECT_FALSE(again.ok());
  EXPECT_NE(again.message().find("no array 'gone'"), std::string::npos) << again.message();
}

}  // namespace
}  // namespace barge::runner
