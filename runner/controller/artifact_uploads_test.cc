// ArtifactUploads against a real S3-compatible server on loopback
// (tests/support/s3_server.h), parts sized down to 64 KiB.
#include "runner/controller/artifact_uploads.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/support/s3_server.h"

namespace barge::runner::internal {
namespace {

namespace fs = std::filesystem;
using testing::FaultProxy;
using testing::PseudoRandomBytes;
using testing::S3Server;

constexpr uint64_t kSmallPart = 64 << 10;

class ArtifactUploadsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new S3Server({"barge-test"}, kSmallPart); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    char tmpl[] = "/tmp/barge-s3-artifacts-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const std::string& relative, const std::string& bytes) {
    fs::create_directories((fs::path(dir_) / relative).parent_path());
    std::ofstream(fs::path(dir_) / relative, std::ios::binary) << bytes;
  }
  StorageSpec Storage(std::string url = "", std::string secret = "") {
    StorageSpec s;
    s.endpoint = url.empty() ? server_->url() : url;
    s.path_style = true;
    s.access_key = server_->access_key();
    s.secret_key = secret.empty() ? server_->secret_key() : secret;
    s.part_size = kSmallPart;
    s.parallel = 2;
    return s;
  }
  S3Client Reader() {
    return S3Client({.url = server_->url(), .path_style = true}, "barge-test",
                    {server_->access_key(), server_->secret_key()});
  }
  static S3Limits Fast() { return {.tries = 2, .backoff = std::chrono::milliseconds(20)}; }
  static S3Server* server_;
  std::string dir_;
};
S3Server* ArtifactUploadsTest::server_ = nullptr;

TEST(S3Destinations, PlaceholdersAreFilledAndTheNameAppendedWhenNotPlaced) {
  S3Destination a = ExpandS3Destination("s3://bkt/runs/{job}/rank-{rank}", "1a2b", 3, "gpu7", "ckpt/model.pt");
  EXPECT_EQ(a.bucket, "bkt");
  EXPECT_EQ(a.key, "runs/1a2b/rank-3/ckpt/model.pt");
  S3Destination b = ExpandS3Destination("s3://bkt/{host}/{name}.bak", "j", 0, "h1", "m.pt");
  EXPECT_EQ(b.key, "h1/m.pt.bak");
  EXPECT_EQ(ExpandS3Destination("s3://bkt", "j", 0, "h", "f").key, "f");
  EXPECT_EQ(ExpandS3Destination("s3://bkt/p/", "j", 0, "h", "f").key, "p/f");
}

TEST_F(ArtifactUploadsTest, EveryFileOfACopyArrivesAndTheSameBytesAreNotSentAgain) {
  const std::string big = PseudoRandomBytes(5 * kSmallPart + 17, 1), small = "step 100\n";
  Write("0/ckpt/model.bin", big);
  Write("0/ckpt/sub/step.txt", small);
  FaultProxy proxy(server_->port(), [](int, const std::string&) { return false; });
  {
    ArtifactUploads up(Storage(proxy.url()), dir_ + "/uploads", Fast());
    up.Queue("0:0", dir_ + "/0/ckpt", "s3://barge-test/runs/{job}/{rank}", "job1", 0, "h1");
    ASSERT_TRUE(up.Drain(std::chrono::seconds(60)));
    std::vector<ArtifactSent> sent = up.TakeSent();
    ASSERT_EQ(sent.size(), 2u);
    for (const ArtifactSent& s : sent) {
      EXPECT_EQ(s.error, "") << s.name;
      EXPECT_FALSE(s.skipped) << s.name;
    }
    S3Client reader = Reader();
    Result<std::string> got = reader.GetObject("runs/job1/0/ckpt/model.bin");
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_EQ(Md5Hex(*got), Md5Hex(big));
    Result<std::string> got_small = reader.GetObject("runs/job1/0/ckpt/sub/step.txt");
    ASSERT_TRUE(got_small.ok()) << got_small.status().message();
    EXPECT_EQ(*got_small, small);
  }
  const int before = proxy.connections();
  ArtifactUploads again(Storage(proxy.url()), dir_ + "/uploads", Fast());
  again.Queue("0:0", dir_ + "/0/ckpt", "s3://barge-test/runs/{job}/{rank}", "job1", 0, "h1");
  ASSERT_TRUE(again.Drain(std::chrono::seconds(60)));
  std::vector<ArtifactSent> sent = again.TakeSent();
  ASSERT_EQ(sent.size(), 2u);
  for (const ArtifactSent& s : sent) {
    EXPECT_TRUE(s.skipped) << s.name;
    EXPECT_EQ(s.error, "");
  }
  // Two HEADs, nothing sent.
  EXPECT_EQ(proxy.connections() - before, 2);
}

TEST_F(ArtifactUploadsTest, WrongCredentialsNameTheBucketAndTheEndpointAndTheLocalCopyStays) {
  Write("0/model.bin", "weights");
  ArtifactUploads up(Storage("", "wrong-secret"), "", Fast());
  up.Queue("0:0", dir_ + "/0/model.bin", "s3://barge-test/x", "job1", 0, "h1");
  ASSERT_TRUE(up.Drain(std::chrono::seconds(60)));
  std::vector<ArtifactSent> sent = up.TakeSent();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_NE(sent[0].error.find("s3://barge-test/x/model.bin at " + server_->url() + ": HTTP 403"), std::string::npos)
      << sent[0].error;
  EXPECT_EQ(sent[0].error.find("wrong-secret"), std::string::npos);
  EXPECT_TRUE(fs::exists(dir_ + "/0/model.bin"));
}

TEST_F(ArtifactUploadsTest, ARecordedUploadIsResumedWithoutResendingItsParts) {
  const std::string data = PseudoRandomBytes(4 * kSmallPart + 5, 2);
  Write("1/model.bin", data);
  // An earlier upload of the same object that sent its first two parts.
  S3Client c = Reader();
  Result<std::string> id = c.CreateMultipart("resume/model.bin");
  ASSERT_TRUE(id.ok()) << id.status().message();
  ASSERT_TRUE(c.UploadPart("resume/model.bin", *id, 1, std::string_view(data).substr(0, kSmallPart)).ok());
  ASSERT_TRUE(c.UploadPart("resume/model.bin", *id, 2, std::string_view(data).substr(kSmallPart, kSmallPart)).ok());
  std::ofstream(dir_ + "/uploads") << *id << "\ts3://barge-test/resume/model.bin\n";
  int parts_sent = 0;
  std::mutex mu;
  FaultProxy proxy(server_->port(), [&](int, const std::string& line) {
    std::lock_guard<std::mutex> lock(mu);
    if (line.starts_with("PUT ") && line.find("partNumber=") != std::string::npos) ++parts_sent;
    return false;
  });
  ArtifactUploads up(Storage(proxy.url()), dir_ + "/uploads", Fast());
  up.Queue("1:0", dir_ + "/1/model.bin", "s3://barge-test/resume", "job1", 1, "h2");
  ASSERT_TRUE(up.Drain(std::chrono::seconds(60)));
  std::vector<ArtifactSent> sent = up.TakeSent();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].error, "");
  EXPECT_EQ(parts_sent, 3);  // parts 3, 4 and 5 of 5
  Result<std::string> got = c.GetObject("resume/model.bin");
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(Md5Hex(*got), Md5Hex(data));
  // Finished: no longer recorded.
  std::ifstream record(dir_ + "/uploads");
  std::string rest((std::istreambuf_iterator<char>(record)), std::istreambuf_iterator<char>());
  EXPECT_EQ(rest, "");
}

}  // namespace
}  // namespace barge::runner::internal
