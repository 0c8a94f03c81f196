// The array and member tables of STATE/barge.db.
#include "runner/store/array_store.h"

#include <sqlite3.h>

#include "runner/store/sqlite.h"

#include <unistd.h>

#include <filesystem>
#include <map>
#include <sstream>

namespace barge::runner {
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

// Added after the tables were released: the identity of the process that
// controller_pid named when it was written (process_identity.h). Added by
// Open where missing; NULL in rows of an older barge.
constexpr const char* kIdentityColumns[] = {"controller_boot_id TEXT", "controller_start_time INTEGER",
                                            "controller_uid INTEGER"};

using sql::Statement;


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
    "controller_pid, run_dir, controller_boot_id, controller_start_time, controller_uid";

ArrayRecord ReadArray(const Statement& st) {
  ArrayRecord a;
  a.id = st.Text(0);
  a.name = st.Text(1);
  a.status = st.Text(2);
  a.size = static_cast<int>(st.Int(3));
  a.parallel = static_cast<int>(st.Int(4));
  a.retries = static_cast<int>(st.Int(5));
  a.params_json = st.Text(6);
  a.created = TimePoint(std::chrono::milliseconds(st.Int(7)));
  a.ended = st.OptTime(8);
  if (auto c = st.OptInt(9)) a.exit_code = static_cast<int>(*c);
  if (auto p = st.OptInt(10)) a.controller_pid = static_cast<int>(*p);
  a.run_dir = st.Text(11);
  a.controller_identity = ReadIdentity(st, 12);
  return a;
}

// Whether table `arrays` has column `name`.
bool HasArraysColumn(sqlite3* db, const std::string& name) {
  Statement st(db, "SELECT 1 FROM pragma_table_info('arrays') WHERE name = ?1");
  st.Bind(1, name);
  return st.Step() == SQLITE_ROW;
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
  Result<std::unique_ptr<sql::Database>> db =
      sql::Database::Open(state_dir + "/barge.db", /*create=*/false, JobStore::kBusyTimeout);
  if (!db.ok()) return db.status();
  std::unique_ptr<ArrayStore> store(new ArrayStore(std::move(db).value()));
  if (!store->database_->Exec(kSchema)) return store->Error("cannot create the array tables");
  if (Status s = store->AddIdentityColumns(); !s.ok()) return s;
  return store;
}

Status ArrayStore::AddIdentityColumns() {
  if (HasArraysColumn(db_, "controller_uid")) return Status::Ok();
  // Checked again under the write lock: another process may add them first.
  return database_->Write("the array tables", [&]() -> Status {
    for (const char* column : kIdentityColumns) {
      const std::string name(column, std::string_view(column).find(' '));
      if (HasArraysColumn(db_, name)) continue;
      const std::string alter = "ALTER TABLE arrays ADD COLUMN " + std::string(column);
      if (!database_->Exec(alter.c_str())) return Error("cannot add column " + name + " to the array table");
    }
    return Status::Ok();
  });
}

ArrayStore::ArrayStore(std::unique_ptr<sql::Database> database)
    : database_(std::move(database)), db_(database_->raw()) {}

Result<std::unique_ptr<ArrayStore>> ArrayStore::OpenIfPresent(const std::string& state_dir) {
  std::error_code ec;
  if (!std::filesystem::exists(state_dir + "/barge.db", ec)) return std::unique_ptr<ArrayStore>();
  return Open(state_dir);
}

ArrayStore::~ArrayStore() = default;

Status ArrayStore::Error(const std::string& what) const { return database_->Error(what); }

Status ArrayStore::CreateArray(const ArrayRecord& a, const std::vector<MemberRecord>& members) {
  return database_->Write("array " + a.id, [&]() -> Status {
    Statement st(db_, "INSERT INTO arrays (id, name, status, size, parallel, retries, params_json, created_ms, "
                      "ended_ms, exit_code, controller_pid, run_dir, controller_boot_id, controller_start_time, "
                      "controller_uid) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)");
    st.Bind(1, a.id).Bind(2, a.name).Bind(3, a.status).Bind(4, a.size).Bind(5, a.parallel).Bind(6, a.retries)
        .Bind(7, a.params_json).Bind(8, a.created).Bind(9, a.ended).Bind(10, a.exit_code)
        .Bind(11, a.controller_pid).Bind(12, a.run_dir);
    BindIdentity(st, 13, a.controller_pid ? ReadProcessIdentity(*a.controller_pid) : std::nullopt);
    if (!st.Run()) return Error("cannot create array " + a.id);
    for (const MemberRecord& m : members) {
      Statement ins(db_, "INSERT INTO array_members (array_id, idx, params, status, attempts, job_ids, exit_code, "
                         "hosts, started_ms, ended_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)");
      ins.Bind(1, a.id).Bind(2, m.index).Bind(3, m.params).Bind(4, std::string(ToString(m.status)))
          .Bind(5, m.attempts).Bind(6, Join(m.job_ids)).Bind(7, m.exit_code).Bind(8, m.hosts)
          .Bind(9, m.started).Bind(10, m.ended);
      if (!ins.Run()) return Error("cannot create array " + a.id);
    }
    return Status::Ok();
  });
}

Status ArrayStore::UpdateArray(const ArrayRecord& a) {
  // The identity is read again when the writer records its own pid or the
  // pid changes; otherwise (marking an array lost) the recorded one stays.
  const bool own = a.controller_pid == static_cast<int>(getpid());
  Statement st(db_, R"sql(
      UPDATE arrays SET status = ?2, ended_ms = ?3, exit_code = ?4,
        controller_boot_id = CASE WHEN ?9 OR controller_pid IS NOT ?5 THEN ?6 ELSE controller_boot_id END,
        controller_start_time = CASE WHEN ?9 OR controller_pid IS NOT ?5 THEN ?7 ELSE controller_start_time END,
        controller_uid = CASE WHEN ?9 OR controller_pid IS NOT ?5 THEN ?8 ELSE controller_uid END,
        controller_pid = ?5
      WHERE id = ?1)sql");
  st.Bind(1, a.id).Bind(2, a.status).Bind(3, a.ended).Bind(4, a.exit_code).Bind(5, a.controller_pid);
  BindIdentity(st, 6, a.controller_pid ? ReadProcessIdentity(*a.controller_pid) : std::nullopt);
  st.Bind(9, int64_t{own});
  if (!st.Run()) return Error("cannot update array " + a.id);
  return Status::Ok();
}

Status ArrayStore::UpdateMember(const MemberRecord& m) {
  Statement st(db_, "UPDATE array_members SET status = ?3, attempts = ?4, job_ids = ?5, exit_code = ?6, "
                    "hosts = ?7, started_ms = ?8, ended_ms = ?9 WHERE array_id = ?1 AND idx = ?2");
  st.Bind(1, m.array_id).Bind(2, m.index).Bind(3, std::string(ToString(m.status))).Bind(4, m.attempts)
      .Bind(5, Join(m.job_ids)).Bind(6, m.exit_code).Bind(7, m.hosts).Bind(8, m.started).Bind(9, m.ended);
  if (!st.Run()) return Error("cannot update member " + std::to_string(m.index) + " of array " + m.array_id);
  return Status::Ok();
}

Result<ArrayRecord> ArrayStore::GetArray(const std::string& id) {
  Statement st(db_, std::string("SELECT ") + kArrayColumns + " FROM arrays WHERE id = ?1");
  st.Bind(1, id);
  int rc = st.Step();
  if (rc == SQLITE_ROW) return ReadArray(st);
  if (rc == SQLITE_DONE) return Status::Error("no array '" + id + "'");
  return Error("cannot read array " + id);
}

Result<std::vector<MemberRecord>> ArrayStore::GetMembers(const std::string& array_id) {
  Statement st(db_, "SELECT idx, params, status, attempts, job_ids, exit_code, hosts, started_ms, ended_ms "
               "FROM array_members WHERE array_id = ?1 ORDER BY idx");
  st.Bind(1, array_id);
  std::vector<MemberRecord> out;
  int rc = st.EachRow([&] {
    MemberRecord m;
    m.array_id = array_id;
    m.index = static_cast<int>(st.Int(0));
    m.params = st.Text(1);
    m.status = ParseMemberStatus(st.Text(2));
    m.attempts = static_cast<int>(st.Int(3));
    m.job_ids = Split(st.Text(4));
    if (auto c = st.OptInt(5)) m.exit_code = static_cast<int>(*c);
    m.hosts = st.Text(6);
    m.started = st.OptTime(7);
    m.ended = st.OptTime(8);
    out.push_back(std::move(m));
  });
  if (rc != SQLITE_DONE) return Error("cannot read the members of array " + array_id);
  return out;
}

Result<std::vector<ArrayRecord>> ArrayStore::ListArrays() {
  Statement st(db_, std::string("SELECT ") + kArrayColumns + " FROM arrays ORDER BY created_ms DESC, rowid DESC");
  std::vector<ArrayRecord> out;
  int rc = st.EachRow([&] { out.push_back(ReadArray(st)); });
  if (rc != SQLITE_DONE) return Error("cannot list arrays");
  return out;
}

Result<std::vector<std::string>> ArrayStore::MemberJobIds() {
  Statement st(db_, "SELECT job_ids FROM array_members");
  std::vector<std::string> out;
  int rc = st.EachRow([&] {
    for (std::string& id : Split(st.Text(0))) out.push_back(std::move(id));
  });
  if (rc != SQLITE_DONE) return Error("cannot read the arrays' members");
  return out;
}

Status ArrayStore::RemoveArray(const std::string& id) {
  return database_->Write("the removal of array " + id, [&]() -> Status {
    for (const char* sql : {"DELETE FROM array_members WHERE array_id = ?1", "DELETE FROM run_requests WHERE job_id = ?1",
                            "DELETE FROM arrays WHERE id = ?1"}) {
      Statement st(db_, sql);
      st.Bind(1, id);
      if (!st.Run()) return Error("cannot remove array " + id);
    }
    if (database_->Changes() == 0) return Status::Error("no array '" + id + "'");
    return Status::Ok();
  });
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

}  // namespace barge::runner
