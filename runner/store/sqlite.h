// The one SQLite wrapper of barge's state (STATE/barge.db): a connection
// (Database), prepared statements (Statement) and write transactions
// (Transaction), used by the job store and the array store alike.
//
// Not thread-safe: a Database and its statements belong to one thread; any
// number of connections across threads and processes (WAL, a busy timeout,
// short BEGIN IMMEDIATE transactions).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unistd.h>

#include "base/status.h"
#include "base/time_point.h"

struct sqlite3;
struct sqlite3_stmt;

namespace barge::runner::sql {

// One prepared statement; finalized by the destructor. Binding is 1-based,
// reading 0-based, as in SQLite. A failed prepare or bind makes Step fail.
class Statement {
 public:
  Statement(sqlite3* db, const std::string& sql);
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  bool prepared() const;
  Statement& Bind(int i, const std::string& v);
  Statement& Bind(int i, int64_t v);
  Statement& Bind(int i, int v) { return Bind(i, static_cast<int64_t>(v)); }
  Statement& Bind(int i, TimePoint v) { return Bind(i, static_cast<int64_t>(v.time_since_epoch().count())); }
  Statement& BindNull(int i);
  template <typename T>
  Statement& Bind(int i, const std::optional<T>& v) {
    return v ? Bind(i, *v) : BindNull(i);
  }

  // SQLITE_ROW, SQLITE_DONE, or an error code (also a failed prepare or bind).
  int Step();
  // Makes the statement ready to step again with new bindings (a failed
  // bind before stays failed: the batch it belongs to fails).
  void Reset();
  // Steps once; true on SQLITE_DONE.
  bool Run();
  // Steps through every row, calling `row()` on each; returns the last
  // Step's code: SQLITE_DONE (101) after the last row, else the error.
  template <typename F>
  int EachRow(F&& row) {
    int rc;
    while ((rc = Step()) == kRow) row();
    return rc;
  }
  static constexpr int kRow = 100;  // SQLITE_ROW

  bool IsNull(int col) const;
  int64_t Int(int col) const;
  std::string Text(int col) const;
  std::optional<int64_t> OptInt(int col) const;
  std::optional<std::string> OptText(int col) const;
  std::optional<TimePoint> OptTime(int col) const;

 private:
  void Check(int rc);
  sqlite3_stmt* stmt_ = nullptr;
  int prepare_rc_ = 0;
  int bind_rc_ = 0;
};

// A BEGIN IMMEDIATE transaction: takes the write lock at once (waiting up
// to the busy timeout), so no later statement in it can fail with BUSY.
// Rolls back unless committed.
class Transaction {
 public:
  explicit Transaction(sqlite3* db);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  bool begun() const { return begun_; }
  bool Commit();

 private:
  sqlite3* db_;
  bool begun_ = false;
  bool committed_ = false;
};

// A schema step: brings the schema from version - 1 to `version`.
struct Migration {
  int version;
  const char* sql;
};

// One connection to a database file. Owns its sqlite3 handle.
class Database {
 public:
  // Opens `path` (made 0600 first when `create`, else it must exist) in
  // WAL mode with synchronous=NORMAL, foreign keys on and `busy_timeout`.
  [[nodiscard]] static Result<std::unique_ptr<Database>> Open(const std::string& path, bool create,
                                                              std::chrono::milliseconds busy_timeout);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  sqlite3* raw() const { return db_; }
  const std::string& path() const { return path_; }
  // "PATH: what: SQLite's message".
  [[nodiscard]] Status Error(const std::string& what) const;
  // Runs `sql` (statements without results); false on failure (Error says why).
  bool Exec(const char* sql);
  // Rows changed by the last statement.
  int Changes() const;
  // Runs `write` in a transaction (BEGIN IMMEDIATE) and commits it; a
  // failed `write` rolls back and is returned. `what` names it in errors.
  [[nodiscard]] Status Write(const std::string& what, const std::function<Status()>& write);
  // Brings the schema (PRAGMA user_version) up to the last of
  // `migrations` (versions 1..N in order) in one transaction; refuses a
  // database whose version is newer than N.
  [[nodiscard]] Status Migrate(std::span<const Migration> migrations);

 private:
  Database(sqlite3* db, std::string path, std::chrono::milliseconds busy)
      : db_(db), path_(std::move(path)), busy_(busy) {}
  Status Configure();
  bool ReadVersion(int* version);

  sqlite3* db_;
  std::string path_;
  std::chrono::milliseconds busy_;
};

// Calls `attempt` (which returns an SQLite result code) again while it
// fails with SQLITE_BUSY (5), for up to `timeout`. For what SQLite does not
// retry with the busy handler itself: switching a new database to WAL while
// another connection does the same (it would deadlock waiting), and reading
// while another connection recovers the WAL.
template <typename F>
int RetryWhileBusy(F attempt, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int rc = attempt();
    if ((rc & 0xff) != 5 || std::chrono::steady_clock::now() >= deadline) return rc;
    usleep(5000);
  }
}

}  // namespace barge::runner::sql
