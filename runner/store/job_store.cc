#include "runner/store/job_store.h"

#include "runner/store/sqlite.h"
#include "runner/store/state_dir.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

namespace barge::runner {

using sql::Statement;
using sql::Transaction;

TimePoint WallNow() {
  return std::chrono::time_point_cast<std::chrono::milliseconds>(std::chrono::system_clock::now());
}

namespace {

// The statuses IsFinal accepts, as an SQL list: ('succeeded', ...).
constexpr const char* kFinalStatusesSql = "('succeeded','failed','cancelled','timed_out','lost')";

// Schema migrations, applied in order; each brings the schema from
// version - 1 to version. Never edit a released one: append.
constexpr sql::Migration kMigrations[] = {
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
    // How each job was run (runner/jobfile/overrides.h RunRequest, as JSON), for
    // `barge show` and `barge rerun`. Its own table, keyed by job id, so
    // that `barge run` records it before the controller creates the job.
    {3, R"sql(
CREATE TABLE run_requests (
  job_id  TEXT PRIMARY KEY,
  request TEXT NOT NULL
);
)sql"},
    // The identity of the process that controller_pid named when it was
    // written (process_identity.h); NULL in rows of an older barge.
    {4, R"sql(
ALTER TABLE jobs ADD COLUMN controller_boot_id TEXT;
ALTER TABLE jobs ADD COLUMN controller_start_time INTEGER;
ALTER TABLE jobs ADD COLUMN controller_uid INTEGER;
)sql"},
    // The GPUs a node was given, on its node phases' spans (PhaseRecord::
    // gpus), for the accounting (usage.h); NULL in rows of an older barge.
    {5, R"sql(
ALTER TABLE phases ADD COLUMN gpus INTEGER;
)sql"},
};
static_assert(std::size(kMigrations) == JobStore::kSchemaVersion,
              "kSchemaVersion must be the last migration's version");

constexpr const char* kJobColumns =
    "id, name, spec, status, created_ms, started_ms, ended_ms, exit_code, restart_count, "
    "controller_pid, nodes, run_dir, controller_boot_id, controller_start_time, controller_uid";

TimePoint FromMs(int64_t ms) { return TimePoint(std::chrono::milliseconds(ms)); }
std::optional<int> OptInt32(const Statement& st, int col) {
  if (auto v = st.OptInt(col)) return static_cast<int>(*v);
  return std::nullopt;
}

// The identity written with a controller pid `pid` (see job_store.h).
std::optional<ProcessIdentity> IdentityToRecord(std::optional<int> pid) {
  return pid ? ReadProcessIdentity(*pid) : std::nullopt;
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
  j.controller_identity = ReadIdentity(st, 12);
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
  Result<std::unique_ptr<sql::Database>> db = sql::Database::Open(state_dir + "/barge.db", /*create=*/true, kBusyTimeout);
  if (!db.ok()) return db.status();
  std::unique_ptr<JobStore> store(new JobStore(std::move(db).value()));
  if (Status s = store->database_->Migrate(kMigrations); !s.ok()) return s;
  return store;
}

JobStore::JobStore(std::unique_ptr<sql::Database> database)
    : database_(std::move(database)), db_(database_->raw()), path_(database_->path()) {}

JobStore::~JobStore() = default;

Status JobStore::Error(const std::string& what) const { return database_->Error(what); }

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
  return database_->Write("job " + job.id, [&]() -> Status {
    Statement st(db_, std::string("INSERT INTO jobs (") + kJobColumns +
                          ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)");
    st.Bind(1, job.id).Bind(2, job.name).Bind(3, job.spec).Bind(4, std::string(ToString(job.status)))
        .Bind(5, job.created).Bind(6, job.started).Bind(7, job.ended).Bind(8, job.exit_code)
        .Bind(9, job.restart_count).Bind(10, job.controller_pid).Bind(11, job.nodes).Bind(12, job.run_dir);
    BindIdentity(st, 13, IdentityToRecord(job.controller_pid));
    int rc = st.Step();
    if (rc == SQLITE_CONSTRAINT_PRIMARYKEY) return Status::Error("job " + job.id + " already exists");
    if (rc != SQLITE_DONE) return Error("cannot create job " + job.id);
    if (Status s = InsertEvent(job.id, ToString(job.status), std::nullopt, "", job.created);
        !s.ok()) {
      return s;
    }
    return Status::Ok();
  });
}

Status JobStore::SetStatus(const std::string& id, JobStatus status, std::optional<int> exit_code,
                           const std::string& detail) {
  const TimePoint now = WallNow();
  const bool starts = status == JobStatus::kStarting || status == JobStatus::kRunning;
  return database_->Write("the status of job " + id, [&]() -> Status {
    Statement st(db_, R"sql(
        UPDATE jobs SET status = ?2,
          started_ms = CASE WHEN ?3 AND started_ms IS NULL THEN ?5 ELSE started_ms END,
          ended_ms = CASE WHEN ?4 AND ended_ms IS NULL THEN ?5 ELSE ended_ms END,
          exit_code = COALESCE(?6, exit_code)
        WHERE id = ?1)sql");
    st.Bind(1, id).Bind(2, std::string(ToString(status))).Bind(3, int64_t{starts})
        .Bind(4, int64_t{IsFinal(status)}).Bind(5, now).Bind(6, exit_code);
    if (!st.Run()) return Error("cannot set the status of job " + id);
    if (sqlite3_changes(db_) == 0) return Status::Error("no job '" + id + "'");
    return InsertEvent(id, ToString(status), std::nullopt, detail, now);
  });
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
  return database_->Write("job " + id, [&]() -> Status {
    Statement st(db_, "UPDATE jobs SET restart_count = restart_count + 1 WHERE id = ?1");
    st.Bind(1, id);
    if (!st.Run()) return Error("cannot count a restart of job " + id);
    if (sqlite3_changes(db_) == 0) return Status::Error("no job '" + id + "'");
    return InsertEvent(id, event::kRestarting, std::nullopt, detail, WallNow());
  });
}

Status JobStore::SetControllerPid(const std::string& id, int pid) {
  return database_->Write("job " + id, [&]() -> Status {
    Statement st(db_, R"sql(
        UPDATE jobs SET controller_pid = ?2, controller_boot_id = ?3, controller_start_time = ?4,
          controller_uid = ?5 WHERE id = ?1)sql");
    st.Bind(1, id).Bind(2, pid);
    BindIdentity(st, 3, IdentityToRecord(pid));
    if (!st.Run()) return Error("cannot set the controller of job " + id);
    if (sqlite3_changes(db_) == 0) return Status::Error("no job '" + id + "'");
    return Status::Ok();
  });
}

Status JobStore::AddEvent(const std::string& id, const std::string& kind,
                          const std::optional<std::string>& host, const std::string& detail,
                          std::optional<TimePoint> at) {
  return WriteForJob(id, "an event of job " + id, [&]() -> Status {
    if (Status s = InsertEvent(id, kind, host, detail, at ? *at : WallNow()); !s.ok()) return s;
    return Status::Ok();
  });
}

Status JobStore::UpsertNode(const NodeRecord& node) {
  const std::string what = "node " + std::to_string(node.rank) + " of job " + node.job_id;
  return WriteForJob(node.job_id, what, [&]() -> Status {
    Statement st(db_, R"sql(
        INSERT INTO nodes (job_id, rank, role, host, container_name, container_id, image_id,
                           exit_code, log_path)
        VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
        ON CONFLICT (job_id, rank) DO UPDATE SET
          role = excluded.role, host = excluded.host, container_name = excluded.container_name,
          container_id = excluded.container_id, image_id = excluded.image_id,
          exit_code = excluded.exit_code, log_path = excluded.log_path)sql");
    st.Bind(1, node.job_id).Bind(2, node.rank).Bind(3, node.role).Bind(4, node.host)
        .Bind(5, node.container_name).Bind(6, node.container_id).Bind(7, node.image_id)
        .Bind(8, node.exit_code).Bind(9, node.log_path);
    if (!st.Run()) return Error("cannot record " + what);
    return Status::Ok();
  });
}

Status JobStore::UpsertHost(const HostRecord& host) {
  const std::string what = "host " + std::to_string(host.host_id) + " of job " + host.job_id;
  return WriteForJob(host.job_id, what, [&]() -> Status {
    Statement st(db_, R"sql(
        INSERT INTO hosts (job_id, host_id, name, address, replaces) VALUES (?1, ?2, ?3, ?4, ?5)
        ON CONFLICT (job_id, host_id) DO UPDATE SET
          name = excluded.name, address = excluded.address, replaces = excluded.replaces)sql");
    st.Bind(1, host.job_id).Bind(2, host.host_id).Bind(3, host.name).Bind(4, host.address)
        .Bind(5, host.replaces);
    if (!st.Run()) return Error("cannot record " + what);
    return Status::Ok();
  });
}

Result<std::vector<HostRecord>> JobStore::GetHosts(const std::string& job_id) {
  Statement st(db_, R"sql(
      SELECT job_id, host_id, name, address, replaces FROM hosts WHERE job_id = ?1
      ORDER BY host_id)sql");
  st.Bind(1, job_id);
  std::vector<HostRecord> hosts;
  int rc = st.EachRow([&] {
    hosts.push_back(HostRecord{.job_id = st.Text(0), .host_id = static_cast<int>(st.Int(1)), .name = st.Text(2),
                               .address = st.Text(3), .replaces = OptInt32(st, 4)});
  });
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
      INSERT INTO phases (job_id, host_id, host, rank, phase, began_ms, ended_ms, outcome, gpus)
      VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9))sql");
  Statement update(db_, "UPDATE phases SET ended_ms = ?2, outcome = ?3 WHERE id = ?1");
  std::vector<std::string> known_jobs;  // checked in this transaction
  for (const PhaseRecord& r : records) {
    if (r.id == 0) {
      if (std::find(known_jobs.begin(), known_jobs.end(), r.job_id) == known_jobs.end()) {
        if (Status s = RequireJob(r.job_id); !s.ok()) return s;
        known_jobs.push_back(r.job_id);
      }
      insert.Reset();
      insert.Bind(1, r.job_id).Bind(2, r.host_id).Bind(3, r.host).Bind(4, r.rank).Bind(5, r.phase)
          .Bind(6, r.began).Bind(7, r.ended).Bind(8, r.outcome).Bind(9, r.gpus);
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
      SELECT id, job_id, host_id, host, rank, phase, began_ms, ended_ms, outcome, gpus
      FROM phases WHERE job_id = ?1 ORDER BY began_ms, id)sql");
  st.Bind(1, job_id);
  std::vector<PhaseRecord> phases;
  int rc = st.EachRow([&] {
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
    if (auto v = st.OptInt(9)) p.gpus = static_cast<int>(*v);
    phases.push_back(std::move(p));
  });
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
  return ReadJobs(st, "cannot list jobs");
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
  int rc = st.EachRow([&] {
    nodes.push_back(NodeRecord{.job_id = st.Text(0), .rank = static_cast<int>(st.Int(1)), .role = st.Text(2),
                               .host = st.Text(3), .container_name = st.Text(4), .container_id = st.Text(5),
                               .image_id = st.Text(6), .exit_code = OptInt32(st, 7), .log_path = st.Text(8)});
  });
  if (rc != SQLITE_DONE) return Error("cannot read the nodes of job " + id);
  return nodes;
}

