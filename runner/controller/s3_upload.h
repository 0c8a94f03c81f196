// S3Upload: one object written as a stream of bytes of unknown length,
// sent as a multipart upload with parts in parallel and bounded memory.
//
// The writer calls Write as bytes arrive and Finish at the end. Bytes are
// cut into parts of `part_size`; up to `parallel` parts are sent at once by
// the upload's own worker threads, and Write blocks while `parallel` parts
// are being sent and one more waits: memory is at most
// (parallel + 2) x part_size, whatever the object's size. A stream that
// ends before its first part is full is sent as one PUT.
//
// Resume: given the upload id of an earlier, interrupted upload of the same
// object, the parts the server already holds (ListParts) whose size and MD5
// match the bytes now written are not sent again.
//
// Failure: a part that fails (after the client's retries) fails the upload:
// Write and Finish return the error, and the multipart upload is aborted
// (no parts left on the server). Cancelled (the client's cancel flag), it is
// NOT aborted: its id stays valid for a resume.
//
// Threading: Write, Finish and upload_id from one thread (the writer's);
// never the event loop's (Write blocks).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <openssl/evp.h>

#include "base/status.h"
#include "runner/controller/s3_client.h"

namespace barge::runner::internal {

struct S3UploadLimits {
  uint64_t part_size = 16 << 20;  // S3's least is 5 MiB (but the last part)
  int parallel = 4;
};

struct S3Uploaded {
  std::string name = {};  // s3://BUCKET/KEY
  std::string url = {};   // the object's HTTP(S) URL
  uint64_t size = 0;
  std::string md5 = {};   // of the whole object, hex
  std::string etag = {};  // the server's
  int parts = 0;       // 0: one PUT
  int parts_sent = 0;  // parts sent by this upload (a resume sends fewer)
};

class S3Upload {
 public:
  // `client` outlives the upload. `resume_id`: an earlier upload's id.
  // `started(upload_id)` runs on the writer's thread once the multipart
  // upload exists (to record it for a resume).
  S3Upload(S3Client* client, std::string key, S3UploadLimits limits, std::optional<std::string> resume_id = {},
           std::function<void(const std::string&)> started = {});
  // Stops the workers (parts in flight end first); aborts nothing.
  ~S3Upload();
  S3Upload(const S3Upload&) = delete;
  S3Upload& operator=(const S3Upload&) = delete;

  [[nodiscard]] Status Write(std::string_view data);
  // Sends what is left and assembles the object.
  [[nodiscard]] Result<S3Uploaded> Finish();
  // "" until the multipart upload exists.
  const std::string& upload_id() const { return upload_id_; }

 private:
  struct Part {
    int number;
    std::string bytes;
  };
  Status Start();
  Status Enqueue(std::string bytes);
  void Work();
  void SendPart(Part& part);
  Status Fail(Status why);
  void StopWorkers();

  S3Client& client_;
  const std::string key_;
  const S3UploadLimits limits_;
  std::optional<std::string> resume_id_;
  std::function<void(const std::string&)> started_;

  std::string upload_id_;
  std::string buffer_;  // the part being filled
  int next_number_ = 1;
  uint64_t size_ = 0;
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> md5_;
  std::map<int, S3Part> held_;  // a resumed upload's parts on the server

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Part> queue_;   // at most one waits
  int in_flight_ = 0;
  std::vector<S3Part> done_;  // guarded by mu_
  int sent_ = 0;              // guarded by mu_
  std::optional<Status> error_;  // the first part that failed; guarded by mu_
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace barge::runner::internal
