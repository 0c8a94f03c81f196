// The job store: every job barge has run, its nodes, its events, the hosts
// it used and the per-host phase spans, in one embedded SQLite database, STATE/barge.db (mode 0600; STATE is created
// 0700 when missing).
//
// Several barge processes may use the same database at once (a detached
// controller, `barge ls` in another shell, a second job): the database is in
// WAL mode, waits up to 10 s for another writer (busy_timeout), and every
// write is one short BEGIN IMMEDIATE transaction, so a write never fails
// because another process read first and nothing is lost.
//
// Times are stored as INTEGER Unix milliseconds (UTC) in columns named
// *_ms; they sort and compare as numbers and convert to ISO-8601 on output.
//
// Secrets: the store keeps exactly what it is given. It never redacts;
// callers pass a spec (and event details) that hold no secret values.
//
// A controller's pid is kept with its identity (process_identity.h): when
// a record's controller_pid is written (CreateJob, SetControllerPid), the
// store reads that process's boot id, start time and uid from /proc in the
// same call and records them with it. The writer is the live controller
// recording its own pid (getpid()), so the identity is the controller's;
// ControllerAlive (job_lookup.h) later compares it with what has the pid
// then. A JobRecord's controller_identity is what was read back; writes
// ignore it. A pid with no process (a test's dead pid) gets no identity.
//
// Schema versions are PRAGMA user_version; Open applies the missing
// migrations in one transaction and refuses a database newer than this
// binary understands.
#pragma once

#include <array>
#include <chrono>
#include <functional>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/enum_names.h"
#include "base/status.h"
#include "base/time_point.h"
#include "runner/store/process_identity.h"

struct sqlite3;

namespace barge::runner::sql {
class Database;
class Statement;
}  // namespace barge::runner::sql

