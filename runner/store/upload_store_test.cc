#include "runner/store/upload_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "runner/store/job_store.h"

namespace barge::runner {
namespace {

using std::chrono::seconds;

class UploadStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("barge-upload-store-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    Result<std::unique_ptr<JobStore>> jobs = JobStore::Open(dir_);
    ASSERT_TRUE(jobs.ok()) << jobs.status().message();
    jobs_ = std::move(jobs).value();
    for (const char* id : {"j1", "j2"}) {
      JobRecord j;
      j.id = id;
      j.name = "train";
      j.created = WallNow();
      ASSERT_TRUE(jobs_->CreateJob(j).ok());
    }
    Result<std::unique_ptr<UploadStore>> uploads = UploadStore::Open(dir_);
    ASSERT_TRUE(uploads.ok()) << uploads.status().message();
    uploads_ = std::move(uploads).value();
  }
  void TearDown() override {
    uploads_.reset();
    jobs_.reset();
    std::filesystem::remove_all(dir_);
  }
  static UploadRecord Sent(const std::string& job, const std::string& name, TimePoint at) {
    return {.job_id = job,
            .name = name,
            .endpoint = "http://127.0.0.1:9000",
            .url = "http://127.0.0.1:9000/bkt/" + name.substr(name.find('/', 5) + 1),
            .local = "/state/runs/" + job + "/artifacts/0/model.bin",
            .state = UploadState::kSent,
            .size = 25165824,
            .md5 = "887c9b7f134179475e8ec054ab93597e",
            .etag = "6b8e03a6b5d4d3d8f5b2a6c7e1f0a9b8-3",
            .part_size = 8 << 20,
            .parts = 3,
            .parts_sent = 3,
            .at = at};
  }
  std::filesystem::path dir_;
  std::unique_ptr<JobStore> jobs_;
  std::unique_ptr<UploadStore> uploads_;
};

TEST_F(UploadStoreTest, ARecordReadsBackWithEveryFieldAndALaterOutcomeReplacesIt) {
  UploadRecord sending = Sent("j1", "s3://bkt/ckpt/model.bin", WallNow());
  sending.state = UploadState::kSending;
  sending.upload_id = "upload-1";
  sending.etag = "";
  ASSERT_TRUE(uploads_->Record(sending).ok());
  Result<std::vector<UploadRecord>> got = uploads_->ForJob("j1");
  ASSERT_TRUE(got.ok()) << got.status().message();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].state, UploadState::kSending);
  EXPECT_EQ((*got)[0].upload_id, "upload-1");
  EXPECT_EQ((*got)[0].size, 25165824u);
  EXPECT_EQ((*got)[0].part_size, 8u << 20);
  EXPECT_EQ((*got)[0].local, "/state/runs/j1/artifacts/0/model.bin");

  UploadRecord failed = Sent("j1", "s3://bkt/ckpt/model.bin", WallNow());
  failed.state = UploadState::kFailed;
  failed.detail = "s3://bkt/ckpt/model.bin at http://127.0.0.1:9000: HTTP 403 SignatureDoesNotMatch";
  ASSERT_TRUE(uploads_->Record(failed).ok());
  got = uploads_->ForJob("j1");
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].state, UploadState::kFailed);
  EXPECT_EQ((*got)[0].detail, failed.detail);
  EXPECT_EQ((*got)[0].upload_id, "");
  EXPECT_EQ(uploads_->ForJob("j2")->size(), 0u);
}

TEST_F(UploadStoreTest, AJobsRecordsAreListedByNameAndNeedTheJob) {
  const TimePoint now = WallNow();
  ASSERT_TRUE(uploads_->Record(Sent("j1", "s3://bkt/b", now)).ok());
  ASSERT_TRUE(uploads_->Record(Sent("j1", "s3://bkt/a", now + seconds(1))).ok());
  Result<std::vector<UploadRecord>> got = uploads_->ForJob("j1");
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ((*got)[0].name, "s3://bkt/a");
  EXPECT_EQ((*got)[1].name, "s3://bkt/b");
  Status missing = uploads_->Record(Sent("nope", "s3://bkt/a", now));
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("no job 'nope'"), std::string::npos) << missing.message();
}

