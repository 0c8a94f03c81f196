// Job arrays in the job store's database (STATE/barge.db): one row per
// array and one per member. Each member attempt is an ordinary job of the
// job store (runner/store/job_store.h), listed here by id.
//
// The two tables are created by ArrayStore itself (CREATE TABLE IF NOT
// EXISTS), not by a JobStore schema version: an older barge simply does
// not see them, and the job store's migrations stay untouched. Both stores
// go through the one SQLite wrapper (sqlite.h).
//
// The array's controller pid is kept with its identity as JobStore keeps a
// job's (job_store.h): CreateArray, and UpdateArray when the pid written
// is the writer's own or differs from the recorded one, read the identity
// of that process from /proc and record it (the writer is the array's
// controller recording getpid()). An UpdateArray that writes the recorded
// pid again from another process (marking the array lost) keeps the
// recorded identity. ArrayRecord.controller_identity is what was read
// back; writes ignore it. The identity columns were added after the
// tables were released: Open adds them where missing.
//
// Owns one sqlite3 connection; one ArrayStore per thread; any number across
// processes (WAL, busy timeout, short transactions, as JobStore).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/enum_names.h"
#include "base/status.h"
#include "runner/store/job_store.h"
#include "runner/store/process_identity.h"

struct sqlite3;

namespace barge::runner::sql {
class Database;
}  // namespace barge::runner::sql

namespace barge::runner {

// waiting: not started yet (or to be retried); running; succeeded; failed
// (after its retries); cancelled (down, Ctrl-C, or its controller died
// before it started).
enum class MemberStatus { kWaiting, kRunning, kSucceeded, kFailed, kCancelled };
inline constexpr auto kMemberStatusNames = std::to_array<EnumName<MemberStatus>>(
    {{MemberStatus::kWaiting, "waiting"}, {MemberStatus::kRunning, "running"},
     {MemberStatus::kSucceeded, "succeeded"}, {MemberStatus::kFailed, "failed"},
     {MemberStatus::kCancelled, "cancelled"}});
static_assert(ListsEveryValueInOrder(kMemberStatusNames));
const char* ToString(MemberStatus s);
MemberStatus ParseMemberStatus(const std::string& text);  // unknown → failed

// running, succeeded, failed, cancelled, lost (controller gone).
struct ArrayRecord {
  std::string id;
  std::string name;
  std::string status = "running";
  int size = 0;
  int parallel = 0;
  int retries = 0;
  std::string params_json;  // {"source":..., "columns": [...], "rows": [[...]...]}
  TimePoint created{};
  std::optional<TimePoint> ended;
  std::optional<int> exit_code;
  std::optional<int> controller_pid;
  std::string run_dir;
  // As recorded with controller_pid (read only: see the comment at the
  // top); nullopt in a record of an older barge.
  std::optional<ProcessIdentity> controller_identity;
};

struct MemberRecord {
  std::string array_id;
  int index = 0;
  std::string params;  // "lr=0.1 seed=1"
  MemberStatus status = MemberStatus::kWaiting;
  int attempts = 0;
  std::vector<std::string> job_ids;  // one per attempt, in order
  std::optional<int> exit_code;
  std::string hosts;  // "h1,h2" of the last attempt
  std::optional<TimePoint> started;
  std::optional<TimePoint> ended;
};

class ArrayStore {
 public:
  // Opens STATE/barge.db (through JobStore::Open first, so the file, its
  // mode and the job tables exist) and creates the array tables if missing.
  [[nodiscard]] static Result<std::unique_ptr<ArrayStore>> Open(const std::string& state_dir);
  // Like Open, but nullptr (no error) when STATE holds no database yet.
  [[nodiscard]] static Result<std::unique_ptr<ArrayStore>> OpenIfPresent(const std::string& state_dir);
  ~ArrayStore();
  ArrayStore(const ArrayStore&) = delete;
  ArrayStore& operator=(const ArrayStore&) = delete;

  // Inserts the array and its members (as given), in one transaction.
  [[nodiscard]] Status CreateArray(const ArrayRecord& array, const std::vector<MemberRecord>& members);
  [[nodiscard]] Status UpdateArray(const ArrayRecord& array);
  [[nodiscard]] Status UpdateMember(const MemberRecord& member);
  [[nodiscard]] Result<ArrayRecord> GetArray(const std::string& id);
  // By index.
  [[nodiscard]] Result<std::vector<MemberRecord>> GetMembers(const std::string& array_id);
  // Newest first.
  [[nodiscard]] Result<std::vector<ArrayRecord>> ListArrays();
  // Every member attempt's job id, of every array.
  [[nodiscard]] Result<std::vector<std::string>> MemberJobIds();
  // An array as the user names it: the exact id, the latest of that name,
  // or the one id starting with `text`; nullopt when none matches.
  [[nodiscard]] Result<std::optional<std::string>> ResolveArray(const std::string& text);
  // Deletes the array, its members' rows and its recorded run request, in
  // one transaction (the members' jobs are the job store's: not touched).
  [[nodiscard]] Status RemoveArray(const std::string& id);

 private:
  explicit ArrayStore(std::unique_ptr<sql::Database> database);
  Status Error(const std::string& what) const;
  // The identity columns, where an older barge made the table without them.
  Status AddIdentityColumns();
  std::unique_ptr<sql::Database> database_;
  sqlite3* db_;  // database_'s
};

// The counts of `members` by status, as `barge ls` shows an array:
// "running 2, succeeded 5, failed 1, waiting 4" (statuses with no member
// left out, in that order, cancelled last).
std::string CountsText(const std::vector<MemberRecord>& members);

}  // namespace barge::runner
