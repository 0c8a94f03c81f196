// ArtifactUploads: the kept local copies of artifacts sent on to their
// s3:// destinations (`artifacts[].to`, `storage:`), by one worker thread
// of its own, so that nothing on the job's loop waits on storage.
//
// Each queued directory's regular files go, one file at a time, each as an
// S3Upload (s3_upload.h: parts in parallel, memory at most
// (parallel + 2) x part_size) read from the local copy. Before sending, a
// file's MD5 (and its multipart ETag for the part size) is compared with
// what the destination holds (HEAD): the same bytes are not sent again.
// A multipart upload in progress is recorded in RECORD_FILE (key, upload
// id) until it ends, and a later queueing of the same key resumes it.
//
// Threading: Queue, Busy, Drain and TakeSent from the loop's thread; the
// uploads run on the worker.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runner/controller/s3_client.h"
#include "runner/controller/s3_upload.h"
#include "runner/jobfile/job_spec.h"

namespace barge::runner::internal {

// One file's outcome.
struct ArtifactSent {
  std::string local = {};  // the local file
  std::string name = {};   // s3://BUCKET/KEY
  std::string url = {};
  uint64_t size = 0;
  std::string md5 = {};    // hex
  bool skipped = false;    // the destination already held the same bytes
  std::string error = {};  // "" = sent (or skipped)
};

// `to` ("s3://BUCKET/KEY-TEMPLATE") with {job}, {rank}, {host} filled and
// {name} the file's path relative to the copy; without {name}, "/NAME" is
// appended. The bucket and the key, split.
struct S3Destination {
  std::string bucket;
  std::string key;
};
S3Destination ExpandS3Destination(std::string_view to, const std::string& job, int rank, const std::string& host,
                                  const std::string& name);

class ArtifactUploads {
 public:
  // `record_file`: where upload ids in progress are kept ("" = nowhere).
  ArtifactUploads(StorageSpec storage, std::string record_file, S3Limits limits = {});
  // Cancels what is in flight (its multipart upload stays recorded for a
  // resume) and joins the worker.
  ~ArtifactUploads();
  ArtifactUploads(const ArtifactUploads&) = delete;
  ArtifactUploads& operator=(const ArtifactUploads&) = delete;

  // Queues every regular file under `root` (a file or a directory), each
  // to ExpandS3Destination(to, job, rank, host, its path relative to
  // root's parent). `tag` names the batch for Busy.
  void Queue(const std::string& tag, const std::string& root, const std::string& to, const std::string& job, int rank,
             const std::string& host);
  // True while a batch of `tag` is queued or being sent.
  bool Busy(const std::string& tag);
  // True when nothing is queued or being sent.
  bool Idle();
  // Drops what is queued and cancels the file in flight (soon: libcurl's
  // progress callback); its multipart upload stays recorded.
  void Cancel();
  // Waits until everything queued is done, or `limit` passed (then cancels
  // what is in flight); true when everything was done.
  bool Drain(std::chrono::milliseconds limit);
  // The outcomes since the last call.
  std::vector<ArtifactSent> TakeSent();

 private:
  struct File {
    std::string tag, local, bucket, key;
  };
  bool IdleLocked() const;  // mu_ held
  void Work();
  ArtifactSent Send(const File& f);
  S3Client& Client(const std::string& bucket);
  std::optional<std::string> Recorded(const std::string& name);
  void Record(const std::string& name, const std::string& upload_id);

  const StorageSpec storage_;
  const std::string record_file_;
  const S3Limits limits_;
  std::atomic<bool> cancel_{false};
  std::map<std::string, std::unique_ptr<S3Client>> clients_;  // by bucket; the worker's

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<File> queue_;
  std::map<std::string, int> busy_;  // tag -> files queued or in flight
  bool stopping_ = false;
  std::vector<ArtifactSent> sent_;
  std::thread worker_;
};

}  // namespace barge::runner::internal
