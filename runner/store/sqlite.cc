#include "runner/store/sqlite.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

namespace barge::runner::sql {

Statement::Statement(sqlite3* db, const std::string& sql) {
  prepare_rc_ = sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt_, nullptr);
}
Statement::~Statement() { sqlite3_finalize(stmt_); }
bool Statement::prepared() const { return prepare_rc_ == SQLITE_OK; }

Statement& Statement::Bind(int i, const std::string& v) {
  Check(sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
  return *this;
}
Statement& Statement::Bind(int i, int64_t v) {
  Check(sqlite3_bind_int64(stmt_, i, v));
  return *this;
}
Statement& Statement::BindNull(int i) {
  Check(sqlite3_bind_null(stmt_, i));
  return *this;
}

int Statement::Step() {
  if (!prepared()) return prepare_rc_;
  if (bind_rc_ != SQLITE_OK) return bind_rc_;
  return sqlite3_step(stmt_);
}
void Statement::Reset() {
  if (!prepared()) return;
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}
bool Statement::Run() { return Step() == SQLITE_DONE; }

bool Statement::IsNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
int64_t Statement::Int(int col) const { return sqlite3_column_int64(stmt_, col); }
std::string Statement::Text(int col) const {
  const unsigned char* p = sqlite3_column_text(stmt_, col);
  return p ? std::string(reinterpret_cast<const char*>(p), sqlite3_column_bytes(stmt_, col)) : std::string();
}
std::optional<int64_t> Statement::OptInt(int col) const {
  if (IsNull(col)) return std::nullopt;
  return Int(col);
}
std::optional<std::string> Statement::OptText(int col) const {
  if (IsNull(col)) return std::nullopt;
  return Text(col);
}
std::optional<TimePoint> Statement::OptTime(int col) const {
  if (IsNull(col)) return std::nullopt;
  return TimePoint(std::chrono::milliseconds(Int(col)));
}
void Statement::Check(int rc) {
  if (rc != SQLITE_OK && bind_rc_ == SQLITE_OK) bind_rc_ = rc;
}

Transaction::Transaction(sqlite3* db) : db_(db) {
  begun_ = sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK;
}
Transaction::~Transaction() {
  if (begun_ && !committed_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
}
bool Transaction::Commit() {
  committed_ = sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr) == SQLITE_OK;
  return committed_;
}

namespace {

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

}  // namespace

Result<std::unique_ptr<Database>> Database::Open(const std::string& path, bool create,
                                                 std::chrono::milliseconds busy_timeout) {
  if (create) {
    if (Status s = PrepareDbFile(path); !s.ok()) return s;
  }
  sqlite3* db = nullptr;
  const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | (create ? SQLITE_OPEN_CREATE : 0);
  int rc = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
  // From here `database` owns `db`, even when opening failed.
  std::unique_ptr<Database> database(new Database(db, path, busy_timeout));
  if (rc != SQLITE_OK) {
    return Status::Error(path + ": cannot open: " + (db ? sqlite3_errmsg(db) : sqlite3_errstr(rc)));
  }
  if (Status s = database->Configure(); !s.ok()) return s;
  return database;
}

Database::~Database() { sqlite3_close_v2(db_); }

Status Database::Error(const std::string& what) const {
  return Status::Error(path_ + ": " + what + ": " + (db_ ? sqlite3_errmsg(db_) : "out of memory"));
}

bool Database::Exec(const char* sql) { return sqlite3_exec(db_, sql, nullptr, nullptr, nullptr) == SQLITE_OK; }

int Database::Changes() const { return sqlite3_changes(db_); }

Status Database::Configure() {
  sqlite3_extended_result_codes(db_, 1);
  sqlite3_busy_timeout(db_, static_cast<int>(busy_.count()));
  // Switching to WAL takes an exclusive lock once per database.
  std::string mode;
  int rc = RetryWhileBusy(
      [&] {
        Statement wal(db_, "PRAGMA journal_mode = WAL");
        int step = wal.Step();
        if (step == SQLITE_ROW) mode = wal.Text(0);
        return step;
      },
      busy_);
  if (rc != SQLITE_ROW) return Error("cannot enable WAL mode");
  if (mode != "wal") {
    return Status::Error(path_ + ": cannot enable WAL mode (journal mode stays '" + mode + "')");
  }
  // In WAL mode, NORMAL never corrupts the database; a power cut may lose
  // the last transactions, which history can afford.
  if (!Exec("PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON")) {
    return Error("cannot configure the connection");
  }
  return Status::Ok();
}

Status Database::Write(const std::string& what, const std::function<Status()>& write) {
  Transaction tx(db_);
  if (!tx.begun()) return Error("cannot begin a transaction");
  if (Status s = write(); !s.ok()) return s;
  if (!tx.Commit()) return Error("cannot commit " + what);
  return Status::Ok();
}

bool Database::ReadVersion(int* version) {
  int rc = RetryWhileBusy(
      [&] {
        Statement st(db_, "PRAGMA user_version");
        int step = st.Step();
        if (step == SQLITE_ROW) *version = static_cast<int>(st.Int(0));
        return step;
      },
      busy_);
  return rc == SQLITE_ROW;
}

Status Database::Migrate(std::span<const Migration> migrations) {
  const int latest = migrations.empty() ? 0 : migrations.back().version;
  auto too_new = [&](int version) {
    return Status::Error(path_ + " has schema version " + std::to_string(version) +
                         ", newer than this barge understands (" + std::to_string(latest) +
                         "): it was written by a newer barge; use that one, or set BARGE_HOME "
                         "to another directory");
  };
  int version = 0;
  if (!ReadVersion(&version)) return Error("cannot read the schema version");
  if (version == latest) return Status::Ok();
  if (version > latest) return too_new(version);

  Transaction tx(db_);
  if (!tx.begun()) return Error("cannot begin the schema migration");
  // Another process may have migrated between the read and the lock.
  if (!ReadVersion(&version)) return Error("cannot read the schema version");
  if (version > latest) return too_new(version);
  for (const Migration& m : migrations) {
    if (m.version <= version) continue;
    if (!Exec(m.sql)) return Error("schema migration to version " + std::to_string(m.version) + " failed");
  }
  const std::string set = "PRAGMA user_version = " + std::to_string(latest);
  if (!Exec(set.c_str())) return Error("cannot record the schema version");
  if (!tx.Commit()) return Error("cannot commit the schema migration");
  return Status::Ok();
}

}  // namespace barge::runner::sql
