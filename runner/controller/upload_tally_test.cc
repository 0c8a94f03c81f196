#include "runner/controller/upload_tally.h"

#include <gtest/gtest.h>

namespace barge::runner::internal {
namespace {

UploadRecord Outcome(const std::string& name, UploadState state, const std::string& detail = "") {
  return {.name = name, .state = state, .detail = detail};
}

TEST(UploadTally, AllSentNamesTheLastObject) {
  UploadTally t;
  EXPECT_TRUE(t.empty());
  t.Add(Outcome("s3://b/a", UploadState::kSent));
  t.Add(Outcome("s3://b/c", UploadState::kAlreadyThere));
  EXPECT_FALSE(t.empty());
  EXPECT_EQ(t.Line(), "sent to s3://: 1 file(s), 1 already there, 0 failed (last: s3://b/c)");
}

TEST(UploadTally, EveryUploadFailedNamesTheLastRealErrorNotAnEmptyName) {
  UploadTally t;
  t.Add(Outcome("s3://b/x/model.bin", UploadState::kFailed,
                "s3://b/x/model.bin at http://127.0.0.1:9000: HTTP 403 Forbidden (no body: a HEAD; check the keys)"));
  t.Add(Outcome("s3://b/x/0-local.log", UploadState::kFailed,
                "s3://b/x/0-local.log at http://127.0.0.1:9000: HTTP 403 SignatureDoesNotMatch: bad"));
  EXPECT_EQ(t.Line(),
            "sent to s3://: 0 file(s), 0 already there, 2 failed (last failure: s3://b/x/0-local.log at "
            "http://127.0.0.1:9000: HTTP 403 SignatureDoesNotMatch: bad)");
}

TEST(UploadTally, AFailureAfterASuccessIsTheOneNamedAndAReasonWithoutTheObjectIsGivenIt) {
  UploadTally t;
  t.Add(Outcome("s3://b/a", UploadState::kFailed, "cannot read /runs/j/a: No such file or directory"));
  t.Add(Outcome("s3://b/c", UploadState::kSent));
  EXPECT_EQ(t.Line(),
            "sent to s3://: 1 file(s), 0 already there, 1 failed (last failure: s3://b/a: cannot read /runs/j/a: "
            "No such file or directory)");
}

TEST(UploadTally, InterruptedFilesAreCountedApartFromFailures) {
  UploadTally t;
  t.Add(Outcome("s3://b/a", UploadState::kSent));
  t.Add(Outcome("s3://b/big", UploadState::kInterrupted, "cancelled"));
  EXPECT_EQ(t.Line(), "sent to s3://: 1 file(s), 0 already there, 0 failed, 1 interrupted (last: s3://b/a)");
}

}  // namespace
}  // namespace barge::runner::internal
