// ArtifactUploads against a real S3-compatible server on loopback
// (tests/support/s3_server.h), parts sized down to 64 KiB.
#include "runner/controller/artifact_uploads.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>
#include <thread>

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
  // The job store under dir_/state, with job `id` recorded (its
  // controller: `pid`, as a job's own process records itself).
  std::unique_ptr<JobStore> Jobs(const std::string& id, int pid, JobStatus status = JobStatus::kRunning) {
    Result<std::unique_ptr<JobStore>> jobs = JobStore::Open(State());
    EXPECT_TRUE(jobs.ok()) << jobs.status().message();
    JobRecord j;
    j.id = id;
    j.name = "train";
    j.status = status;
    j.created = WallNow();
    j.controller_pid = pid;
    EXPECT_TRUE((*jobs)->CreateJob(j).ok());
    return std::move(jobs).value();
  }
  std::string State() const { return dir_ + "/state"; }
  std::vector<UploadRecord> Records(const std::string& job) {
    Result<std::unique_ptr<UploadStore>> store = UploadStore::Open(State());
    EXPECT_TRUE(store.ok()) << store.status().message();
    Result<std::vector<UploadRecord>> records = (*store)->ForJob(job);
    EXPECT_TRUE(records.ok()) << records.status().message();
    return records.ok() ? *records : std::vector<UploadRecord>{};
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
  auto jobs = Jobs("job1", getpid());
  Write("0/ckpt/model.bin", big);
  Write("0/ckpt/sub/step.txt", small);
  FaultProxy proxy(server_->port(), [](int, const std::string&) { return false; });
  {
    ArtifactUploads up(Storage(proxy.url()), State(), "job1", Fast());
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
  // Each file's record: where it went, its size and checksum.
  std::vector<UploadRecord> records = Records("job1");
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].name, "s3://barge-test/runs/job1/0/ckpt/model.bin");
  EXPECT_EQ(records[0].url, proxy.url() + "/barge-test/runs/job1/0/ckpt/model.bin");
  EXPECT_EQ(records[0].endpoint, proxy.url());
  EXPECT_EQ(records[0].local, dir_ + "/0/ckpt/model.bin");
  EXPECT_EQ(records[0].state, UploadState::kSent);
  EXPECT_EQ(records[0].size, big.size());
  EXPECT_EQ(records[0].md5, Md5Hex(big));
  EXPECT_EQ(records[0].parts, 6);
  EXPECT_EQ(records[0].parts_sent, 6);
  EXPECT_TRUE(records[0].etag.ends_with("-6")) << records[0].etag;
  EXPECT_EQ(records[0].upload_id, "");  // finished: nothing to resume
  EXPECT_EQ(records[1].name, "s3://barge-test/runs/job1/0/ckpt/sub/step.txt");
  EXPECT_EQ(records[1].state, UploadState::kSent);
  EXPECT_EQ(records[1].size, small.size());
  EXPECT_EQ(records[1].md5, Md5Hex(small));
  EXPECT_EQ(records[1].etag, Md5Hex(small));
  const int before = proxy.connections();
  ArtifactUploads again(Storage(proxy.url()), State(), "job1", Fast());
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
  records = Records("job1");
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].state, UploadState::kAlreadyThere);
  EXPECT_EQ(records[0].md5, Md5Hex(big));
  EXPECT_EQ(records[0].size, big.size());
}

