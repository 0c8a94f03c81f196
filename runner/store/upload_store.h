// Where each file a job sent to object storage went (an artifact's or a
// kept log's local copy sent on to `to: s3://...`, runner/controller/
// artifact_uploads.h): one record per object of a job, the last outcome of
// sending it, in the job store's database (STATE/barge.db), for `barge
// show`, the dashboard and a later job's resume of an interrupted upload.
//
// The table is created by UploadStore itself (CREATE TABLE IF NOT EXISTS),
// not by a JobStore schema version, as ArrayStore's are: an older barge
// does not see it and still opens the database. Its rows go with their job
// (a foreign key ON DELETE CASCADE: `barge rm` and `prune` remove them).
//
// Secrets: none is stored. The endpoint and URLs carry none (`storage:`
// refuses user info in an endpoint), and the S3 client's errors name the
// object and the endpoint, never a key (runner/controller/s3_client.h).
//
// Owns one sqlite3 connection; one UploadStore per thread; any number
// across threads and processes.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/enum_names.h"
#include "base/status.h"
#include "base/time_point.h"

struct sqlite3;

namespace barge::runner {

namespace sql {
class Database;
}  // namespace sql

enum class UploadState {
  kSending,       // a multipart upload is in progress (upload_id)
  kSent,
  kAlreadyThere,  // the object held the same bytes: nothing was sent
  kFailed,        // detail says why; a failed multipart upload was aborted
  kInterrupted,   // cancelled at the job's end (upload_id kept for a resume),
                  // or cut short by a kill and since resumed by another job (detail)
};
inline constexpr auto kUploadStateNames = std::to_array<EnumName<UploadState>>({
    {UploadState::kSending, "sending"},
    {UploadState::kSent, "sent"},
    {UploadState::kAlreadyThere, "already_there"},
    {UploadState::kFailed, "failed"},
    {UploadState::kInterrupted, "interrupted"},
});
static_assert(ListsEveryValueInOrder(kUploadStateNames));
const char* ToString(UploadState state);

struct UploadRecord {
  std::string job_id = {};
  std::string name = {};      // s3://BUCKET/KEY
  std::string endpoint = {};  // scheme://host[:port]
  std::string url = {};       // the object's HTTP(S) URL
  std::string local = {};     // the file sent (the controller's copy)
  UploadState state = UploadState::kSending;
  uint64_t size = 0;    // bytes (0 while unknown)
  std::string md5 = {};  // of the whole file, hex ("" while unknown)
  std::string etag = {};  // the server's, once sent or found there
  std::string upload_id = {};  // the multipart upload (sending, interrupted)
  uint64_t part_size = 0;
  int parts = 0;       // 0: one PUT
  int parts_sent = 0;  // parts this job sent (fewer than parts: resumed)
  std::string detail = {};  // why it failed; how it was resumed
  TimePoint at{};           // when this outcome was recorded
};

// How `barge show` and the dashboard say a record's outcome: "sent in 3
// parts", "already there (the same bytes): not sent", "failed: WHY",
// "interrupted: ...". A record still `sending` whose job has ended
// (`job_ended`: its controller died mid-upload) reads as interrupted; both
// name the upload id kept for a resume, if any.
std::string UploadOutcomeText(const UploadRecord& r, bool job_ended);

class UploadStore {
 public:
  // Opens STATE/barge.db (through JobStore::Open first, so the file, its
  // mode and the job tables exist) and creates the upload table if missing.
  [[nodiscard]] static Result<std::unique_ptr<UploadStore>> Open(const std::string& state_dir);
  // Like Open, but nullptr (no error) when STATE holds no database yet.
  [[nodiscard]] static Result<std::unique_ptr<UploadStore>> OpenIfPresent(const std::string& state_dir);
  ~UploadStore();
  UploadStore(const UploadStore&) = delete;
  UploadStore& operator=(const UploadStore&) = delete;

  // Inserts or replaces the record of (upload.job_id, upload.name) with
  // every field of `upload`. The job must exist.
  [[nodiscard]] Status Record(const UploadRecord& upload);
  // The job's records, by name.
  [[nodiscard]] Result<std::vector<UploadRecord>> ForJob(const std::string& job_id);
  // The newest record (by `at`, then by write) of object `name` at
  // `endpoint`, of any job; nullopt when there is none.
  [[nodiscard]] Result<std::optional<UploadRecord>> Latest(const std::string& endpoint, const std::string& name);

 private:
  explicit UploadStore(std::unique_ptr<sql::Database> database);
  Status Error(const std::string& what) const;

  std::unique_ptr<sql::Database> database_;
  sqlite3* db_;  // database_'s
};

}  // namespace barge::runner
