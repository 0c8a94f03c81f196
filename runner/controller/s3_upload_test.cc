// S3Upload against a real S3-compatible server on loopback
// (tests/support/s3_server.h), with parts sized down (64 KiB; the server's
// least part size likewise) so that a test sends many parts in little time.
#include "runner/controller/s3_upload.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/s3_server.h"

namespace barge::runner::internal {
namespace {

using testing::FaultProxy;
using testing::PseudoRandomBytes;
using testing::S3Server;

constexpr uint64_t kPart = 64 << 10;

// Writes `data` in uneven pieces, as a stream from a host arrives.
Status WriteInPieces(S3Upload& up, std::string_view data) {
  for (size_t at = 0, n = 1000; at < data.size(); at += n, n = n * 3 % 40000 + 1) {
    if (Status s = up.Write(data.substr(at, n)); !s.ok()) return s;
  }
  return Status::Ok();
}

class S3UploadTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new S3Server({"barge-test"}, kPart); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  static std::unique_ptr<S3Client> Client(std::string url = "") {
    return std::make_unique<S3Client>(S3Endpoint{.url = url.empty() ? server_->url() : url, .path_style = true},
                                      "barge-test", S3Credentials{server_->access_key(), server_->secret_key()},
                                      S3Limits{.tries = 2, .backoff = std::chrono::milliseconds(20)});
  }
  static S3Server* server_;
};
S3Server* S3UploadTest::server_ = nullptr;

TEST_F(S3UploadTest, AStreamOfMorePartsThanTheParallelismArrivesWholeAndChecksOutOnDownload) {
  const std::string data = PseudoRandomBytes(7 * kPart + 12345, 1);
  auto c = Client();
  std::string recorded;
  S3Upload up(c.get(), "runs/j1/model.bin", {.part_size = kPart, .parallel = 3}, {},
              [&recorded](const std::string& id) { recorded = id; });
  ASSERT_TRUE(WriteInPieces(up, data).ok());
  Result<S3Uploaded> done = up.Finish();
  ASSERT_TRUE(done.ok()) << done.status().message();
  EXPECT_FALSE(recorded.empty());
  EXPECT_EQ(done->parts, 8);
  EXPECT_EQ(done->parts_sent, 8);
  EXPECT_EQ(done->size, data.size());
  EXPECT_EQ(done->md5, Md5Hex(data));
  EXPECT_EQ(done->name, "s3://barge-test/runs/j1/model.bin");
  EXPECT_NE(done->etag.find("-8"), std::string::npos) << done->etag;
  Result<std::string> got = c->GetObject("runs/j1/model.bin");
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got->size(), data.size());
  EXPECT_EQ(Md5Hex(*got), Md5Hex(data));
}

TEST_F(S3UploadTest, AStreamShorterThanAPartIsOnePut) {
  auto c = Client();
  S3Upload up(c.get(), "small.txt", {.part_size = kPart, .parallel = 3});
  ASSERT_TRUE(up.Write("just this").ok());
  Result<S3Uploaded> done = up.Finish();
  ASSERT_TRUE(done.ok()) << done.status().message();
  EXPECT_EQ(done->parts, 0);
  EXPECT_TRUE(up.upload_id().empty());
  EXPECT_EQ(done->etag, Md5Hex("just this"));
  EXPECT_EQ(c->bodies_sent(), 1);
}

TEST_F(S3UploadTest, APartThatKeepsFailingFailsTheUploadAndAbortsIt) {
  // Part 3 is refused on every try; everything else passes.
  FaultProxy proxy(server_->port(), [](int, const std::string& line) {
    return line.find("partNumber=3&") != std::string::npos;
  });
  auto c = Client(proxy.url());
  S3Upload up(c.get(), "broken.bin", {.part_size = kPart, .parallel = 2});
  const std::string data = PseudoRandomBytes(6 * kPart, 2);
  Status written = WriteInPieces(up, data);
  Result<S3Uploaded> done = written.ok() ? up.Finish() : Result<S3Uploaded>(written);
  ASSERT_FALSE(done.ok());
  EXPECT_NE(done.status().message().find("part 3: s3://barge-test/broken.bin at " + proxy.url() + ": HTTP 503"),
            std::string::npos)
      << done.status().message();
  EXPECT_EQ(proxy.refused(), 2);  // the client's two tries
  ASSERT_FALSE(up.upload_id().empty());
  // Aborted: the server no longer knows the upload, so no part is left.
  Result<std::vector<S3Part>> parts = Client()->ListParts("broken.bin", up.upload_id());
  ASSERT_FALSE(parts.ok());
  EXPECT_NE(parts.status().message().find("NoSuchUpload"), std::string::npos) << parts.status().message();
}