namespace barge::runner {

TimePoint WallNow();

enum class JobStatus {
  kPreflight,
  kWaiting,  // for hosts other jobs hold (--wait, `wait:`, an array's member)
  kPushing,
  kStarting,
  kRunning,
  kCompleting,
  kSucceeded,
  kFailed,
  kCancelled,
  kTimedOut,
  kLost,
};
// The names the store, `barge jobs --status` and the dashboard use.
inline constexpr auto kJobStatusNames = std::to_array<EnumName<JobStatus>>({
    {JobStatus::kPreflight, "preflight"},
    {JobStatus::kWaiting, "waiting"},
    {JobStatus::kPushing, "pushing"},
    {JobStatus::kStarting, "starting"},
    {JobStatus::kRunning, "running"},
    {JobStatus::kCompleting, "completing"},
    {JobStatus::kSucceeded, "succeeded"},
    {JobStatus::kFailed, "failed"},
    {JobStatus::kCancelled, "cancelled"},
    {JobStatus::kTimedOut, "timed_out"},
    {JobStatus::kLost, "lost"},
});
static_assert(ListsEveryValueInOrder(kJobStatusNames));

// The status's name in kJobStatusNames.
const char* ToString(JobStatus status);
// The inverse of ToString; an error naming the accepted values otherwise.
[[nodiscard]] Result<JobStatus> ParseJobStatus(std::string_view text);
// succeeded, failed, cancelled, timed_out and lost are final: no controller
// acts on the job any more.
bool IsFinal(JobStatus status);

// Event kinds. Free text in the database; these are the ones barge writes.
// SetStatus records an event whose kind is the status's name.
namespace event {
inline constexpr const char* kPreflight = "preflight";
inline constexpr const char* kPushing = "pushing";
inline constexpr const char* kStarting = "starting";
inline constexpr const char* kHeadReady = "head_ready";
inline constexpr const char* kRunning = "running";
inline constexpr const char* kCompleting = "completing";
inline constexpr const char* kTornDown = "torn_down";
inline constexpr const char* kSucceeded = "succeeded";
inline constexpr const char* kFailed = "failed";
inline constexpr const char* kCancelled = "cancelled";
inline constexpr const char* kTimedOut = "timed_out";
inline constexpr const char* kLost = "lost";
inline constexpr const char* kNodeExited = "node_exited";
inline constexpr const char* kHostLost = "host_lost";
inline constexpr const char* kNodeFailed = "node_failed";
inline constexpr const char* kPreempted = "preempted";
// No progress (`progress:`): a hang.
inline constexpr const char* kHang = "hang";
// A rank's steps are slower than the median rank's (progress.stragglers),
// and it keeps up again.
inline constexpr const char* kStraggler = "straggler";
inline constexpr const char* kStragglerCleared = "straggler_cleared";
inline constexpr const char* kRestarting = "restarting";
// A failed job kept for a look before its teardown (`on_failure: {keep: D}`).
inline constexpr const char* kKept = "kept";
// The GPU health gate took GPUs out of what a host offers, or put the host
// out ("the host is out").
inline constexpr const char* kGpuUnhealthy = "gpu_unhealthy";
// A host's failure record (on the host) put it out of the job's choice;
// the detail says why (runner/remote/host_record.h).
inline constexpr const char* kHostAvoided = "host_avoided";
// A failed attempt's diagnostics bundle was kept; the detail is "DIR: WHY"
// (runner/controller/diagnostics.h).
inline constexpr const char* kDiagnostics = "diagnostics";
}  // namespace event

struct JobRecord {
  std::string id;
  std::string name;
  std::string spec;  // the job as run, as the caller gave it (already redacted)
  JobStatus status = JobStatus::kPreflight;
  TimePoint created{};               // `barge run` began
  std::optional<TimePoint> started;  // the first container started
  std::optional<TimePoint> ended;    // the job reached a final status
  std::optional<int> exit_code;      // barge's exit code for the job, once ended
  int restart_count = 0;
  std::optional<int> controller_pid;  // the barge process driving the job
  // That process's identity, as recorded with controller_pid (read only:
  // see the comment at the top); nullopt in a record of an older barge.
  std::optional<ProcessIdentity> controller_identity;
  int nodes = 0;
  std::string run_dir;  // STATE/runs/<id>: logs and artifacts
};

struct NodeRecord {
  std::string job_id;
  int rank = 0;
  std::string role;
  std::string host;
  std::string container_name;
  std::string container_id;  // empty until `docker run` answered
  std::string image_id;
  std::optional<int> exit_code;
  std::string log_path;
};

struct EventRecord {
  int64_t id = 0;  // increases with every event written, across processes
  std::string job_id;
  TimePoint at{};
  std::string kind;
  std::optional<std::string> host;
  std::string detail;
};

// A host the job used, with an id stable for the job's life: a spare that
// takes a lost host's place gets a new id (replaces = the old id).
struct HostRecord {
  std::string job_id;
  int host_id = 0;
  std::string name;     // the user's name for it (address or ~/.ssh/config alias)
  std::string address;  // the address used to reach it / that other nodes are told ("" until known)
  std::optional<int> replaces;
};

// The per-host phases of a job, in the order a host goes through them.
enum class Phase {
  kConnect,
  kLogin,
  kPreflight,
  kPush,
  kUpload,
  kStart,
  kReady,
  kRunning,
  kStop,
  kRemove,
};
// The names the store and the event stream use.
inline constexpr auto kPhaseNames = std::to_array<EnumName<Phase>>({
    {Phase::kConnect, "connect"},
    {Phase::kLogin, "login"},
    {Phase::kPreflight, "preflight"},
    {Phase::kPush, "push"},
    {Phase::kUpload, "upload"},
    {Phase::kStart, "start"},
    {Phase::kReady, "ready"},
    {Phase::kRunning, "running"},
    {Phase::kStop, "stop"},
    {Phase::kRemove, "remove"},
});
static_assert(ListsEveryValueInOrder(kPhaseNames));

// One span of one per-host phase, named as in kPhaseNames (node phases
// carry the node's rank).
struct PhaseRecord {
  int64_t id = 0;  // 0 = not yet written
  std::string job_id;
  int host_id = 0;
  std::string host;  // the host's name, as in HostRecord
  std::optional<int> rank;
  std::string phase;
  TimePoint began{};
  std::optional<TimePoint> ended;
  std::string outcome;  // "" while open; "ok", or what went wrong
  // Node phases: how many GPUs the node was given (0: none); nullopt where
  // barge did not know (`gpus: all` with `health: {gpus: off}`), for host
  // phases, and in rows of a barge before schema version 5.
  std::optional<int> gpus;
};

struct JobFilter {
  std::optional<JobStatus> status;
  std::optional<std::string> name;  // exact
  int limit = 0;                    // 0 = all
};

// Owns one sqlite3 connection. Not thread-safe: one JobStore per thread;
// any number per process or across processes.
class JobStore {
 public:
  // Opens (creating when missing) STATE/barge.db under `state_dir`, brings
  // its schema up to date, and refuses a newer schema.
  [[nodiscard]] static Result<std::unique_ptr<JobStore>> Open(const std::string& state_dir);
  ~JobStore();
  JobStore(const JobStore&) = delete;
  JobStore& operator=(const JobStore&) = delete;

  static constexpr int kSchemaVersion = 5;
  static constexpr std::chrono::milliseconds kBusyTimeout{10000};
  const std::string& path() const { return path_; }

  // Inserts `job` as given (all fields, including status and times, but
  // the controller's identity, read from /proc for job.controller_pid) and
  // a first event of kind ToString(job.status). Fails if the id exists.
  [[nodiscard]] Status CreateJob(const JobRecord& job);

