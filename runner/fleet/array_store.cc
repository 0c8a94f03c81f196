// The array and member tables of STATE/barge.db.
#include "runner/fleet/array_store.h"

#include <sqlite3.h>

#include <filesystem>
#include <map>
#include <sstream>

namespace barge::runner::fleet {
namespace {

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS arrays (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  status TEXT NOT NULL,
  size INTEGER NOT NULL,
  parallel INTEGER NOT NULL,
  retries INTEGER NOT NULL,
  params_json TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  ended_ms INTEGER,
  exit_code INTEGER,
  controller_pid INTEGER,
  run_dir TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS array_members (
  array_id TEXT NOT NULL REFERENCES arrays(id) ON DELETE CASCADE,
  idx INTEGER NOT NULL,
  params TEXT NOT NULL,
  status TEXT NOT NULL,
  attempts INTEGER NOT NULL,
  job_ids TEXT NOT NULL,
  exit_code INTEGER,
  hosts TEXT NOT NULL,
  started_ms INTEGER,
  ended_ms INTEGER,
  PRIMARY KEY (array_id, idx)
);
)sql";

// One prepared statement, finalized on destruction.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) { sqlite3_prepare_v2(db, sql, -1, &st_, nullptr); }
  ~Stmt() { sqlite3_finalize(st_); }
  Stmt& Bind(int i, const std::string& s) {
    sqlite3_bind_text(st_, i, s.c_str(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& Bind(int i, int64_t v) {
    sqlite3_bind_int64(st_, i, v);
    return *this;
  }
  Stmt& Bind(int i, std::optional<int64_t> v) {
    if (v) return Bind(i, *v);
    sqlite3_bind_null(st_, i);
    return *this;
  }
  int Step() { return st_ ? sqlite3_step(st_) : SQLITE_ERROR; }
  std::string Text(int c) {
    const unsigned char* t = sqlite3_column_text(st_, c);
    return t ? reinterpret_cast<const char*>(t) : "";
  }
  int64_t Int(int c) { return sqlite3_column_int64(st_, c); }
  std::optional<int64_t> MaybeInt(int c) {
    if (sqlite3_column_type(st_, c) == SQLITE_NULL) return std::nullopt;
    return Int(c);
  }

 private:
  sqlite3_stmt* st_ = nullptr;
};

std::optional<int64_t> Ms(const std::optional<TimePoint>& t) {
  if (!t) return std::nullopt;
  return t->time_since_epoch().count();
}
std::optional<TimePoint> Time(std::optional<int64_t> ms) {
  if (!ms) return std::nullopt;
  return TimePoint(std::chrono::milliseconds(*ms));
}
std::optional<int64_t> Opt(std::optional<int> v) {
  if (!v) return std::nullopt;
  return *v;
}

std::string Join(const std::vector<std::string>& ids) {
  std::string out;
  for (const std::string& id : ids) out += (out.empty() ? "" : " ") + id;
  return out;
}
std::vector<std::string> Split(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

constexpr const char* kArrayColumns =
    "id, name, status, size, parallel, retries, params_json, created_ms, ended_ms, exit_code, "
    "controller_pid, run_dir";

ArrayRecord ReadArray(Stmt& st) {
  ArrayRecord a;
  a.id = st.Text(0);
  a.name = st.Text(1);
  a.status = st.Text(2);
  a.size = static_cast<int>(st.Int(3));
  a.parallel = static_cast<int>(st.Int(4));
  a.retries = static_cast<int>(st.Int(5));
  a.params_json = st.Text(6);
  a.created = TimePoint(std::chrono::milliseconds(st.Int(7)));
  a.ended = Time(st.MaybeInt(8));
  if (auto c = st.MaybeInt(9)) a.exit_code = static_cast<int>(*c);
  if (auto p = st.MaybeInt(10)) a.controller_pid = static_cast<int>(*p);
  a.run_dir = st.Text(11);
  return a;
}

}  // namespace

const char* ToString(MemberStatus s) {
  std::string_view name = NameOf(kMemberStatusNames, s);
  return name.empty() ? "failed" : name.data();
}

MemberStatus ParseMemberStatus(const std::string& text) {
  return ValueOf(kMemberStatusNames, text).value_or(MemberStatus::kFailed);
}

std::string CountsText(const std::vector<MemberRecord>& members) {
  std::map<MemberStatus, int> n;
  for (const MemberRecord& m : members) ++n[m.status];
  std::string out;
  for (MemberStatus s : {MemberStatus::kRunning, MemberStatus::kSucceeded, MemberStatus::kFailed,
                         MemberStatus::kWaiting, MemberStatus::kCancelled}) {
    if (n[s] == 0) continue;
    out += (out.empty() ? "" : ", ") + std::string(ToString(s)) + " " + std::to_string(n[s]);
  }
  return out;
}

Result<std::unique_ptr<ArrayStore>> ArrayStore::Open(const std::string& state_dir) {
  {
    Result<std::unique_ptr<JobStore>> jobs = JobStore::Open(state_dir);
    if (!jobs.ok()) return jobs.status();
  }
  const std::string path = state_dir + "/barge.db";
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr);
  std::unique_ptr<ArrayStore> store(new ArrayStore(db, path));
  if (rc != SQLITE_OK) return store->Error("cannot open");
  sqlite3_busy_timeout(db, static_cast<int>(JobStore::kBusyTimeout.count()));
  if (sqlite3_exec(db, "PRAGMA foreign_keys = ON", nullptr, nullptr, nullptr) != SQLITE_OK ||
      sqlite3_exec(db, kSchema, nullptr, nullptr, nullptr) != SQLITE_OK) {
    return store->Error("cannot create the array tables");
  }
  return store;
}

Result<std::unique_ptr<ArrayStore>> ArrayStore::OpenIfPresent(const std::string& state_dir) {
  std::error_code ec;
  if (!std::filesystem::exists(state_dir + "/barge.db", ec)) return std::unique_ptr<ArrayStore>();
  return Open(state_dir);
}

ArrayStore::~ArrayStore() { sqlite3_close_v2(db_); }

Status ArrayStore::Error(const std::string& what) const {
  return Status::Error(path_ + ": " + what + ": " + (db_ ? sqlite3_errmsg(db_) : "out of memory"));
}

Status ArrayStore::CreateArray(const ArrayRecord& a, const std::vector<MemberRecord>& members) {
  if (sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) != SQLITE_OK) {
    return Error("cannot begin a transaction");
  }
  Stmt st(db_, "INSERT INTO arrays (id, name, status, size, parallel, retries, params_json, created_ms, "
               "ended_ms, exit_code, controller_pid, run_dir) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)");
  st.Bind(1, a.id).Bind(2, a.name).Bind(3, a.status).Bind(4, int64_t{a.size}).Bind(5, int64_t{a.parallel})
      .Bind(6, int64_t{a.retries}).Bind(7, a.params_json).Bind(8, a.created.time_since_epoch().count())
      .Bind(9, Ms(a.ended)).Bind(10, Opt(a.exit_code)).Bind(11, Opt(a.controller_pid)).Bind(12, a.run_dir);
  bool ok = st.Step() == SQLITE_DONE;
  for (const MemberRecord& m : members) {
    if (!ok) break;
    Stmt ins(db_, "INSERT INTO array_members (array_id, idx, params, status, attempts, job_ids, exit_code, "
                  "hosts, started_ms, ended_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)");
    ins.Bind(1, a.id).Bind(2, int64_t{m.index}).Bind(3, m.params).Bind(4, std::string(ToString(m.status)))
        .Bind(5, int64_t{m.attempts}).Bind(6, Join(m.job_ids)).Bind(7, Opt(m.exit_code)).Bind(8, m.hosts)
        .Bind(9, Ms(m.started)).Bind(10, Ms(m.ended));
    ok = ins.Step() == SQLITE_DONE;
  }
  if (!ok) {
    Status s = Error("cannot create array " + a.id);
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    return s;
  }
  if (sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK) return Error("cannot commit");
  return Status::Ok();
}

Status ArrayStore::UpdateArray(const ArrayRecord& a) {
  Stmt st(db_, "UPDATE arrays SET status = ?2, ended_ms = ?3, exit_code = ?4, controller_pid = ?5 WHERE id = ?1");
  st.Bind(1, a.id).Bind(2, a.status).Bind(3, Ms(a.ended)).Bind(4, Opt(a.exit_code)).Bind(5, Opt(a.controller_pid));
  if (st.Step() != SQLITE_DONE) return Error("cannot update array " + a.id);
  return Status::Ok();
}

Status ArrayStore::UpdateMember(const MemberRecord& m) {
  Stmt st(db_, "UPDATE array_members SET status = ?3, attempts = ?4, job_ids = ?5, exit_code = ?6, "
               "hosts = ?7, started_ms = ?8, ended_ms = ?9 WHERE array_id = ?1 AND idx = ?2");
  st.Bind(1, m.array_id).Bind(2, int64_t{m.index}).Bind(3, std::string(ToString(m.status)))
      .Bind(4, int64_t{m.attempts}).Bind(5, Join(m.job_ids)).Bind(6, Opt(m.exit_code)).Bind(7, m.hosts)
      .Bind(8, Ms(m.started)).Bind(9, Ms(m.ended));
  if (st.Step() != SQLITE_DONE) return Error("cannot update member " + std::to_string(m.index) + " of array " + m.array_id);
  return Status::Ok();
}

Result<ArrayRecord> ArrayStore::GetArray(const std::string& id) {
  Stmt st(db_, (std::string("SELECT ") + kArrayColumns + " FROM arrays WHERE id = ?1").c_str());
  st.Bind(1, id);
  int rc = st.Step();
  if (rc == SQLITE_ROW) return ReadArray(st);
  if (rc == SQLITE_DONE) return Status::Error("no array '" + id + "'");
  return Error("cannot read array " + id);
}

Result<std::vector<MemberRecord>> ArrayStore::GetMembers(const std::string& array_id) {
  Stmt st(db_, "SELECT idx, params, status, attempts, job_ids, exit_code, hosts, started_ms, ended_ms "
               "FROM array_members WHERE array_id = ?1 ORDER BY idx");
  st.Bind(1, array_id);
  std::vector<MemberRecord> out;
  int rc;
  while ((rc = st.Step()) == SQLITE_ROW) {
    MemberRecord m;
    m.array_id = array_id;
    m.index = static_cast<int>(st.Int(0));
    m.params = st.Text(1);
    m.status = ParseMemberStatus(st.Text(2));
    m.attempts = static_cast<int>(st.Int(3));
    m.job_ids = Split(st.Text(4));
    if (auto c = st.MaybeInt(5)) m.exit_code = static_cast<int>(*c);
    m.hosts = st.Text(6);
    m.started = Time(st.MaybeInt(7));
    m.ended = Time(st.MaybeInt(8));
    out.push_back(std::move(m));
  }
  if (rc != SQLITE_DONE) return Error("cannot read the members of array " + array_id);
  return out;
}

Result<std::vector<ArrayRecord>> ArrayStore::ListArrays() {
  Stmt st(db_, (std::string("SELECT ") + kArrayColumns + " FROM arrays ORDER BY created_ms DESC, rowid DESC").c_str());
  std::vector<ArrayRecord> out;
  int rc;
  while ((rc = st.Step()) == SQLITE_ROW) out.push_back(ReadArray(st));
  if (rc != SQLITE_DONE) return Error("cannot list arrays");
  return out;
}

Result<std::vector<std::string>> ArrayStore::MemberJobIds() {
  Stmt st(db_, "SELECT job_ids FROM array_members");
  std::vector<std::string> out;
  int rc;
  while ((rc = st.Step()) == SQLITE_ROW) {
    for (std::string& id : Split(st.Text(0))) out.push_back(std::move(id));
  }
  if (rc != SQLITE_DONE) return Error("cannot read the arrays' members");
  return out;
}

Status ArrayStore::RemoveArray(const std::string& id) {
  if (sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) != SQLITE_OK) {
    return Error("cannot begin a transaction");
  }
  bool ok = true;
  for (const char* sql : {"DELETE FROM array_members WHERE array_id = ?1", "DELETE FROM run_requests WHERE job_id = ?1",
                          "DELETE FROM arrays WHERE id = ?1"}) {
    Stmt st(db_, sql);
    st.Bind(1, id);
    ok = ok && st.Step() == SQLITE_DONE;
  }
  const bool removed = ok && sqlite3_changes(db_) > 0;
  if (!removed) {
    Status s = ok ? Status::Error("no array '" + id + "'") : Error("cannot remove array " + id);
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    return s;
  }
  if (sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK) return Error("cannot commit");
  return Status::Ok();
}

Result<std::optional<std::string>> ArrayStore::ResolveArray(const std::string& text) {
  Result<std::vector<ArrayRecord>> all = ListArrays();
  if (!all.ok()) return all.status();
  for (const ArrayRecord& a : *all) {
    if (a.id == text) return std::optional<std::string>(a.id);
  }
  for (const ArrayRecord& a : *all) {  // newest first
    if (a.name == text) return std::optional<std::string>(a.id);
  }
  std::optional<std::string> found;
  for (const ArrayRecord& a : *all) {
    if (!text.empty() && a.id.rfind(text, 0) == 0) {
      if (found) return Status::Error("'" + text + "' matches more than one array");
      found = a.id;
    }
  }
  return found;
}

}  // namespace barge::runner::fleet