TEST_F(S3UploadTest, AnUploadWhoseWriterWasKilledIsResumedWithoutResendingItsFinishedParts) {
  const std::string data = PseudoRandomBytes(10 * kPart + 99, 3);
  int id_pipe[2];
  ASSERT_EQ(pipe(id_pipe), 0);
  const pid_t child = fork();
  if (child == 0) {
    // The writer: reports its upload id, then sends slowly until killed.
    close(id_pipe[0]);
    auto c = Client();
    S3Upload up(c.get(), "resumed.bin", {.part_size = kPart, .parallel = 2}, {}, [&](const std::string& id) {
      (void)!write(id_pipe[1], (id + "\n").data(), id.size() + 1);
    });
    for (size_t at = 0; at < data.size(); at += kPart) {
      if (!up.Write(std::string_view(data).substr(at, kPart)).ok()) _exit(1);
      std::this_thread::sleep_for(std::chrono::milliseconds(at >= 4 * kPart ? 10000 : 0));
    }
    _exit(2);  // not reached in time: the test kills it first
  }
  close(id_pipe[1]);
  std::string id;
  char ch;
  while (read(id_pipe[0], &ch, 1) == 1 && ch != '\n') id += ch;
  close(id_pipe[0]);
  ASSERT_FALSE(id.empty());
  auto c = Client();
  // Wait until the server holds the first 4 parts, then kill the writer.
  size_t held = 0;
  for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       held < 4 && std::chrono::steady_clock::now() < end;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    Result<std::vector<S3Part>> parts = c->ListParts("resumed.bin", id);
    if (parts.ok()) held = parts->size();
  }
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  ASSERT_GE(held, 4u);

  S3Upload again(c.get(), "resumed.bin", {.part_size = kPart, .parallel = 2}, id);
  ASSERT_TRUE(WriteInPieces(again, data).ok());
  Result<S3Uploaded> done = again.Finish();
  ASSERT_TRUE(done.ok()) << done.status().message();
  EXPECT_EQ(again.upload_id(), id);
  EXPECT_EQ(done->parts, 11);
  EXPECT_LE(done->parts_sent, 11 - static_cast<int>(held));
  Result<std::string> got = c->GetObject("resumed.bin");
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(Md5Hex(*got), Md5Hex(data));
}

// Virtual-host addressing (the default, `addressing: virtual`): the bucket
// is the first label of the host name, not a path segment. The endpoint is
// http://s3.localhost:PORT, so an object's host is
// barge-test.s3.localhost, which libcurl resolves to loopback itself (every
// *.localhost name, RFC 6761). moto takes the bucket from such a Host
// header; given the bucket in the path instead, at host s3.localhost, it
// would take the bucket "s3", which does not exist (checked below), so
// this test fails if the client puts the bucket in the path.
TEST_F(S3UploadTest, VirtualHostAddressingSendsTheBucketInTheHostNameNotThePath) {
  std::vector<std::string> lines;
  std::mutex mu;
  FaultProxy proxy(server_->port(), [&](int, const std::string& line) {
    std::lock_guard<std::mutex> lock(mu);
    lines.push_back(line);
    return false;
  });
  const std::string endpoint = "http://s3.localhost:" + proxy.url().substr(proxy.url().rfind(':') + 1);
  S3Client virtual_host(S3Endpoint{.url = endpoint}, "barge-test",
                        S3Credentials{server_->access_key(), server_->secret_key()},
                        S3Limits{.tries = 2, .backoff = std::chrono::milliseconds(20)});
  EXPECT_EQ(virtual_host.Url("virtual/a b.bin"),
            "http://barge-test.s3.localhost:" + endpoint.substr(endpoint.rfind(':') + 1) + "/virtual/a%20b.bin");
  const std::string data = PseudoRandomBytes(2 * kPart + 11, 6);  // 3 parts
  {
    S3Upload up(&virtual_host, "virtual/a b.bin", {.part_size = kPart, .parallel = 2});
    ASSERT_TRUE(WriteInPieces(up, data).ok());
    Result<S3Uploaded> done = up.Finish();
    ASSERT_TRUE(done.ok()) << done.status().message();
    EXPECT_EQ(done->parts, 3);
  }
  Result<std::optional<S3ObjectInfo>> head = virtual_host.Head("virtual/a b.bin");
  ASSERT_TRUE(head.ok() && head->has_value()) << head.status().message();
  EXPECT_EQ((*head)->size, data.size());
  // Stored in bucket barge-test under the key: read back path-style.
  Result<std::string> got = Client()->GetObject("virtual/a b.bin");
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(Md5Hex(*got), Md5Hex(data));
  {
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_GE(lines.size(), 6u);  // create, 3 parts, complete, HEAD
    for (const std::string& line : lines) {
      EXPECT_NE(line.find(" /virtual/a%20b.bin"), std::string::npos) << line;
      EXPECT_EQ(line.find("/barge-test/"), std::string::npos) << line;
    }
  }
  // The same server and host name, path-style: moto finds no bucket "s3".
  S3Client path_style(S3Endpoint{.url = endpoint, .path_style = true}, "barge-test",
                      S3Credentials{server_->access_key(), server_->secret_key()}, S3Limits{.tries = 1});
  Result<std::string> wrong = path_style.GetObject("virtual/a b.bin");
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("NoSuchBucket"), std::string::npos) << wrong.status().message();
}

TEST_F(S3UploadTest, AResumeOfAnUploadTheServerNoLongerKnowsStartsANewOne) {
  auto c = Client();
  S3Upload up(c.get(), "fresh.bin", {.part_size = kPart, .parallel = 2}, std::string("no-such-upload"));
  const std::string data = PseudoRandomBytes(2 * kPart + 1, 4);
  ASSERT_TRUE(up.Write(data).ok());
  Result<S3Uploaded> done = up.Finish();
  ASSERT_TRUE(done.ok()) << done.status().message();
  EXPECT_NE(up.upload_id(), "no-such-upload");
  EXPECT_EQ(done->parts_sent, 3);
}

}  // namespace
}  // namespace barge::runner::internal