TEST_F(UploadStoreTest, TheLatestRecordOfAnObjectIsFoundAcrossJobsAtItsEndpointOnly) {
  const TimePoint t = WallNow();
  UploadRecord first = Sent("j1", "s3://bkt/ckpt/model.bin", t);
  first.state = UploadState::kSending;
  first.upload_id = "upload-1";
  ASSERT_TRUE(uploads_->Record(first).ok());
  Result<std::optional<UploadRecord>> latest = uploads_->Latest("http://127.0.0.1:9000", "s3://bkt/ckpt/model.bin");
  ASSERT_TRUE(latest.ok()) << latest.status().message();
  ASSERT_TRUE(latest->has_value());
  EXPECT_EQ((*latest)->job_id, "j1");
  EXPECT_EQ((*latest)->upload_id, "upload-1");
  // Another endpoint, another object: none.
  EXPECT_FALSE(uploads_->Latest("https://s3.us-east-1.amazonaws.com", "s3://bkt/ckpt/model.bin")->has_value());
  EXPECT_FALSE(uploads_->Latest("http://127.0.0.1:9000", "s3://bkt/ckpt/other.bin")->has_value());
  // A later job's outcome is the latest.
  ASSERT_TRUE(uploads_->Record(Sent("j2", "s3://bkt/ckpt/model.bin", t + seconds(5))).ok());
  latest = uploads_->Latest("http://127.0.0.1:9000", "s3://bkt/ckpt/model.bin");
  ASSERT_TRUE(latest.ok());
  ASSERT_TRUE(latest->has_value());
  EXPECT_EQ((*latest)->job_id, "j2");
  EXPECT_EQ((*latest)->state, UploadState::kSent);
}

TEST_F(UploadStoreTest, RemovingAJobRemovesItsRecordsAndAStateDirWithoutADatabaseHasNone) {
  ASSERT_TRUE(uploads_->Record(Sent("j1", "s3://bkt/a", WallNow())).ok());
  ASSERT_TRUE(uploads_->Record(Sent("j2", "s3://bkt/a", WallNow())).ok());
  ASSERT_TRUE(jobs_->RemoveJob("j1").ok());
  EXPECT_EQ(uploads_->ForJob("j1")->size(), 0u);
  EXPECT_EQ(uploads_->ForJob("j2")->size(), 1u);
  // A state directory without a database: nothing, and nothing made.
  const std::string empty = dir_.string() + "/empty";
  Result<std::unique_ptr<UploadStore>> none = UploadStore::OpenIfPresent(empty);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, nullptr);
  EXPECT_FALSE(std::filesystem::exists(empty + "/barge.db"));
}

TEST(UploadOutcome, EachStateIsSaidWithWhatAUserNeedsToActOn) {
  UploadRecord r{.name = "s3://bkt/a", .state = UploadState::kSent, .parts = 3};
  EXPECT_EQ(UploadOutcomeText(r, true), "sent in 3 parts");
  r.detail = "resumed the upload of job j1: 2 of 3 parts were on the server already";
  EXPECT_EQ(UploadOutcomeText(r, true),
            "sent in 3 parts (resumed the upload of job j1: 2 of 3 parts were on the server already)");
  EXPECT_EQ(UploadOutcomeText({.state = UploadState::kSent}, true), "sent");
  EXPECT_EQ(UploadOutcomeText({.state = UploadState::kAlreadyThere}, true), "already there (the same bytes): not sent");
  EXPECT_EQ(UploadOutcomeText({.state = UploadState::kFailed, .detail = "s3://bkt/a at http://e: HTTP 403"}, true),
            "failed: s3://bkt/a at http://e: HTTP 403");
  UploadRecord sending{.state = UploadState::kSending, .upload_id = "u-1"};
  EXPECT_EQ(UploadOutcomeText(sending, false), "sending");
  EXPECT_EQ(UploadOutcomeText(sending, true),
            "interrupted (the job's controller ended while it was sent): its multipart upload u-1 is kept for a "
            "resume");
  EXPECT_EQ(UploadOutcomeText({.state = UploadState::kInterrupted, .upload_id = "u-2"}, true),
            "interrupted: its multipart upload u-2 is kept for a resume");
  EXPECT_EQ(UploadOutcomeText({.state = UploadState::kInterrupted, .detail = "resumed and finished by job j2"}, true),
            "interrupted (resumed and finished by job j2)");
}

}  // namespace
}  // namespace barge::runner