  // Sets the status, and in the same transaction: started = now when the
  // status is starting or running and started is unset; ended = now when
  // the status is final and ended is unset; exit_code when given; and an
  // event of kind ToString(status) with `detail`.
  [[nodiscard]] Status SetStatus(const std::string& id, JobStatus status,
                                 std::optional<int> exit_code = std::nullopt,
                                 const std::string& detail = "");

  // Marks the job lost, only if its status is not final (checked inside the
  // write transaction, so an outcome written meanwhile by its controller
  // wins). ended becomes the time of the job's last event (the last sign of
  // life). Returns whether the job was changed.
  [[nodiscard]] Result<bool> MarkLost(const std::string& id, const std::string& detail);

  // restart_count + 1 and an event of kind "restarting".
  [[nodiscard]] Status NoteRestart(const std::string& id, const std::string& detail);
  // A detached controller takes over the job: `pid` is its own, and its
  // identity is read from /proc and recorded with it.
  [[nodiscard]] Status SetControllerPid(const std::string& id, int pid);

  // `at` defaults to now.
  [[nodiscard]] Status AddEvent(const std::string& id, const std::string& kind,
                                const std::optional<std::string>& host, const std::string& detail,
                                std::optional<TimePoint> at = std::nullopt);

  // Inserts or replaces the node (job_id, rank) with every field of `node`.
  // The job must exist.
  [[nodiscard]] Status UpsertNode(const NodeRecord& node);

  // Inserts or replaces the host (job_id, host_id) with every field of
  // `host`. The job must exist.
  [[nodiscard]] Status UpsertHost(const HostRecord& host);
  // By host_id.
  [[nodiscard]] Result<std::vector<HostRecord>> GetHosts(const std::string& job_id);

  // Writes every record in ONE transaction (the controller batches them: at
  // 1,000 hosts one transaction per phase edge would be too slow). A record
  // with id 0 is inserted (its job must exist); one with an id updates
  // ended and outcome of that row (which must exist). Returns the ids, in
  // order. On any error nothing is written.
  [[nodiscard]] Result<std::vector<int64_t>> WritePhases(const std::vector<PhaseRecord>& records);
  // By began, then id.
  [[nodiscard]] Result<std::vector<PhaseRecord>> GetPhases(const std::string& job_id);

  // Newest first (by created; ties by insertion order).
  [[nodiscard]] Result<std::vector<JobRecord>> ListJobs(const JobFilter& filter = {});
  [[nodiscard]] Result<JobRecord> GetJob(const std::string& id);
  // By rank.
  [[nodiscard]] Result<std::vector<NodeRecord>> GetNodes(const std::string& id);
  // In the order they were written.
  [[nodiscard]] Result<std::vector<EventRecord>> GetEvents(const std::string& id);

  // A job as the user names it, like Docker names containers: the exact
  // id, else the latest job with exactly that name, else the one job whose
  // id starts with `text`. Errors: "no job matches 'x'", "'ab' matches 3
  // jobs: ab12cd34 (train), ...".
  [[nodiscard]] Result<std::string> ResolveJob(const std::string& text);

  // How job `id` was run (a RunRequest as JSON, runner/jobfile/overrides.h);
  // replaces what was there. The job need not exist yet: `barge run`
  // records it before the controller creates the job.
  [[nodiscard]] Status SetRunRequest(const std::string& id, const std::string& request);
  // nullopt for a job recorded without one (before schema version 3).
  [[nodiscard]] Result<std::optional<std::string>> GetRunRequest(const std::string& id);

  // Deletes the job's rows (job, nodes, events, hosts, phases, run
  // request); touches no file.
  [[nodiscard]] Status RemoveJob(const std::string& id);

  // Jobs with a final status that ended before `t`, oldest first.
  [[nodiscard]] Result<std::vector<JobRecord>> JobsEndedBefore(TimePoint t);

 private:
  explicit JobStore(std::unique_ptr<sql::Database> database);
  // "PATH: what: sqlite's message".
  Status Error(const std::string& what) const;
  // Inside a write transaction.
  Status RequireJob(const std::string& id);
  // Every row of `st` (kJobColumns) as a job; `what` names a failure.
  Result<std::vector<JobRecord>> ReadJobs(sql::Statement& st, const std::string& what);
  // `write` in a transaction, after checking that job `id` exists.
  Status WriteForJob(const std::string& id, const std::string& what, const std::function<Status()>& write);
  Status InsertEvent(const std::string& id, const std::string& kind,
                     const std::optional<std::string>& host, const std::string& detail,
                     TimePoint at);

  std::unique_ptr<sql::Database> database_;
  sqlite3* db_;  // database_'s
  std::string path_;
};

}  // namespace barge::runner
