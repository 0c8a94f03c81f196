// S3Client against a real S3-compatible server on loopback (moto's, with
// SigV4 authentication on: tests/support/s3_server.h), and its pure helpers.
#include "runner/controller/s3_client.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "tests/support/s3_server.h"

namespace barge::runner::internal {
namespace {

using testing::FaultProxy;
using testing::S3Server;

class S3ClientTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new S3Server(); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  static S3Client Client(std::string url = "", std::string secret = "", S3Limits limits = Fast()) {
    return S3Client({.url = url.empty() ? server_->url() : url, .path_style = true}, "barge-test",
                    {server_->access_key(), secret.empty() ? server_->secret_key() : secret}, limits);
  }
  static S3Limits Fast() { return {.tries = 3, .backoff = std::chrono::milliseconds(20)}; }
  static S3Server* server_;
};
S3Server* S3ClientTest::server_ = nullptr;

TEST_F(S3ClientTest, AWrongSecretIsRefusedAndTheErrorNamesTheObjectAndTheEndpoint) {
  S3Client wrong = Client("", "not-the-secret");
  Result<std::string> put = wrong.PutObject("refused.txt", "hello");
  ASSERT_FALSE(put.ok());
  EXPECT_NE(put.status().message().find("s3://barge-test/refused.txt at " + server_->url()), std::string::npos)
      << put.status().message();
  EXPECT_NE(put.status().message().find("HTTP 403 SignatureDoesNotMatch"), std::string::npos) << put.status().message();
  EXPECT_EQ(put.status().message().find("not-the-secret"), std::string::npos);
  // Not retried: a refusal is final.
  EXPECT_EQ(wrong.bodies_sent(), 1);
  // And nothing was stored.
  Result<std::optional<S3ObjectInfo>> head = Client().Head("refused.txt");
  ASSERT_TRUE(head.ok()) << head.status().message();
  EXPECT_FALSE(head->has_value());
}

// A space in the key (encoded %20). moto's server refuses the signature of
// keys with '+', ',', '=' or non-ASCII bytes whoever signs them (boto3's
// own too): its canonical path differs from S3's there.
TEST_F(S3ClientTest, APutObjectReadsBackWithTheSameBytesAndItsMd5AsETag) {
  std::string data(100 * 1024 + 7, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 131 % 251);
  S3Client c = Client();
  Result<std::string> put = c.PutObject("dir/a file_1.bin", data);
  ASSERT_TRUE(put.ok()) << put.status().message();
  EXPECT_EQ(*put, Md5Hex(data));
  Result<std::optional<S3ObjectInfo>> head = c.Head("dir/a file_1.bin");
  ASSERT_TRUE(head.ok() && head->has_value()) << head.status().message();
  EXPECT_EQ((*head)->etag, Md5Hex(data));
  EXPECT_EQ((*head)->size, data.size());
  Result<std::string> got = c.GetObject("dir/a file_1.bin");
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(Md5Hex(*got), Md5Hex(data));
}

TEST_F(S3ClientTest, A503TwiceIsRetriedAndTheThirdTrySucceeds) {
  FaultProxy proxy(server_->port(), [](int n, const std::string&) { return n <= 2; });
  S3Client c = Client(proxy.url());
  Result<std::string> put = c.PutObject("after-503.txt", "third time");
  ASSERT_TRUE(put.ok()) << put.status().message();
  EXPECT_EQ(proxy.refused(), 2);
  EXPECT_EQ(c.bodies_sent(), 3);
  Result<std::string> got = Client().GetObject("after-503.txt");
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(*got, "third time");
}

TEST_F(S3ClientTest, A503EveryTimeFailsAfterItsTriesNamingTheAnswer) {
  FaultProxy proxy(server_->port(), [](int, const std::string&) { return true; });
  S3Client c = Client(proxy.url());
  Result<std::string> put = c.PutObject("never.txt", "x");
  ASSERT_FALSE(put.ok());
  EXPECT_NE(put.status().message().find("HTTP 503 SlowDown: injected"), std::string::npos) << put.status().message();
  EXPECT_EQ(proxy.refused(), 3);
}

TEST_F(S3ClientTest, NoServerIsAConnectionErrorRetriedThenNamed) {
  S3Client c = Client("http://127.0.0.1:1");
  Result<std::string> put = c.PutObject("k", "x");
  ASSERT_FALSE(put.ok());
  EXPECT_NE(put.status().message().find("s3://barge-test/k at http://127.0.0.1:1: "), std::string::npos)
      << put.status().message();
  EXPECT_EQ(c.bodies_sent(), 3);
}

TEST_F(S3ClientTest, AMultipartUploadListsItsPartsAndAnAbortDropsThem) {
  S3Client c = Client();
  Result<std::string> id = c.CreateMultipart("parts.bin");
  ASSERT_TRUE(id.ok()) << id.status().message();
  const std::string one(6 << 20, 'a'), two = "tail";
  Result<std::string> e1 = c.UploadPart("parts.bin", *id, 1, one);
  Result<std::string> e2 = c.UploadPart("parts.bin", *id, 2, two);
  ASSERT_TRUE(e1.ok() && e2.ok()) << e1.status().message() << e2.status().message();
  Result<std::vector<S3Part>> parts = c.ListParts("parts.bin", *id);
  ASSERT_TRUE(parts.ok()) << parts.status().message();
  ASSERT_EQ(parts->size(), 2u);
  EXPECT_EQ((*parts)[0].number, 1);
  EXPECT_EQ((*parts)[0].etag, Md5Hex(one));
  EXPECT_EQ((*parts)[0].size, one.size());
  EXPECT_EQ((*parts)[1].etag, Md5Hex(two));
  ASSERT_TRUE(c.AbortMultipart("parts.bin", *id).ok());
  Result<std::vector<S3Part>> after = c.ListParts("parts.bin", *id);
  ASSERT_FALSE(after.ok());
  EXPECT_NE(after.status().message().find("NoSuchUpload"), std::string::npos) << after.status().message();
}

TEST(S3Helpers, KeysAreEncodedButTheirSlashesKept) {
  EXPECT_EQ(S3EncodeKey("runs/job 1/a+b~c.txt"), "runs/job%201/a%2Bb~c.txt");
  EXPECT_EQ(S3EncodeKey("\xc3\xa9"), "%C3%A9");
}

TEST(S3Helpers, XmlValuesAreFoundInOrderWithEntitiesDecoded) {
  const std::string xml = "<R><ETag>&quot;ab&quot;</ETag><X/><ETag>c&amp;d</ETag></R>";
  EXPECT_EQ(XmlValues(xml, "ETag"), (std::vector<std::string>{"\"ab\"", "c&d"}));
  EXPECT_TRUE(XmlValues(xml, "Missing").empty());
  EXPECT_TRUE(XmlValues("<ETag>unclosed", "ETag").empty());
}

TEST(S3Helpers, Md5IsGivenInHexAndInContentMd5Base64) {
  EXPECT_EQ(Md5Hex(""), "d41d8cd98f00b204e9800998ecf8427e");
  EXPECT_EQ(Md5Base64(""), "1B2M2Y8AsgTpgAmY7PhCfg==");
}

}  // namespace
}  // namespace barge::runner::internal
