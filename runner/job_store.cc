#include "runner/job_store.h"

#include "runner/state_dir.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

namespace barge::runner {

TimePoint WallNow() {
  return std::chrono::time_point_cast<std::chrono::milliseconds>(std::chrono::system_clock::now());
}

namespace {

// The statuses IsFinal accepts, as an SQL list: ('succeeded', ...).
constexpr const char* kFinalStatusesSql = "('succeeded','failed','cancelled','timed_out','lost')";

// Schema migrations, applied in order; each brings the schema from
// version - 1 to version. Never edit a released one: append.
struct Migration {
  int version;
  const char* sql;
};
constexpr Migration kMigrations[] = {
    {1, R"sql(
CREATE TABLE jobs (
  id             TEXT PRIMARY KEY,
  name           TEXT NOT NULL,
  spec           TEXT NOT NULL DEFAULT '',
  status         TEXT NOT NULL,
  created_ms     INTEGER NOT NULL,
  started_ms     INTEGER,
  ended_ms       INTEGER,
  exit_code      INTEGER,
  restart_count  INTEGER NOT NULL DEFAULT 0,
  controller_pid INTEGER,
  nodes          INTEGER NOT NULL DEFAULT 0,
  run_dir        TEXT NOT NULL DEFAULT ''
);
CREATE INDEX jobs_by_created ON jobs (created_ms);
CREATE INDEX jobs_by_name ON jobs (name, created_ms);
CREATE INDEX jobs_by_ended ON jobs (ended_ms);
CREATE TABLE nodes (
  job_id         TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  rank           INTEGER NOT NULL,
  role           TEXT NOT NULL,
  host           TEXT NOT NULL,
  container_name TEXT NOT NULL DEFAULT '',
  container_id   TEXT NOT NULL DEFAULT '',
  image_id       TEXT NOT NULL DEFAULT '',
  exit_code      INTEGER,
  log_path       TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (job_id, rank)
);
CREATE TABLE events (
  id      INTEGER PRIMARY KEY AUTOINCREMENT,
  job_id  TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  at_ms   INTEGER NOT NULL,
  kind    TEXT NOT NULL,
  host    TEXT,
  detail  TEXT NOT NULL DEFAULT ''
);
CREATE INDEX events_by_job ON events (job_id, id);
)sql"},
    {2, R"sql(
CREATE TABLE hosts (
  job_id   TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  host_id  INTEGER NOT NULL,
  name     TEXT NOT NULL,
  address  TEXT NOT NULL DEFAULT '',
  replaces INTEGER,
  PRIMARY KEY (job_id, host_id)
);
CREATE TABLE phases (
  id       INTEGER PRIMARY KEY AUTOINCREMENT,
  job_id   TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
  host_id  INTEGER NOT NULL,
  host     TEXT NOT NULL,
  rank     INTEGER,
  phase    TEXT NOT NULL,
  began_ms INTEGER NOT NULL,
  ended_ms INTEGER,
  outcome  TEXT NOT NULL DEFAULT ''
);
CREATE INDEX phases_by_job ON phases (job_id, began_ms, id);
)sql"},
    // How each job was run (runner/overrides.h RunRequest, as JSON), for
    // `barge show` and `barge rerun`. Its own table, keyed by job id, so
    // that `barge run` records it before the controller creates the job.
    {3, R"sql(
CREATE TABLE run_requests (
  job_id  TEXT PRIMARY KEY,
  request TEXT NOT NULL
);
)sql"},
};
static_assert(std::size(kMigrations) == JobStore::kSchemaVersion,
              "kSchemaVersion must be the last migration's version");

constexpr const char* kJobColumns =
    "id, name, spec, status, created_ms, started_ms, ended_ms, exit_code, restart_count, "
    "controller_pid, nodes, run_dir";

int64_t ToMs(TimePoint t) { return t.time_since_epoch().count(); }
TimePoint FromMs(int64_t ms) { return TimePoint(std::chrono::milliseconds(ms)); }

// One prepared statement; finalized by the destructor. Binding is 1-based,
// reading 0-based, as in SQLite.
class Statement {
 public:
  Statement(sqlite3* db, const std::string& sql) {
    prepare_rc_ = sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt_, nullptr);
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  bool prepared() const { return prepare_rc_ == SQLITE_OK; }