TEST_F(ArtifactUploadsTest, WrongCredentialsNameTheBucketAndTheEndpointAndTheLocalCopyStays) {
  Write("0/model.bin", "weights");
  auto jobs = Jobs("job1", getpid());
  ArtifactUploads up(Storage("", "wrong-secret"), State(), "job1", Fast());
  up.Queue("0:0", dir_ + "/0/model.bin", "s3://barge-test/x", "job1", 0, "h1");
  ASSERT_TRUE(up.Drain(std::chrono::seconds(60)));
  std::vector<ArtifactSent> sent = up.TakeSent();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_NE(sent[0].error.find("s3://barge-test/x/model.bin at " + server_->url() + ": HTTP 403"), std::string::npos)
      << sent[0].error;
  EXPECT_EQ(sent[0].error.find("wrong-secret"), std::string::npos);
  EXPECT_TRUE(fs::exists(dir_ + "/0/model.bin"));
  // Recorded as failed, with why; no secret in the store's files.
  std::vector<UploadRecord> records = Records("job1");
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].state, UploadState::kFailed);
  EXPECT_EQ(records[0].detail, sent[0].error);
  EXPECT_EQ(records[0].size, 7u);
  jobs.reset();
  std::string bytes;
  for (const char* f : {"/barge.db", "/barge.db-wal"}) {
    std::ifstream in(State() + f, std::ios::binary);
    bytes.append(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  ASSERT_NE(bytes.find("s3://barge-test/x/model.bin"), std::string::npos);
  EXPECT_EQ(bytes.find("wrong-secret"), std::string::npos);
  EXPECT_EQ(bytes.find(server_->secret_key()), std::string::npos);
}

// The part number of a request line "PUT /...?partNumber=N&uploadId=..."; 0
// for any other request.
int PartNumber(const std::string& line) {
  const size_t at = line.find("partNumber=");
  return line.starts_with("PUT ") && at != std::string::npos ? std::atoi(line.c_str() + at + 11) : 0;
}

TEST_F(ArtifactUploadsTest, AnUploadWhoseControllerWasKilledIsResumedByALaterJobWithoutResendingItsParts) {
  const std::string data = PseudoRandomBytes(4 * kSmallPart + 5, 2);  // 5 parts
  Write("1/model.bin", data);
  // While the first controller sends, parts 3 and on hang until it is
  // killed; then every part sent is counted.
  std::atomic<bool> killed{false};
  std::atomic<int> parts_after_kill{0};
  FaultProxy proxy(server_->port(), [&](int, const std::string& line) {
    const int part = PartNumber(line);
    if (part == 0) return false;
    if (killed) {
      ++parts_after_kill;
      return false;
    }
    if (part < 3) return false;
    while (!killed) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return true;
  });
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  const pid_t child = fork();
  if (child == 0) {
    // The first job's controller: sends until killed.
    close(go[1]);
    char c;
    if (read(go[0], &c, 1) != 1) _exit(3);
    ArtifactUploads up(Storage(proxy.url()), State(), "first", Fast());
    up.Queue("1:0", dir_ + "/1/model.bin", "s3://barge-test/ckpt/{rank}", "first", 1, "h2");
    (void)up.Drain(std::chrono::seconds(60));
    _exit(2);  // not reached in time: the test kills it first
  }
  close(go[0]);
  auto jobs = Jobs("first", child);
  ASSERT_EQ(write(go[1], "g", 1), 1);
  close(go[1]);
  // Wait until the store records the upload and the server holds parts 1
  // and 2, then kill the controller.
  S3Client reader = Reader();
  std::string upload_id;
  size_t held = 0;
  for (auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       held < 2 && std::chrono::steady_clock::now() < end;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::vector<UploadRecord> r = Records("first");
    if (r.size() != 1 || r[0].upload_id.empty()) continue;
    upload_id = r[0].upload_id;
    Result<std::vector<S3Part>> parts = reader.ListParts("ckpt/1/model.bin", upload_id);
    if (parts.ok()) held = parts->size();
  }
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  killed = true;
  ASSERT_EQ(held, 2u) << "the first controller did not get parts 1 and 2 to the server";
  std::vector<UploadRecord> first = Records("first");
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].state, UploadState::kSending);
  EXPECT_EQ(first[0].size, data.size());

  // The rerun: a new job, same destination key.
  auto rerun = Jobs("second", getpid());
  ArtifactUploads up(Storage(proxy.url()), State(), "second", Fast());
  up.Queue("1:0", dir_ + "/1/model.bin", "s3://barge-test/ckpt/{rank}", "second", 1, "h2");
  ASSERT_TRUE(up.Drain(std::chrono::seconds(60)));
  std::vector<ArtifactSent> sent = up.TakeSent();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].error, "");
  EXPECT_EQ(parts_after_kill.load(), 3);  // parts 3, 4 and 5 of 5
  Result<std::string> got = reader.GetObject("ckpt/1/model.bin");
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(Md5Hex(*got), Md5Hex(data));
  std::vector<UploadRecord> second = Records("second");
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].state, UploadState::kSent);
  EXPECT_EQ(second[0].parts, 5);
  EXPECT_EQ(second[0].parts_sent, 3);
  EXPECT_EQ(second[0].detail, "resumed the upload of job first: 2 of 5 parts were on the server already");
  // The first job's record says what became of its upload.
  first = Records("first");
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].state, UploadState::kInterrupted);
  EXPECT_EQ(first[0].upload_id, "");
  EXPECT_EQ(first[0].detail, "resumed and finished by job second");
  // Done: the server no longer holds the upload.
  EXPECT_FALSE(reader.ListParts("ckpt/1/model.bin", upload_id).ok());
}

TEST_F(ArtifactUploadsTest, AnUploadOfAJobWhoseControllerStillRunsIsNotTakenOver) {
  const std::string data = PseudoRandomBytes(2 * kSmallPart + 3, 5);  // 3 parts
  Write("0/model.bin", data);
  S3Client c = Reader();
  Result<std::string> id = c.CreateMultipart("live/0/model.bin");
  ASSERT_TRUE(id.ok()) << id.status().message();
  ASSERT_TRUE(c.UploadPart("live/0/model.bin", *id, 1, std::string_view(data).substr(0, kSmallPart)).ok());
  // Job "busy" (its controller: this live process) is sending it.
  auto jobs = Jobs("busy", getpid());
  {
    Result<std::unique_ptr<UploadStore>> store = UploadStore::Open(State());
    ASSERT_TRUE(store.ok());
    ASSERT_TRUE((*store)
                    ->Record({.job_id = "busy",
                              .name = "s3://barge-test/live/0/model.bin",
                              .endpoint = server_->url(),
                              .state = UploadState::kSending,
                              .upload_id = *id,
                              .at = WallNow()})
                    .ok());
  }
  Jobs("other", getpid());
  ArtifactUploads up(Storage(), State(), "other", Fast());
  up.Queue("0:0", dir_ + "/0/model.bin", "s3://barge-test/live/{rank}", "other", 0, "h1");
  ASSERT_TRUE(up.Drain(std::chrono::seconds(60)));
  std::vector<ArtifactSent> sent = up.TakeSent();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].error, "");
  EXPECT_EQ(sent[0].parts_sent, 3);  // a new upload of its own
  // The live job's upload is untouched.
  Result<std::vector<S3Part>> parts = c.ListParts("live/0/model.bin", *id);
  ASSERT_TRUE(parts.ok()) << parts.status().message();
  EXPECT_EQ(parts->size(), 1u);
  ASSERT_TRUE(c.AbortMultipart("live/0/model.bin", *id).ok());
}

}  // namespace
}  // namespace barge::runner::internal
