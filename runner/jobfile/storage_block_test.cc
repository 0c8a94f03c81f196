// `storage:` and the s3:// destinations of artifacts (storage_block.cc).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "runner/jobfile/blocks.h"
#include "runner/jobfile/job_file.h"
#include "runner/jobfile/redact.h"
#include "tests/support/job_errors.h"
#include "tests/support/scoped_env.h"

namespace barge::runner {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::StartsWith;

class StorageBlockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/barge-storage-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  LoadedJob Parse(const std::string& text) { return ParseJobText(text, "job.yaml", dir_); }
  std::vector<std::string> Errors(const std::string& text) { return barge::testing::RefusedWith(Parse(text), text); }
  std::string dir_;
};

constexpr const char* kHead = "name: x\nimage: i\n";

TEST_F(StorageBlockTest, KeysFromTheEnvironmentAndAnS3ArtifactReachTheSpec) {
  barge::testing::ScopedEnv key("BARGE_TEST_S3_KEY", "AKIDEXAMPLE");
  barge::testing::ScopedEnv secret("BARGE_TEST_S3_SECRET", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY");
  LoadedJob job = Parse(std::string(kHead) + R"(storage:
  endpoint: http://127.0.0.1:9000/
  region: eu-west-3
  addressing: path
  access_key: {env: BARGE_TEST_S3_KEY}
  secret_key: {env: BARGE_TEST_S3_SECRET}
  part_size: 8m
  parallel: 2
  logs: s3://my-bucket/logs/{job}
artifacts:
  - path: /ckpt
    node: all
    every: 10m
    to: s3://my-bucket/runs/{job}/rank-{rank}
)");
  for (const JobFileError& e : job.errors) ADD_FAILURE() << e.ToString();
  ASSERT_TRUE(job.spec && job.spec->storage);
  const StorageSpec& s = *job.spec->storage;
  EXPECT_EQ(s.endpoint, "http://127.0.0.1:9000");
  EXPECT_EQ(s.region, "eu-west-3");
  EXPECT_TRUE(s.path_style);
  EXPECT_EQ(s.access_key, "AKIDEXAMPLE");
  EXPECT_EQ(s.secret_key, "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY");
  EXPECT_EQ(s.part_size, 8u << 20);
  EXPECT_EQ(s.parallel, 2);
  EXPECT_EQ(s.logs, "s3://my-bucket/logs/{job}");
  ASSERT_EQ(job.spec->artifacts.size(), 1u);
  EXPECT_EQ(job.spec->artifacts[0].to, "s3://my-bucket/runs/{job}/rank-{rank}");
  // The secret key is masked in barge's own messages.
  EXPECT_EQ(Redactor(*job.spec)("key wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"), "key [redacted]");
}

TEST_F(StorageBlockTest, DefaultsAreAwsVirtualHostStyleWith16MiBPartsFourAtOnce) {
  barge::testing::ScopedEnv key("BARGE_TEST_S3_KEY", "AKIDEXAMPLE");
  barge::testing::ScopedEnv secret("BARGE_TEST_S3_SECRET", "s3cr3t-value");
  LoadedJob job = Parse(std::string(kHead) +
                        "storage: {access_key: {env: BARGE_TEST_S3_KEY}, secret_key: {env: BARGE_TEST_S3_SECRET}}\n");
  ASSERT_TRUE(job.spec && job.spec->storage) << (job.errors.empty() ? "" : job.errors[0].ToString());
  EXPECT_EQ(job.spec->storage->endpoint, "https://s3.us-east-1.amazonaws.com");
  EXPECT_FALSE(job.spec->storage->path_style);
  EXPECT_EQ(job.spec->storage->part_size, 16u << 20);
  EXPECT_EQ(job.spec->storage->parallel, 4);
}

TEST_F(StorageBlockTest, AProfileIsReadFromTheSharedCredentialsFile) {
  std::ofstream(dir_ + "/credentials") << "[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = d\n"
                                       << "[ci]\naws_access_key_id=AKIDCI\naws_secret_access_key = ci-secret\n"
                                       << "aws_session_token = tok3n-value\n";
  barge::testing::ScopedEnv file("AWS_SHARED_CREDENTIALS_FILE", dir_ + "/credentials");
  LoadedJob job = Parse(std::string(kHead) + "storage: {profile: ci}\n");
  ASSERT_TRUE(job.spec && job.spec->storage) << (job.errors.empty() ? "" : job.errors[0].ToString());
  EXPECT_EQ(job.spec->storage->access_key, "AKIDCI");
  EXPECT_EQ(job.spec->storage->secret_key, "ci-secret");
  EXPECT_EQ(job.spec->storage->session_token, "tok3n-value");
  EXPECT_THAT(Errors(std::string(kHead) + "storage: {profile: nope}\n"),
              ElementsAre(StartsWith("job.yaml:3:20: storage.profile: profile 'nope' of '" + dir_ +
                                     "/credentials' has no aws_access_key_id and aws_secret_access_key")));
}

TEST_F(StorageBlockTest, BadStorageNamesFileLineAndKey) {
  barge::testing::ScopedEnv key("BARGE_TEST_S3_KEY", "AKIDEXAMPLE");
  const std::string keys = "access_key: {env: BARGE_TEST_S3_KEY}, secret_key: {env: BARGE_TEST_S3_KEY}";
  EXPECT_THAT(Errors(std::string(kHead) + "storage: {endpoint: 'ftp://h', " + keys + "}\n"),
              ElementsAre(StartsWith("job.yaml:3:21: storage.endpoint: expected an http:// or https:// URL")));
  EXPECT_THAT(Errors(std::string(kHead) + "storage: {endpoint: 'http://h/bucket', " + keys + "}\n"),
              ElementsAre(StartsWith("job.yaml:3:21: storage.endpoint: expected an http:// or https:// URL with a host and no path")));
  EXPECT_THAT(Errors(std::string(kHead) + "storage: {part_size: 1m, " + keys + "}\n"),
              ElementsAre("job.yaml:3:22: storage.part_size: expected a part size from 5m to 5g (S3's bounds), got '1m'"));
  EXPECT_THAT(Errors(std::string(kHead) + "storage: {addressing: vhost, " + keys + "}\n"),
              ElementsAre(StartsWith("job.yaml:3:23: storage.addressing: invalid value 'vhost'")));
  EXPECT_THAT(Errors(std::string(kHead) + "storage: {region: eu-west-1}\n"),
              ElementsAre(StartsWith("job.yaml:3:1: storage: missing credentials: give access_key and secret_key")));
  EXPECT_THAT(Errors(std::string(kHead) + "storage: {access_key: {env: BARGE_TEST_S3_KEY}}\n"),
              ElementsAre("job.yaml:3:1: storage: missing secret_key: give both access_key and secret_key"));
  EXPECT_THAT(Errors(std::string(kHead) + "storage: {profile: p, " + keys + "}\n"),
              ElementsAre("job.yaml:3:1: storage: give access_key and secret_key, or profile, not both"));
  // A secret is never written in the job file.
  EXPECT_THAT(Errors(std::string(kHead) + "storage: {access_key: AKID, secret_key: {env: BARGE_TEST_S3_KEY}}\n"),
              ElementsAre(StartsWith("job.yaml:3:23: storage.access_key: expected {file: PATH} or {env: VARIABLE}")));
  EXPECT_THAT(Errors(std::string(kHead) + "storage: {secret_key: {env: BARGE_TEST_NO_SUCH_VAR}, access_key: {env: BARGE_TEST_S3_KEY}}\n"),
              ElementsAre(StartsWith("job.yaml:3:29: storage.secret_key.env: ")));
}

TEST_F(StorageBlockTest, BadS3DestinationsSayWhatIsExpected) {
  EXPECT_THAT(Errors(std::string(kHead) + "artifacts:\n  - {path: /a, to: 'gs://b/x'}\n"),
              ElementsAre("job.yaml:4:20: artifacts[0].to: expected s3://BUCKET/PREFIX (only s3:// destinations), got 'gs://b/x'"));
  EXPECT_THAT(Errors(std::string(kHead) + "artifacts:\n  - {path: /a, to: 's3://My_Bucket/x'}\n"),
              ElementsAre(StartsWith("job.yaml:4:20: artifacts[0].to: expected s3://BUCKET/PREFIX (a bucket name is 3 to 63")));
  EXPECT_THAT(Errors(std::string(kHead) + "artifacts:\n  - {path: /a, to: 's3://bkt/{jbo}/x'}\n"),
              ElementsAre(StartsWith("job.yaml:4:20: artifacts[0].to: expected s3://BUCKET/PREFIX (unknown placeholder '{jbo}'; the placeholders are {job}, {name}, {rank} and {host})")));
  EXPECT_THAT(Errors(std::string(kHead) + "artifacts:\n  - {path: /a, to: 's3://bkt/x'}\n"),
              ElementsAre("job.yaml:4:16: artifacts[0].to: to is an s3:// destination: add a storage: block (endpoint, region, credentials)"));
}

}  // namespace
}  // namespace barge::runner