Result<std::vector<EventRecord>> JobStore::GetEvents(const std::string& id) {
  Statement st(
      db_,
      "SELECT id, job_id, at_ms, kind, host, detail FROM events WHERE job_id = ?1 ORDER BY id");
  st.Bind(1, id);
  std::vector<EventRecord> events;
  int rc = st.EachRow([&] {
    events.push_back(EventRecord{.id = st.Int(0), .job_id = st.Text(1), .at = FromMs(st.Int(2)), .kind = st.Text(3),
                                 .host = st.OptText(4), .detail = st.Text(5)});
  });
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
  return database_->Write("the removal of job " + id, [&]() -> Status {
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
    return Status::Ok();
  });
}

Status JobStore::SetRunRequest(const std::string& id, const std::string& request) {
  return database_->Write("how job " + id + " was run", [&]() -> Status {
    Statement st(db_, "INSERT OR REPLACE INTO run_requests (job_id, request) VALUES (?1, ?2)");
    st.Bind(1, id);
    st.Bind(2, request);
    if (!st.Run()) return Error("cannot record how job " + id + " was run");
    return Status::Ok();
  });
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
  return ReadJobs(st, "cannot list ended jobs");
}

Status JobStore::WriteForJob(const std::string& id, const std::string& what, const std::function<Status()>& write) {
  return database_->Write(what, [&]() -> Status {
    if (Status s = RequireJob(id); !s.ok()) return s;
    return write();
  });
}

Result<std::vector<JobRecord>> JobStore::ReadJobs(Statement& st, const std::string& what) {
  std::vector<JobRecord> jobs;
  Status bad;
  int rc = st.EachRow([&] {
    Result<JobRecord> job = ReadJob(st);
    if (!job.ok()) {
      if (bad.ok()) bad = job.status();
      return;
    }
    jobs.push_back(std::move(job).value());
  });
  if (!bad.ok()) return bad;
  if (rc != SQLITE_DONE) return Error(what);
  return jobs;
}

}  // namespace barge::runner