  Statement& Bind(int i, const std::string& v) {
    Check(sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
    return *this;
  }
  Statement& Bind(int i, int64_t v) {
    Check(sqlite3_bind_int64(stmt_, i, v));
    return *this;
  }
  Statement& Bind(int i, TimePoint v) { return Bind(i, ToMs(v)); }
  template <typename T>
  Statement& Bind(int i, const std::optional<T>& v) {
    if (v) return Bind(i, *v);
    Check(sqlite3_bind_null(stmt_, i));
    return *this;
  }
  Statement& Bind(int i, int v) { return Bind(i, static_cast<int64_t>(v)); }

  // SQLITE_ROW, SQLITE_DONE, or an error code (also a failed prepare or bind).
  int Step() {
    if (!prepared()) return prepare_rc_;
    if (bind_rc_ != SQLITE_OK) return bind_rc_;
    return sqlite3_step(stmt_);
  }
  // Makes the statement ready to step again with new bindings (a failed
  // bind before stays failed: the batch it belongs to fails).
  void Reset() {
    if (!prepared()) return;
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  // Steps once; true on SQLITE_DONE.
  bool Run() { return Step() == SQLITE_DONE; }

  bool IsNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }
  std::string Text(int col) const {
    const unsigned char* p = sqlite3_column_text(stmt_, col);
    return p ? std::string(reinterpret_cast<const char*>(p), sqlite3_column_bytes(stmt_, col))
             : std::string();
  }
  std::optional<int64_t> OptInt(int col) const {
    if (IsNull(col)) return std::nullopt;
    return Int(col);
  }
  std::optional<std::string> OptText(int col) const {
    if (IsNull(col)) return std::nullopt;
    return Text(col);
  }

 private:
  void Check(int rc) {
    if (rc != SQLITE_OK && bind_rc_ == SQLITE_OK) bind_rc_ = rc;
  }
  sqlite3_stmt* stmt_ = nullptr;
  int prepare_rc_ = SQLITE_OK;
  int bind_rc_ = SQLITE_OK;
};

// A BEGIN IMMEDIATE transaction: takes the write lock at once (waiting up
// to the busy timeout), so no later statement in it can fail with BUSY.
// Rolls back unless committed.
class Transaction {
 public:
  explicit Transaction(sqlite3* db) : db_(db) {
    begun_ = sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK;
  }
  ~Transaction() {
    if (begun_ && !committed_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  bool begun() const { return begun_; }
  bool Commit() {
    committed_ = sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr) == SQLITE_OK;
    return committed_;
  }

 private:
  sqlite3* db_;
  bool begun_ = false;
  bool committed_ = false;
};

// Makes sure `path` exists as a regular file with mode 0600 before SQLite
// opens it; SQLite gives the -wal and -shm files the database's mode.
Status PrepareDbFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Status::Error("cannot open " + path + ": " + std::strerror(errno));
  struct stat st {};
  Status s;
  if (fstat(fd, &st) != 0) {
    s = Status::Error("cannot stat " + path + ": " + std::strerror(errno));
  } else if (!S_ISREG(st.st_mode)) {
    s = Status::Error(path + " is not a regular file");
  } else if ((st.st_mode & 0777) != 0600 && fchmod(fd, 0600) != 0) {
    s = Status::Error("cannot make " + path + " mode 0600: " + std::strerror(errno));
  }
  close(fd);
  return s;
}

// Calls `attempt` (which returns an SQLite result code) again while it
// fails with SQLITE_BUSY, for up to `timeout`. For what SQLite does not
// retry with the busy handler itself: switching a new database to WAL while
// another connection does the same (it would deadlock waiting), and reading
// while another connection recovers the WAL.
template <typename F>
int RetryWhileBusy(F attempt, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int rc = attempt();
    if ((rc & 0xff) != SQLITE_BUSY || std::chrono::steady_clock::now() >= deadline) return rc;
    usleep(5000);
  }
}

Result<JobRecord> ReadJob(const Statement& st) {
  JobRecord j;
  j.id = st.Text(0);
  j.name = st.Text(1);
  j.spec = st.Text(2);
  Result<JobStatus> status = ParseJobStatus(st.Text(3));
  if (!status.ok()) return status.status().Prefixed("job " + j.id);
  j.status = *status;
  j.created = FromMs(st.Int(4));
  if (auto v = st.OptInt(5)) j.started = FromMs(*v);
  if (auto v = st.OptInt(6)) j.ended = FromMs(*v);
  if (auto v = st.OptInt(7)) j.exit_code = static_cast<int>(*v);
  j.restart_count = static_cast<int>(st.Int(8));
  if (auto v = st.OptInt(9)) j.controller_pid = static_cast<int>(*v);
  j.nodes = static_cast<int>(st.Int(10));
  j.run_dir = st.Text(11);
  return j;
}

}  // namespace

const char* ToString(JobStatus status) { return NameOf(kJobStatusNames, status).data(); }

Result<JobStatus> ParseJobStatus(std::string_view text) {
  if (std::optional<JobStatus> status = ValueOf(kJobStatusNames, text)) return *status;
  std::string accepted;
  for (const auto& [value, name] : kJobStatusNames) {
    accepted += std::string(accepted.empty() ? "" : ", ") + std::string(name);
  }
  return Status::Error("unknown status '" + std::string(text) + "' (expected one of: " + accepted +
                       ")");
}

bool IsFinal(JobStatus status) {
  switch (status) {
    case JobStatus::kSucceeded:
    case JobStatus::kFailed:
    case JobStatus::kCancelled:
    case JobStatus::kTimedOut:
    case JobStatus::kLost:
      return true;
    default:
      return false;
  }
}

Result<std::unique_ptr<JobStore>> JobStore::Open(const std::string& state_dir) {
  if (Status s = MakeDirs(state_dir); !s.ok()) return s;
  const std::string path = state_dir + "/barge.db";
  if (Status s = PrepareDbFile(path); !s.ok()) return s;
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  // From here `store` owns `db`, even when opening failed.
  std::unique_ptr<JobStore> store(new JobStore(db, path));
  if (rc != SQLITE_OK) {
    return Status::Error(path + ": cannot open: " + (db ? sqlite3_errmsg(db) : sqlite3_errstr(rc)));
  }
  if (Status s = store->Configure(); !s.ok()) return s;
  if (Status s = store->Migrate(); !s.ok()) return s;
  return store;
}

JobStore::~JobStore() { sqlite3_close_v2(db_); }

Status JobStore::Error(const std::string& what) const {
  return Status::Error(path_ + ": " + what + ": " + sqlite3_errmsg(db_));
}

Status JobStore::Configure() {
  sqlite3_extended_result_codes(db_, 1);
  sqlite3_busy_timeout(db_, static_cast<int>(kBusyTimeout.count()));
  // Switching to WAL takes an exclusive lock once per database.
  std::string mode;
  int rc = RetryWhileBusy(
      [&] {
        Statement wal(db_, "PRAGMA journal_mode = WAL");
        int step = wal.Step();
        if (step == SQLITE_ROW) mode = wal.Text(0);
        return step;
      },
      kBusyTimeout);
  if (rc != SQLITE_ROW) return Error("cannot enable WAL mode");
  if (mode != "wal") {
    return Status::Error(path_ + ": cannot enable WAL mode (journal mode stays '" + mode + "')");
  }
  // In WAL mode, NORMAL never corrupts the database; a power cut may lose
  // the last transactions, which history can afford.
  if (sqlite3_exec(db_, "PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON", nullptr, nullptr,
                   nullptr) != SQLITE_OK) {
    return Error("cannot configure the connection");
  }
  return Status::Ok();
}

Status JobStore::Migrate() {
  auto read_version = [this](int* version) {
    int rc = RetryWhileBusy(
        [&] {
          Statement st(db_, "PRAGMA user_version");
          int step = st.Step();
          if (step == SQLITE_ROW) *version = static_cast<int>(st.Int(0));
          return step;
        },
        kBusyTimeout);
    return rc == SQLITE_ROW;
  };
  auto too_new = [this](int version) {
    return Status::Error(path_ + " has schema version " + std::to_string(version) +
                         ", newer than this barge understands (" + std::to_string(kSchemaVersion) +
                         "): it was written by a newer barge; use that one, or set BARGE_HOME "
                         "to another directory");
  };
  int version = 0;
  if (!read_version(&version)) return Error("cannot read the schema version");
  if (version == kSchemaVersion) return Status::Ok();
  if (version > kSchemaVersion) return too_new(version);

  Transaction tx(db_);
  if (!tx.begun()) return Error("cannot begin the schema migration");
  // Another process may have migrated between the read and the lock.
  if (!read_version(&version)) return Error("cannot read the schema version");
  if (version > kSchemaVersion) return too_new(version);
  for (const Migration& m : kMigrations) {
    if (m.version <= version) continue;
    if (sqlite3_exec(db_, m.sql, nullptr, nullptr, nullptr) != SQLITE_OK) {
      return Error("schema migration to version " + std::to_string(m.version) + " failed");
    }
  }
  const std::string set = "PRAGMA user_version = " + std::to_string(kSchemaVersion);
  if (sqlite3_exec(db_, set.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) {
    return Error("cannot record the schema version");
  }
  if (!tx.Commit()) return Error("cannot commit the schema migration");
  return Status::Ok();
}

Status JobStore::RequireJob(const std::string& id) {
  Statement st(db_, "SELECT 1 FROM jobs WHERE id = ?1");
  st.Bind(1, id);
  int rc = st.Step();
  if (rc == SQLITE_ROW) return Status::Ok();
  if (rc == SQLITE_DONE) return Status::Error("no job '" + id + "'");
  return Error("cannot read job " + id);
}

Status JobStore::InsertEvent(const std::string& id, const std::string& kind,
                             const std::optional<std::string>& host, const std::string& detail,
                             TimePoint at) {
  Statement st(
      db_, "INSERT INTO events (job_id, at_ms, kind, host, detail) VALUES (?1, ?2, ?3, ?4, ?5)");
  st.Bind(1, id).Bind(2, at).Bind(3, kind).Bind(4, host).Bind(5, detail);
  if (!st.Run()) return Error("cannot record event " + kind + " of job " + id);
  return Status::Ok();
}

Status JobStore::CreateJob(const JobRecord& job) {
  Transaction tx(db_);
  if (!tx.begun()) return Error("cannot begin a transaction");
  Statement st(db_, std::string("INSERT INTO jobs (") + kJobColumns +
                        ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)");
  st.Bind(1, job.id)
      .Bind(2, job.name)
      .Bind(3, job.spec)
      .Bind(4, std::string(ToString(job.status)))
      .Bind(5, job.created)
      .Bind(6, job.started)
      .Bind(7, job.ended)
      .Bind(8, job.exit_code)
      .Bind(9, job.restart_count)
      .Bind(10, job.controller_pid)
      .Bind(11, job.nodes)
      .Bind(12, job.run_dir);
  int rc = st.Step();
  if (rc == SQLITE_CONSTRAINT_PRIMARYKEY) return Status::Error("job " + job.id + " already exists");
  if (rc != SQLITE_DONE) return Error("cannot create job " + job.id);
  if (Status s = InsertEvent(job.id, ToString(job.status), std::nullopt, "", job.created);
      !s.ok()) {
    return s;
  }
  if (!tx.Commit()) return Error("cannot commit job " + job.id);
  return Status::Ok();
}

Status JobStore::SetStatus(const std::string& id, JobStatus status, std::optional<int> exit_code,
                           const std::string& detail) {
  const TimePoint now = WallNow();
  const bool starts = status == JobStatus::kStarting || status == JobStatus::kRunning;
  Transaction tx(db_);
  if (!tx.begun()) return Error("cannot begin a transaction");
  Statement st(db_, R"sql(
      UPDATE jobs SET status = ?2,
        started_ms = CASE WHEN ?3 AND started_ms IS NULL THEN ?5 ELSE started_ms END,
        ended_ms = CASE WHEN ?4 AND ended_ms IS NULL THEN ?5 ELSE ended_ms END,
        exit_code = COALESCE(?6, exit_code)
      WHERE id = ?1)sql");
  st.Bind(1, id)
      .Bind(2, std::string(ToString(status)))
      .Bind(3, int64_t{starts})
      .Bind(4, int64_t{IsFinal(status)})
      .Bind(5, now)
      .Bind(6, exit_code);
  if (!st.Run()) return Error("cannot set the status of job " + id);
  if (sqlite3_changes(db_) == 0) return Status::Error("no job '" + id + "'");
  if (Status s = InsertEvent(id, ToString(status), std::nullopt, detail, now); !s.ok()) return s;
  if (!tx.Commit()) return Error("cannot commit the status of job " + id);
  return Status::Ok();
}

Result<bool> JobStore::MarkLost(const std::string& id, const std::string& detail) {
  Transaction tx(db_);
  if (!tx.begun()) return Error("cannot begin a transaction");
  std::string current;
  {
    Statement read(db_, "SELECT status FROM jobs WHERE id = ?1");
    read.Bind(1, id);
    int rc = read.Step();
    if (rc == SQLITE_DONE) return Status::Error("no job '" + id + "'");
    if (rc != SQLITE_ROW) return Error("cannot read job " + id);
    current = read.Text(0);
  }
  Result<JobStatus> status = ParseJobStatus(current);
  if (!status.ok()) return status.status().Prefixed("job " + id);
  if (IsFinal(*status)) return false;
  Statement st(db_, R"sql(
      UPDATE jobs SET status = 'lost',
        ended_ms = COALESCE(ended_ms, (SELECT MAX(at_ms) FROM events WHERE job_id = ?1), created_ms)
      WHERE id = ?1)sql");
  st.Bind(1, id);
  if (!st.Run()) return Error("cannot mark job " + id + " lost");
  if (Status s = InsertEvent(id, event::kLost, std::nullopt, detail, WallNow()); !s.ok()) return s;
  if (!tx.Commit()) return Error("cannot commit job " + id);
  return true;
}

Status JobStore::NoteRestart(const std::string& id, const std::string& detail) {
  Transaction tx(db_);
  if (!tx.begun()) return Error("cannot begin a transaction");
  Statement st(db_, "UPDATE jobs SET restart_count = restart_count + 1 WHERE id = ?1");
  st.Bind(1, id);
  if (!st.Run()) return Error("cannot count a restart of job " + id);
  if (sqlite3_changes(db_) == 0) return Status::Error("no job '" + id + "'");
  if (Status s = InsertEvent(id, event::kRestarting, std::nullopt, detail, WallNow()); !s.ok()) {
    return s;
  }
  if (!tx.Commit()) return Error("cannot commit job " + id);
  return Status::Ok();
}

Status JobStore::SetControllerPid(const std::string& id, int pid) {
  Transaction tx(db_);
  if (!tx.begun()) return Error("cannot begin a transaction");
  Statement st(db_, "UPDATE jobs SET controller_pid = ?2 WHERE id = ?1");
  st.Bind(1, id).Bind(2, pid);
  if (!st.Run()) return Error("cannot set the controller of job " + id);
  if (sqlite3_changes(db_) == 0) return Status::Error("no job '" + id + "'");
  if (!tx.Commit()) return Error("cannot commit job " + id);
  return Status::Ok();
}

Status JobStore::AddEvent(const std::string& id, const std::string& kind,
                          const std::optional<std::string>& host, const std::string& detail,
                          std::optional<TimePoint> at) {
  Transaction tx(db_);
  if (!tx.begun()) return Error("cannot begin a transaction");
  if (Status s = RequireJob(id); !s.ok()) return s;
  if (Status s = InsertEvent(id, kind, host, detail, at ? *at : WallNow()); !s.ok()) return s;
  if (!tx.Commit()) return Error("cannot commit an event of job " + id);
  return Status::Ok();
}

Status JobStore::UpsertNode(const NodeRecord& node) {
  Transaction tx(db_);
  if (!tx.begun()) return Error("cannot begin a transaction");
  if (Status s = RequireJob(node.job_id); !s.ok()) return s;
  Statement st(db_, R"sql(
      INSERT INTO nodes (job_id, rank, role, host, container_name, container_id, image_id,
                         exit_code, log_path)
      VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
      ON CONFLICT (job_id, rank) DO UPDATE SET
        role = excluded.role, host = excluded.host, container_name = excluded.container_name,
        container_id = excluded.container_id, image_id = excluded.image_id,
        exit_code = excluded.exit_code, log_path = excluded.log_path)sql");
  st.Bind(1, node.job_id)
      .Bind(2, node.rank)
      .Bind(3, node.role)
      .Bind(4, node.host)
      .Bind(5, node.container_name)
      .Bind(6, node.container_id)
      .Bind(7, node.image_id)
      .Bind(8, node.exit_code)
      .Bind(9, node.log_path);
  const std::string what = "node " + std::to_string(node.rank) + " of job " + node.job_id;
  if (!st.Run()) return Error("cannot record " + what);
  if (!tx.Commit()) return Error("cannot commit " + what);
  return Status::Ok();
}

Status JobStore::UpsertHost(const HostRecord& host) {
  Transaction tx(db_);
  if (!tx.begun()) return Error("cannot begin a transaction");
  if (Status s = RequireJob(host.job_id); !s.ok()) return s;
  Statement st(db_, R"sql(
      INSERT INTO hosts (job_id, host_id, name, address, replaces) VALUES (?1, ?2, ?3, ?4, ?5)
      ON CONFLICT (job_id, host_id) DO UPDATE SET
        name = excluded.name, address = excluded.address, replaces = excluded.replaces)sql");
  st.Bind(1, host.job_id)
      .Bind(2, host.host_id)
      .Bind(3, host.name)
      .Bind(4, host.address)
      .Bind(5, host.replaces);
  const std::string what = "host " + std::to_string(host.host_id) + " of job " + host.job_id;
  if (!st.Run()) return Error("cannot record " + what);
  if (!tx.Commit()) return Error("cannot commit " + what);
  return Status::Ok();
}

Result<std::vector<HostRecord>> JobStore::GetHosts(const std::string& job_id) {
  Statement st(db_, R"sql(
      SELECT job_id, host_id, name, address, replaces FROM hosts WHERE job_id = ?1
      ORDER BY host_id)sql");
  st.Bind(1, job_id);
  std::vector<HostRecord> hosts;
  int rc;
  while ((rc = st.Step()) == SQLITE_ROW) {
    HostRecord h;
    h.job_id = st.Text(0);
    h.host_id = static_cast<int>(st.Int(1));
    h.name = st.Text(2);
    h.address = st.Text(3);
    if (auto v = st.OptInt(4)) h.replaces = static_cast<int>(*v);
    hosts.push_back(std::move(h));
  }
  if (rc != SQLITE_DONE) return Error("cannot read the hosts of job " + job_id);
  return hosts;
}

Result<std::vector<int64_t>> JobStore::WritePhases(const std::vector<PhaseRecord>& records) {
  std::vector<int64_t> ids;
  if (records.empty()) return ids;
  ids.reserve(records.size());
  Transaction tx(db_);
  if (!tx.begun()) return Error("cannot begin a transaction");
  // Prepared once for the whole batch.
  Statement insert(db_, R"sql(
      INSERT INTO phases (job_id, host_id, host, rank, phase, began_ms, ended_ms, outcome)
      VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8))sql");
  Statement update(db_, "UPDATE phases SET ended_ms = ?2, outcome = ?3 WHERE id = ?1");
  std::vector<std::string> known_jobs;  // checked in this transaction
  for (const PhaseRecord& r : records) {
    if (r.id == 0) {
      if (std::find(known_jobs.begin(), known_jobs.end(), r.job_id) == known_jobs.end()) {
        if (Status s = RequireJob(r.job_id); !s.ok()) return s;
        known_jobs.push_back(r.job_id);
      }
      insert.Reset();
      insert.Bind(1, r.job_id)
          .Bind(2, r.host_id)
          .Bind(3, r.host)
          .Bind(4, r.rank)
          .Bind(5, r.phase)
          .Bind(6, r.began)
          .Bind(7, r.ended)
          .Bind(8, r.outcome);
      if (!insert.Run()) {
        return Error("cannot record phase " + r.phase + " of host " + r.host + " of job " +
                     r.job_id);
      }
      ids.push_back(sqlite3_last_insert_rowid(db_));
    } else {
      update.Reset();
      update.Bind(1, r.id).Bind(2, r.ended).Bind(3, r.outcome);
      if (!update.Run()) return Error("cannot update phase row " + std::to_string(r.id));
      if (sqlite3_changes(db_) == 0) {
        return Status::Error("no phase row " + std::to_string(r.id) + " (phase " + r.phase +
                             " of host " + r.host + " of job " + r.job_id + ")");
      }
      ids.push_back(r.id);
    }
  }
  if (!tx.Commit()) return Error("cannot commit " + std::to_string(records.size()) + " phases");
  return ids;
}

Result<std::vector<PhaseRecord>> JobStore::GetPhases(const std::string& job_id) {
  Statement st(db_, R"sql(
      SELECT id, job_id, host_id, host, rank, phase, began_ms, ended_ms, outcome
      FROM phases WHERE job_id = ?1 ORDER BY began_ms, id)sql");
  st.Bind(1, job_id);
  std::vector<PhaseRecord> phases;
  int rc;
  while ((rc = st.Step()) == SQLITE_ROW) {
    PhaseRecord p;
    p.id = st.Int(0);
    p.job_id = st.Text(1);
    p.host_id = static_cast<int>(st.Int(2));
    p.host = st.Text(3);
    if (auto v = st.OptInt(4)) p.rank = static_cast<int>(*v);
    p.phase = st.Text(5);
    p.began = FromMs(st.Int(6));
    if (auto v = st.OptInt(7)) p.ended = FromMs(*v);
    p.outcome = st.Text(8);
    phases.push_back(std::move(p));
  }
  if (rc != SQLITE_DONE) return Error("cannot read the phases of job " + job_id);
  return phases;
}

Result<std::vector<JobRecord>> JobStore::ListJobs(const JobFilter& filter) {
  Statement st(db_, std::string("SELECT ") + kJobColumns + R"sql( FROM jobs
      WHERE (?1 IS NULL OR status = ?1) AND (?2 IS NULL OR name = ?2)
      ORDER BY created_ms DESC, rowid DESC LIMIT ?3)sql");
  std::optional<std::string> status;
  if (filter.status) status = ToString(*filter.status);
  st.Bind(1, status).Bind(2, filter.name).Bind(3, int64_t{filter.limit > 0 ? filter.limit : -1});
  std::vector<JobRecord> jobs;
  int rc;
  while ((rc = st.Step()) == SQLITE_ROW) {
    Result<JobRecord> job = ReadJob(st);
    if (!job.ok()) return job.status();
    jobs.push_back(std::move(job).value());
  }
  if (rc != SQLITE_DONE) return Error("cannot list jobs");
  return jobs;
}

Result<JobRecord> JobStore::GetJob(const std::string& id) {
  Statement st(db_, std::string("SELECT ") + kJobColumns + " FROM jobs WHERE id = ?1");
  st.Bind(1, id);
  int rc = st.Step();
  if (rc == SQLITE_DONE) return Status::Error("no job '" + id + "'");
  if (rc != SQLITE_ROW) return Error("cannot read job " + id);
  return ReadJob(st);
}

Result<std::vector<NodeRecord>> JobStore::GetNodes(const std::string& id) {
  Statement st(db_, R"sql(
      SELECT job_id, rank, role, host, container_name, container_id, image_id, exit_code, log_path
      FROM nodes WHERE job_id = ?1 ORDER BY rank)sql");
  st.Bind(1, id);
  std::vector<NodeRecord> nodes;
  int rc;
  while ((rc = st.Step()) == SQLITE_ROW) {
    NodeRecord n;
    n.job_id = st.Text(0);
    n.rank = static_cast<int>(st.Int(1));
    n.role = st.Text(2);
    n.host = st.Text(3);
    n.container_name = st.Text(4);
    n.container_id = st.Text(5);
    n.image_id = st.Text(6);
    if (auto v = st.OptInt(7)) n.exit_code = static_cast<int>(*v);
    n.log_path = st.Text(8);
    nodes.push_back(std::move(n));
  }
  if (rc != SQLITE_DONE) return Error("cannot read the nodes of job " + id);
  return nodes;
}

Result<std::vector<EventRecord>> JobStore::GetEvents(const std::string& id) {
  Statement st(
      db_,
      "SELECT id, job_id, at_ms, kind, host, detail FROM events WHERE job_id = ?1 ORDER BY id");
  st.Bind(1, id);
  std::vector<EventRecord> events;
  int rc;
  while ((rc = st.Step()) == SQLITE_ROW) {
    EventRecord e;
    e.id = st.Int(0);
    e.job_id = st.Text(1);
    e.at = FromMs(st.Int(2));
    e.kind = st.Text(3);
    e.host = st.OptText(4);
    e.detail = st.Text(5);
    events.push_back(std::move(e));
  }
  if (rc != SQLITE_DONE) return Error("cannot read the events of job " + id);
  return events;
}

Result<std::string> JobStore::ResolveJob(const std::string& text) {
  if (text.empty())
    return Status::Error("no job matches '' (give a job id, an id prefix or a name)");
  // Like Docker: the exact id, then the exact name, then an id prefix. A
  // name is a whole word the user chose; a prefix is an abbreviation.
  {
    Statement st(db_, "SELECT id FROM jobs WHERE id = ?1");
    st.Bind(1, text);
    int rc = st.Step();
    if (rc == SQLITE_ROW) return st.Text(0);
    if (rc != SQLITE_DONE) return Error("cannot look up job " + text);
  }
  {
    Statement st(
        db_, "SELECT id FROM jobs WHERE name = ?1 ORDER BY created_ms DESC, rowid DESC LIMIT 1");
    st.Bind(1, text);
    int rc = st.Step();
    if (rc == SQLITE_ROW) return st.Text(0);
    if (rc != SQLITE_DONE) return Error("cannot look up job " + text);
  }
  Statement st(db_, R"sql(
      SELECT id, name FROM jobs WHERE substr(id, 1, length(?1)) = ?1
      ORDER BY created_ms DESC, rowid DESC)sql");
  st.Bind(1, text);
  std::vector<std::pair<std::string, std::string>> matches;
  int rc;
  while ((rc = st.Step()) == SQLITE_ROW) matches.emplace_back(st.Text(0), st.Text(1));
  if (rc != SQLITE_DONE) return Error("cannot look up job " + text);
  if (matches.empty()) return Status::Error("no job matches '" + text + "'");
  if (matches.size() == 1) return matches[0].first;
  constexpr size_t kShown = 5;
  std::string msg = "'" + text + "' matches " + std::to_string(matches.size()) + " jobs:";
  for (size_t i = 0; i < matches.size() && i < kShown; ++i) {
    msg += std::string(i ? ", " : " ") + matches[i].first + " (" + matches[i].second + ")";
  }
  if (matches.size() > kShown) msg += ", ...";
  return Status::Error(msg);
}

Status JobStore::RemoveJob(const std::string& id) {
  Transaction tx(db_);
  if (!tx.begun()) return Error("cannot begin a transaction");
  for (const char* sql :
       {"DELETE FROM events WHERE job_id = ?1", "DELETE FROM nodes WHERE job_id = ?1",
        "DELETE FROM phases WHERE job_id = ?1", "DELETE FROM hosts WHERE job_id = ?1",
        "DELETE FROM run_requests WHERE job_id = ?1"}) {
    Statement st(db_, sql);
    st.Bind(1, id);
    if (!st.Run()) return Error("cannot remove job " + id);
  }
  Statement st(db_, "DELETE FROM jobs WHERE id = ?1");
  st.Bind(1, id);
  if (!st.Run()) return Error("cannot remove job " + id);
  if (sqlite3_changes(db_) == 0) return Status::Error("no job '" + id + "'");
  if (!tx.Commit()) return Error("cannot commit the removal of job " + id);
  return Status::Ok();
}

Status JobStore::SetRunRequest(const std::string& id, const std::string& request) {
  Transaction tx(db_);
  if (!tx.begun()) return Error("cannot begin a transaction");
  Statement st(db_, "INSERT OR REPLACE INTO run_requests (job_id, request) VALUES (?1, ?2)");
  st.Bind(1, id);
  st.Bind(2, request);
  if (!st.Run()) return Error("cannot record how job " + id + " was run");
  if (!tx.Commit()) return Error("cannot commit how job " + id + " was run");
  return Status::Ok();
}

Result<std::optional<std::string>> JobStore::GetRunRequest(const std::string& id) {
  Statement st(db_, "SELECT request FROM run_requests WHERE job_id = ?1");
  st.Bind(1, id);
  int rc = st.Step();
  if (rc == SQLITE_ROW) return std::optional<std::string>(st.Text(0));
  if (rc != SQLITE_DONE) return Error("cannot read how job " + id + " was run");
  return std::optional<std::string>();
}

Result<std::vector<JobRecord>> JobStore::JobsEndedBefore(TimePoint t) {
  Statement st(db_, std::string("SELECT ") + kJobColumns + " FROM jobs WHERE status IN " +
                        kFinalStatusesSql + " AND ended_ms < ?1 ORDER BY ended_ms, rowid");
  st.Bind(1, t);
  std::vector<JobRecord> jobs;
  int rc;
  while ((rc = st.Step()) == SQLITE_ROW) {
    Result<JobRecord> job = ReadJob(st);
    if (!job.ok()) return job.status();
    jobs.push_back(std::move(job).value());
  }
  if (rc != SQLITE_DONE) return Error("cannot list ended jobs");
  return jobs;
}

}  // namespace barge::runner
