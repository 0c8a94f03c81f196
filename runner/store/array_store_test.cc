#include "runner/store/array_store.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace barge::runner::fleet {
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
}  // namespace barge::runner::fleet
