// ArtifactUploads: the kept local copies of artifacts sent on to their
// s3:// destinations (`artifacts[].to`, `storage:`), by one worker thread
// of its own, so that nothing on the job's loop waits on storage.
//
// Each queued directory's regular files go, one file at a time, each as an
// S3Upload (s3_upload.h: parts in parallel, memory at most
// (parallel + 2) x part_size) read from the local copy. Before sending, a
// file's MD5 (and its multipart ETag for the part size) is compared with
// what the destination holds (HEAD): the same bytes are not sent again.
//
// Records (runner/store/upload_store.h): each file's outcome is written to
// the job store as the worker learns it: `sending` with its upload id as
// soon as a multipart upload exists, then sent, already there, failed (with
// why) or interrupted (cancelled: its upload id kept). A multipart upload
// is resumed, by this job or a later one (`barge rerun`, a new job with the
// same destination key), when the latest record of the same object at the
// same endpoint is one in progress or interrupted, and the job that wrote
// it is this one or one whose controller is gone (a live one is still
// sending it): ListParts, and the parts the server holds with the same size
// and MD5 are not sent again (s3_upload.h).
//
// Threading: Queue, Busy, Drain, TakeSent and TakeWarning from the loop's
// thread; the uploads and the store's reads and writes (its own
// connections) run on the worker.
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
#include "runner/store/job_store.h"
#include "runner/store/upload_store.h"

namespace barge::runner::internal {

// One file's outcome: its record (as written to the store) and two views
// of it.
struct ArtifactSent : UploadRecord {
  std::string error = {};  // why it was not sent: failed or interrupted ("" = sent or already there)
  bool skipped = false;    // already there: the destination held the same bytes
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
  // The outcomes are recorded for job `job_id` in the store under
  // `state_dir` ("" = nowhere, and nothing is resumed).
  ArtifactUploads(StorageSpec storage, std::string state_dir, std::string job_id = "", S3Limits limits = {});
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
  // The outcomes since the last call: one record per file, as written to
  // the store (state sent, already_there, failed or interrupted).
  std::vector<ArtifactSent> TakeSent();
  // The first failure to open or write the store since the last call ("":
  // none); the uploads go on without their records.
  std::string TakeWarning();

 private:
  struct File {
    std::string tag, local, bucket, key;
  };
  bool IdleLocked() const;  // mu_ held
  void Work();
  UploadRecord Send(const File& f);
  S3Client& Client(const std::string& bucket);
  // The record of an upload of `r`'s object to resume (see the top).
  std::optional<UploadRecord> Resumable(const UploadRecord& r);
  // Writes `r` to the store (the worker's).
  void Remember(const UploadRecord& r);
  void Warn(const std::string& why);

  const StorageSpec storage_;
  const std::string state_dir_;
  const std::string job_id_;
  const S3Limits limits_;
  std::atomic<bool> cancel_{false};
  std::map<std::string, std::unique_ptr<S3Client>> clients_;  // by bucket; the worker's
  std::unique_ptr<JobStore> jobs_;        // the worker's (nullptr: no records)
  std::unique_ptr<UploadStore> records_;  // the worker's

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<File> queue_;
  std::map<std::string, int> busy_;  // tag -> files queued or in flight
  bool stopping_ = false;
  std::vector<ArtifactSent> sent_;
  std::string warning_;
  std::thread worker_;
};

}  // namespace barge::runner::internal
