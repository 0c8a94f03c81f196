// The upload table of STATE/barge.db (upload_store.h).
#include "runner/store/upload_store.h"

#include <sqlite3.h>

#include <filesystem>

#include "runner/store/job_store.h"
#include "runner/store/sqlite.h"

namespace barge::runner {
namespace {

using sql::Statement;

constexpr const char* kUploadSchema = R"sql(
CREATE TABLE IF NOT EXISTS uploads (
  job_id     TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  name       TEXT NOT NULL,
  endpoint   TEXT NOT NULL,
  url        TEXT NOT NULL,
  local      TEXT NOT NULL,
  state      TEXT NOT NULL,
  size       INTEGER NOT NULL,
  md5        TEXT NOT NULL,
  etag       TEXT NOT NULL,
  upload_id  TEXT NOT NULL,
  part_size  INTEGER NOT NULL,
  parts      INTEGER NOT NULL,
  parts_sent INTEGER NOT NULL,
  detail     TEXT NOT NULL,
  at_ms      INTEGER NOT NULL,
  PRIMARY KEY (job_id, name)
);
CREATE INDEX IF NOT EXISTS uploads_by_object ON uploads (name, endpoint, at_ms);
)sql";

constexpr const char* kUploadColumns =
    "job_id, name, endpoint, url, local, state, size, md5, etag, upload_id, part_size, parts, parts_sent, detail, "
    "at_ms";

UploadRecord ReadUpload(const Statement& st) {
  UploadRecord u;
  u.job_id = st.Text(0);
  u.name = st.Text(1);
  u.endpoint = st.Text(2);
  u.url = st.Text(3);
  u.local = st.Text(4);
  // A state this barge does not know (a newer one wrote it) reads as failed.
  u.state = ValueOf(kUploadStateNames, st.Text(5)).value_or(UploadState::kFailed);
  u.size = static_cast<uint64_t>(st.Int(6));
  u.md5 = st.Text(7);
  u.etag = st.Text(8);
  u.upload_id = st.Text(9);
  u.part_size = static_cast<uint64_t>(st.Int(10));
  u.parts = static_cast<int>(st.Int(11));
  u.parts_sent = static_cast<int>(st.Int(12));
  u.detail = st.Text(13);
  u.at = TimePoint(std::chrono::milliseconds(st.Int(14)));
  return u;
}

}  // namespace

const char* ToString(UploadState state) { return NameOf(kUploadStateNames, state).data(); }

std::string UploadOutcomeText(const UploadRecord& r, bool job_ended) {
  const std::string kept = "its multipart upload " + r.upload_id + " is kept for a resume";
  switch (r.state) {
    case UploadState::kSent:
      return std::string("sent") + (r.parts > 0 ? " in " + std::to_string(r.parts) + " parts" : "") +
             (r.detail.empty() ? "" : " (" + r.detail + ")");
    case UploadState::kAlreadyThere:
      return "already there (the same bytes): not sent";
    case UploadState::kFailed:
      return "failed: " + (r.detail.empty() ? std::string("no reason recorded") : r.detail);
    case UploadState::kInterrupted:
      return "interrupted" + (r.upload_id.empty() ? std::string() : ": " + kept) +
             (r.detail.empty() ? std::string() : " (" + r.detail + ")");
    case UploadState::kSending:
      if (!job_ended) return "sending";
      return "interrupted (the job's controller ended while it was sent)" +
             (r.upload_id.empty() ? std::string() : ": " + kept);
  }
  return "";
}

Result<std::unique_ptr<UploadStore>> UploadStore::Open(const std::string& state_dir) {
  {
    Result<std::unique_ptr<JobStore>> jobs = JobStore::Open(state_dir);
    if (!jobs.ok()) return jobs.status();
  }
  Result<std::unique_ptr<sql::Database>> db =
      sql::Database::Open(state_dir + "/barge.db", /*create=*/false, JobStore::kBusyTimeout);
  if (!db.ok()) return db.status();
  std::unique_ptr<UploadStore> store(new UploadStore(std::move(db).value()));
  if (!store->database_->Exec(kUploadSchema)) return store->Error("cannot create the upload table");
  return store;
}

Result<std::unique_ptr<UploadStore>> UploadStore::OpenIfPresent(const std::string& state_dir) {
  std::error_code ec;
  if (!std::filesystem::exists(state_dir + "/barge.db", ec)) return std::unique_ptr<UploadStore>();
  return Open(state_dir);
}

UploadStore::UploadStore(std::unique_ptr<sql::Database> database)
    : database_(std::move(database)), db_(database_->raw()) {}

UploadStore::~UploadStore() = default;

Status UploadStore::Error(const std::string& what) const { return database_->Error(what); }

Status UploadStore::Record(const UploadRecord& u) {
  const std::string what = "the upload of " + u.name + " of job " + u.job_id;
  return database_->Write(what, [&]() -> Status {
    {
      Statement job(db_, "SELECT 1 FROM jobs WHERE id = ?1");
      job.Bind(1, u.job_id);
      const int found = job.Step();
      if (found == SQLITE_DONE) return Status::Error("no job '" + u.job_id + "'");
      if (found != SQLITE_ROW) return Error("cannot read job " + u.job_id);
    }
    Statement st(db_, std::string("INSERT OR REPLACE INTO uploads (") + kUploadColumns +
                          ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)");
    st.Bind(1, u.job_id).Bind(2, u.name).Bind(3, u.endpoint).Bind(4, u.url).Bind(5, u.local)
        .Bind(6, std::string(ToString(u.state))).Bind(7, static_cast<int64_t>(u.size)).Bind(8, u.md5)
        .Bind(9, u.etag).Bind(10, u.upload_id).Bind(11, static_cast<int64_t>(u.part_size)).Bind(12, u.parts)
        .Bind(13, u.parts_sent).Bind(14, u.detail).Bind(15, u.at);
    if (!st.Run()) return Error("cannot record " + what);
    return Status::Ok();
  });
}

Result<std::vector<UploadRecord>> UploadStore::ForJob(const std::string& job_id) {
  Statement st(db_, std::string("SELECT ") + kUploadColumns + " FROM uploads WHERE job_id = ?1 ORDER BY name");
  st.Bind(1, job_id);
  std::vector<UploadRecord> out;
  const int rc = st.EachRow([&] { out.push_back(ReadUpload(st)); });
  if (rc != SQLITE_DONE) return Error("cannot read the uploads of job " + job_id);
  return out;
}

Result<std::optional<UploadRecord>> UploadStore::Latest(const std::string& endpoint, const std::string& name) {
  Statement st(db_, std::string("SELECT ") + kUploadColumns +
                        " FROM uploads WHERE name = ?1 AND endpoint = ?2 ORDER BY at_ms DESC, rowid DESC LIMIT 1");
  st.Bind(1, name).Bind(2, endpoint);
  const int rc = st.Step();
  if (rc == SQLITE_ROW) return std::optional<UploadRecord>(ReadUpload(st));
  if (rc != SQLITE_DONE) return Error("cannot look up the uploads of " + name);
  return std::optional<UploadRecord>();
}

}  // namespace barge::runner
