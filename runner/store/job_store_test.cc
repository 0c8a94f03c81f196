#include "runner/store/job_store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>

namespace barge::runner {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::seconds;

// A fresh directory, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/barge-store-test-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// 2024-05-01T12:00:00Z plus `offset`.
TimePoint At(milliseconds offset = milliseconds(0)) {
  return TimePoint(milliseconds(int64_t{1714564800} * 1000)) + offset;
}

JobRecord MakeJob(const std::string& id, const std::string& name, TimePoint created) {
  JobRecord j;
  j.id = id;
  j.name = name;
  j.spec = "name: " + name + "\nimage: alpine\n";
  j.status = JobStatus::kPreflight;
  j.created = created;
  j.controller_pid = 4242;
  j.nodes = 2;
  j.run_dir = "/state/runs/" + id;
  return j;
}

std::unique_ptr<JobStore> OpenOrDie(const std::string& dir) {
  Result<std::unique_ptr<JobStore>> store = JobStore::Open(dir);
  EXPECT_TRUE(store.ok()) << store.status().message();
  return store.ok() ? std::move(store).value() : nullptr;
}

int ModeOf(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return -1;
  return st.st_mode & 0777;
}

// Runs `sql` on the database with a connection of its own.
void RawExec(const std::string& db_path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
  char* error = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error), SQLITE_OK)
      << (error ? error : "");
  sqlite3_free(error);
  sqlite3_close(db);
}

int RawUserVersion(const std::string& db_path) {
  sqlite3* db = nullptr;
  if (sqlite3_open(db_path.c_str(), &db) != SQLITE_OK) return -1;
  sqlite3_stmt* st = nullptr;
  int version = -1;
  if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, nullptr) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW) {
    version = sqlite3_column_int(st, 0);
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return version;
}

TEST(JobStatusNames, RoundTripAndUnknownNamesListTheAcceptedOnes) {
  for (JobStatus s : {JobStatus::kPreflight, JobStatus::kPushing, JobStatus::kStarting,
                      JobStatus::kRunning, JobStatus::kCompleting, JobStatus::kSucceeded,
                      JobStatus::kFailed, JobStatus::kCancelled, JobStatus::kTimedOut,
                      JobStatus::kLost}) {
    Result<JobStatus> parsed = ParseJobStatus(ToString(s));
    ASSERT_TRUE(parsed.ok()) << ToString(s);
    EXPECT_EQ(*parsed, s);
  }
  EXPECT_STREQ(ToString(JobStatus::kTimedOut), "timed_out");
  Result<JobStatus> bad = ParseJobStatus("done");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "unknown status 'done' (expected one of: preflight, waiting, pushing, starting, running, "
            "completing, succeeded, failed, cancelled, timed_out, lost)");
  EXPECT_FALSE(IsFinal(JobStatus::kCompleting));
  EXPECT_TRUE(IsFinal(JobStatus::kLost));
}

TEST(JobStore, CreatesItsDatabaseMode0600InAStateDirMode0700) {
  TempDir tmp;
  const std::string state = tmp.path() + "/a/state";
  auto store = OpenOrDie(state);
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->CreateJob(MakeJob("a1b2c3d4", "train", At())).ok());
  EXPECT_EQ(store->path(), state + "/barge.db");
  EXPECT_EQ(ModeOf(state), 0700);
  EXPECT_EQ(ModeOf(tmp.path() + "/a"), 0700);
  EXPECT_EQ(ModeOf(state + "/barge.db"), 0600);
  // SQLite gives its WAL and shared-memory files the database's mode.
  EXPECT_EQ(ModeOf(state + "/barge.db-wal"), 0600);
  EXPECT_EQ(ModeOf(state + "/barge.db-shm"), 0600);
}

TEST(JobStore, TightensADatabaseFileOthersCouldRead) {
  TempDir tmp;
  std::FILE* f = std::fopen((tmp.path() + "/barge.db").c_str(), "w");
  ASSERT_TRUE(f);
  std::fclose(f);
  chmod((tmp.path() + "/barge.db").c_str(), 0644);
  auto store = OpenOrDie(tmp.path());
  ASSERT_TRUE(store);
  EXPECT_EQ(ModeOf(tmp.path() + "/barge.db"), 0600);
}

TEST(JobStore, AJobRoundTripsWithEveryField) {
  TempDir tmp;
  auto store = OpenOrDie(tmp.path());
  ASSERT_TRUE(store);
  JobRecord job = MakeJob("a1b2c3d4", "train", At());
  job.status = JobStatus::kSucceeded;
  job.started = At(seconds(5));
  job.ended = At(hours(1));
  job.exit_code = 3;
  job.restart_count = 2;
  job.spec = "name: train\nenv: {X: \"caf\xc3\xa9\"}\n";
  ASSERT_TRUE(store->CreateJob(job).ok());
  store.reset();

  store = OpenOrDie(tmp.path());  // a second connection sees it all
  ASSERT_TRUE(store);
  Result<JobRecord> got = store->GetJob("a1b2c3d4");
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got->id, job.id);
  EXPECT_EQ(got->name, job.name);
  EXPECT_EQ(got->spec, job.spec);
  EXPECT_EQ(got->status, JobStatus::kSucceeded);
  EXPECT_EQ(got->created, job.created);
  EXPECT_EQ(got->started, job.started);
  EXPECT_EQ(got->ended, job.ended);
  EXPECT_EQ(got->exit_code, 3);
  EXPECT_EQ(got->restart_count, 2);
  EXPECT_EQ(got->controller_pid, 4242);
  EXPECT_EQ(got->nodes, 2);
  EXPECT_EQ(got->run_dir, "/state/runs/a1b2c3d4");

  Result<std::vector<EventRecord>> events = store->GetEvents("a1b2c3d4");
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].kind, "succeeded");
  EXPECT_EQ((*events)[0].at, job.created);
}

TEST(JobStore, ACreatedJobCannotBeCreatedAgain) {
  TempDir tmp;
  auto store = OpenOrDie(tmp.path());
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->CreateJob(MakeJob("a1b2c3d4", "train", At())).ok());
  Status again = store->CreateJob(MakeJob("a1b2c3d4", "other", At()));
  EXPECT_EQ(again.message(), "job a1b2c3d4 already exists");
  Result<std::vector<EventRecord>> events = store->GetEvents("a1b2c3d4");
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(events->size(), 1u);  // the failed insert wrote nothing
}

TEST(JobStore, SetStatusSetsStartedEndedAndExitCodeOnceAndRecordsAnEvent) {
  TempDir tmp;
  auto store = OpenOrDie(tmp.path());
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->CreateJob(MakeJob("j1", "train", At())).ok());
  const TimePoint before = WallNow();
  ASSERT_TRUE(store->SetStatus("j1", JobStatus::kPushing).ok());
  EXPECT_FALSE(store->GetJob("j1")->started);
  ASSERT_TRUE(store->SetStatus("j1", JobStatus::kStarting).ok());
  const TimePoint started = *store->GetJob("j1")->started;
  EXPECT_GE(started, before);
  ASSERT_TRUE(store->SetStatus("j1", JobStatus::kRunning, std::nullopt, "2 nodes").ok());
  EXPECT_EQ(*store->GetJob("j1")->started, started);  // kept
  EXPECT_FALSE(store->GetJob("j1")->ended);
  ASSERT_TRUE(store->SetStatus("j1", JobStatus::kFailed, 1, "worker 1 failed").ok());
  Result<JobRecord> job = store->GetJob("j1");
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->status, JobStatus::kFailed);
  EXPECT_EQ(job->exit_code, 1);
  ASSERT_TRUE(job->ended);
  EXPECT_GE(*job->ended, started);

  Result<std::vector<EventRecord>> events = store->GetEvents("j1");
  ASSERT_TRUE(events.ok());
  std::vector<std::string> kinds;
  for (const auto& e : *events) kinds.push_back(e.kind);
  EXPECT_EQ(kinds, (std::vector<std::string>{"preflight", "pushing", "starting", "running",
                                              "failed"}));
  EXPECT_EQ(events->back().detail, "worker 1 failed");
  EXPECT_EQ((*events)[3].detail, "2 nodes");

  EXPECT_EQ(store->SetStatus("nope", JobStatus::kRunning).message(), "no job 'nope'");
}

TEST(JobStore, EventsKeepTheirOrderTimeHostAndDetail) {
  TempDir tmp;
  auto store = OpenOrDie(tmp.path());
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->CreateJob(MakeJob("j1", "train", At())).ok());
  ASSERT_TRUE(store->AddEvent("j1", event::kHeadReady, std::nullopt, "port 29500 open").ok());
  ASSERT_TRUE(
      store->AddEvent("j1", event::kNodeExited, "10.0.0.2", "rank 1 exited 0", At(seconds(9))).ok());
  ASSERT_TRUE(store->AddEvent("j1", event::kHostLost, "10.0.0.3", "line 1\nline 2").ok());
  Result<std::vector<EventRecord>> events = store->GetEvents("j1");
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 4u);
  EXPECT_EQ((*events)[1].kind, "head_ready");
  EXPECT_FALSE((*events)[1].host);
  EXPECT_EQ((*events)[2].host, "10.0.0.2");
  EXPECT_EQ((*events)[2].at, At(seconds(9)));
  EXPECT_EQ((*events)[3].detail, "line 1\nline 2");
  for (size_t i = 1; i < events->size(); ++i) EXPECT_GT((*events)[i].id, (*events)[i - 1].id);

  EXPECT_EQ(store->AddEvent("nope", event::kLost, std::nullopt, "").message(), "no job 'nope'");
}

TEST(JobStore, NodesRoundTripByRankAndAnUpsertReplacesTheRow) {
  TempDir tmp;
  auto store = OpenOrDie(tmp.path());
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->CreateJob(MakeJob("j1", "train", At())).ok());
  NodeRecord worker{"j1", 1, "worker", "10.0.0.2", "barge-train-j1-1", "", "sha256:bbb",
                    std::nullopt, "/state/runs/j1/1-10.0.0.2.log"};
  NodeRecord head{"j1", 0, "head", "10.0.0.1", "barge-train-j1-0", "", "sha256:aaa",
                  std::nullopt, "/state/runs/j1/0-10.0.0.1.log"};
  ASSERT_TRUE(store->UpsertNode(worker).ok());
  ASSERT_TRUE(store->UpsertNode(head).ok());
  head.container_id = "c0ffee";
  head.exit_code = 0;
  ASSERT_TRUE(store->UpsertNode(head).ok());

  Result<std::vector<NodeRecord>> nodes = store->GetNodes("j1");
  ASSERT_TRUE(nodes.ok());
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[0].rank, 0);
  EXPECT_EQ((*nodes)[0].container_id, "c0ffee");
  EXPECT_EQ((*nodes)[0].exit_code, 0);
  EXPECT_EQ((*nodes)[0].log_path, "/state/runs/j1/0-10.0.0.1.log");
  EXPECT_EQ((*nodes)[1].role, "worker");
  EXPECT_EQ((*nodes)[1].host, "10.0.0.2");
  EXPECT_FALSE((*nodes)[1].exit_code);
  EXPECT_EQ((*nodes)[1].image_id, "sha256:bbb");

  NodeRecord orphan = head;
  orphan.job_id = "nope";
  EXPECT_EQ(store->UpsertNode(orphan).message(), "no job 'nope'");
}

TEST(JobStore, ListsNewestFirstAndFiltersByStatusNameAndLimit) {
  TempDir tmp;
  auto store = OpenOrDie(tmp.path());
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->CreateJob(MakeJob("j2", "train", At(hours(2)))).ok());
  ASSERT_TRUE(store->CreateJob(MakeJob("j1", "train", At(hours(1)))).ok());
  ASSERT_TRUE(store->CreateJob(MakeJob("j4", "eval", At(hours(4)))).ok());
  ASSERT_TRUE(store->CreateJob(MakeJob("j3", "train", At(hours(3)))).ok());
  ASSERT_TRUE(store->CreateJob(MakeJob("j3b", "train", At(hours(3)))).ok());  // same ms: later wins
  ASSERT_TRUE(store->SetStatus("j2", JobStatus::kSucceeded, 0).ok());
  ASSERT_TRUE(store->SetStatus("j4", JobStatus::kSucceeded, 0).ok());

  auto ids = [&](const JobFilter& f) {
    std::vector<std::string> out;
    Result<std::vector<JobRecord>> jobs = store->ListJobs(f);
    EXPECT_TRUE(jobs.ok()) << jobs.status().message();
    if (jobs.ok()) {
      for (const auto& j : *jobs) out.push_back(j.id);
    }
    return out;
  };
  auto filter = [](std::optional<JobStatus> status, std::optional<std::string> name, int limit) {
    JobFilter f;
    f.status = status;
    f.name = name;
    f.limit = limit;
    return f;
  };
  using V = std::vector<std::string>;
  const auto kSucceeded = JobStatus::kSucceeded;
  EXPECT_EQ(ids({}), (V{"j4", "j3b", "j3", "j2", "j1"}));
  EXPECT_EQ(ids(filter(kSucceeded, std::nullopt, 0)), (V{"j4", "j2"}));
  EXPECT_EQ(ids(filter(std::nullopt, "train", 0)), (V{"j3b", "j3", "j2", "j1"}));
  EXPECT_EQ(ids(filter(kSucceeded, "train", 0)), (V{"j2"}));
  EXPECT_EQ(ids(filter(std::nullopt, std::nullopt, 2)), (V{"j4", "j3b"}));
  EXPECT_EQ(ids(filter(std::nullopt, "train", 1)), (V{"j3b"}));
  EXPECT_EQ(ids(filter(std::nullopt, "nope", 0)), V{});
}

TEST(JobStore, ResolvesTheExactIdThenTheLatestNameThenAUniquePrefix) {
  TempDir tmp;
  auto store = OpenOrDie(tmp.path());
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->CreateJob(MakeJob("ab12cd34", "train", At(hours(1)))).ok());
  ASSERT_TRUE(store->CreateJob(MakeJob("ab99ef00", "eval", At(hours(2)))).ok());
  ASSERT_TRUE(store->CreateJob(MakeJob("abfe0011", "train", At(hours(3)))).ok());
  ASSERT_TRUE(store->CreateJob(MakeJob("ffff0000", "ab", At(hours(0)))).ok());
  ASSERT_TRUE(store->CreateJob(MakeJob("c0ffee00", "x", At(hours(4)))).ok());
  ASSERT_TRUE(store->CreateJob(MakeJob("dddd0000", "c0ffee00", At(hours(5)))).ok());

  auto resolve = [&](const std::string& text) {
    Result<std::string> id = store->ResolveJob(text);
    return id.ok() ? *id : "error: " + id.status().message();
  };
  EXPECT_EQ(resolve("ab12cd34"), "ab12cd34");  // exact id
  EXPECT_EQ(resolve("ab12"), "ab12cd34");      // unique prefix
  EXPECT_EQ(resolve("abf"), "abfe0011");
  EXPECT_EQ(resolve("train"), "abfe0011");     // the latest of that name
  EXPECT_EQ(resolve("eval"), "ab99ef00");
  EXPECT_EQ(resolve("ab"), "ffff0000");        // a whole name beats a prefix
  EXPECT_EQ(resolve("c0ffee00"), "c0ffee00");  // an id beats a name
  EXPECT_EQ(resolve("a"),
            "error: 'a' matches 3 jobs: abfe0011 (train), ab99ef00 (eval), ab12cd34 (train)");
  EXPECT_EQ(resolve("zz"), "error: no job matches 'zz'");
  EXPECT_EQ(resolve("trai"), "error: no job matches 'trai'");  // names are never prefixes
  EXPECT_EQ(resolve("%"), "error: no job matches '%'");
  EXPECT_EQ(resolve(""), "error: no job matches '' (give a job id, an id prefix or a name)");
}

TEST(JobStore, AnAmbiguousPrefixNamesAtMostFiveJobs) {
  TempDir tmp;
  auto store = OpenOrDie(tmp.path());
  ASSERT_TRUE(store);
  for (int i = 0; i < 7; ++i) {
    ASSERT_TRUE(store->CreateJob(MakeJob("e" + std::to_string(i), "n", At(hours(i)))).ok());
  }
  Result<std::string> id = store->ResolveJob("e");
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().message(),
            "'e' matches 7 jobs: e6 (n), e5 (n), e4 (n), e3 (n), e2 (n), ...");
}

TEST(JobStore, RecordsItsSchemaVersion) {
  TempDir tmp;
  ASSERT_TRUE(OpenOrDie(tmp.path()));
  EXPECT_EQ(RawUserVersion(tmp.path() + "/barge.db"), JobStore::kSchemaVersion);
  ASSERT_TRUE(OpenOrDie(tmp.path()));  // opening again migrates nothing
  EXPECT_EQ(RawUserVersion(tmp.path() + "/barge.db"), JobStore::kSchemaVersion);
}

// A database written by a barge of schema version 1 (jobs, nodes, events),
// with one job in it.
void WriteVersion1Database(const std::string& db_path) {
  RawExec(db_path, R"sql(
CREATE TABLE jobs (
  id TEXT PRIMARY KEY, name TEXT NOT NULL, spec TEXT NOT NULL DEFAULT '',
  status TEXT NOT NULL, created_ms INTEGER NOT NULL, started_ms INTEGER, ended_ms INTEGER,
  exit_code INTEGER, restart_count INTEGER NOT NULL DEFAULT 0, controller_pid INTEGER,
  nodes INTEGER NOT NULL DEFAULT 0, run_dir TEXT NOT NULL DEFAULT '');
CREATE INDEX jobs_by_created ON jobs (created_ms);
CREATE INDEX jobs_by_name ON jobs (name, created_ms);
CREATE INDEX jobs_by_ended ON jobs (ended_ms);
CREATE TABLE nodes (
  job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE, rank INTEGER NOT NULL,
  role TEXT NOT NULL, host TEXT NOT NULL, container_name TEXT NOT NULL DEFAULT '',
  container_id TEXT NOT NULL DEFAULT '', image_id TEXT NOT NULL DEFAULT '',
  exit_code INTEGER, log_path TEXT NOT NULL DEFAULT '', PRIMARY KEY (job_id, rank));
CREATE TABLE events (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  job_id TEXT NOT NULL REFERENCES jobs (id) ON DELETE CASCADE, at_ms INTEGER NOT NULL,
  kind TEXT NOT NULL, host TEXT, detail TEXT NOT NULL DEFAULT '');
CREATE INDEX events_by_job ON events (job_id, id);
INSERT INTO jobs (id, name, status, created_ms, ended_ms, exit_code, nodes, run_dir)
  VALUES ('old1', 'train', 'succeeded', 1714564800000, 1714564860000, 0, 1, '/s/runs/old1');
INSERT INTO nodes (job_id, rank, role, host) VALUES ('old1', 0, 'head', 'local');
INSERT INTO events (job_id, at_ms, kind) VALUES ('old1', 1714564800000, 'preflight');
INSERT INTO events (job_id, at_ms, kind) VALUES ('old1', 1714564860000, 'succeeded');
PRAGMA user_version = 1;
)sql");
}

TEST(JobStore, MigratesAVersion1DatabaseKeepingItsRows) {
  TempDir tmp;
  const std::string db = tmp.path() + "/barge.db";
  WriteVersion1Database(db);
  ASSERT_EQ(RawUserVersion(db), 1);
  auto store = OpenOrDie(tmp.path());
  ASSERT_TRUE(store);
  EXPECT_EQ(RawUserVersion(db), JobStore::kSchemaVersion);
  Result<JobRecord> job = store->GetJob("old1");
  ASSERT_TRUE(job.ok()) << job.status().message();
  EXPECT_EQ(job->name, "train");
  EXPECT_EQ(job->status, JobStatus::kSucceeded);
  EXPECT_EQ(job->ended, At(seconds(60)));
  EXPECT_EQ(job->exit_code, 0);
  EXPECT_FALSE(job->controller_identity);
  EXPECT_EQ(store->GetNodes("old1")->size(), 1u);
  EXPECT_EQ(store->GetEvents("old1")->size(), 2u);
  // The old job has no hosts or phases; the new tables take rows for it.
  EXPECT_TRUE(store->GetHosts("old1")->empty());
  EXPECT_TRUE(store->GetPhases("old1")->empty());
  ASSERT_TRUE(store->UpsertHost({"old1", 0, "local", "", std::nullopt}).ok());
  ASSERT_TRUE(store->WritePhases({{0, "old1", 0, "local", 0, "running", At(), At(), "ok", std::nullopt}}).ok());
  EXPECT_EQ(store->GetPhases("old1")->size(), 1u);
  // A new job after the migration.
  ASSERT_TRUE(store->CreateJob(MakeJob("new1", "train", At(hours(1)))).ok());
  EXPECT_EQ(store->ListJobs()->size(), 2u);
  ASSERT_TRUE(store->RemoveJob("old1").ok());
  EXPECT_TRUE(store->GetHosts("old1")->empty());
}

TEST(JobStore, RefusesADatabaseFromANewerBarge) {
  TempDir tmp;
  ASSERT_TRUE(OpenOrDie(tmp.path()));
  RawExec(tmp.path() + "/barge.db", "PRAGMA user_version = 99");
  Result<std::unique_ptr<JobStore>> store = JobStore::Open(tmp.path());
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().message(),
            tmp.path() + "/barge.db has schema version 99, newer than this barge understands (" +
                std::to_string(JobStore::kSchemaVersion) +
                "): it was written by a newer barge; use that one, or set BARGE_HOME to another "
                "directory");
}

TEST(JobStore, SaysWhichFileIsNotADatabase) {
  TempDir tmp;
  std::FILE* f = std::fopen((tmp.path() + "/barge.db").c_str(), "w");
  ASSERT_TRUE(f);
  std::fputs("this is not sqlite, just a long enough line of text to fill a header....\n", f);
  std::fclose(f);
  Result<std::unique_ptr<JobStore>> store = JobStore::Open(tmp.path());
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find(tmp.path() + "/barge.db: "), std::string::npos)
      << store.status().message();
  EXPECT_NE(store.status().message().find("not a database"), std::string::npos)
      << store.status().message();
}

TEST(JobStore, MarkLostChangesOnlyAnUnfinishedJobAndEndsItAtItsLastSignOfLife) {
  TempDir tmp;
  auto store = OpenOrDie(tmp.path());
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->CreateJob(MakeJob("j1", "train", At())).ok());
  ASSERT_TRUE(store->AddEvent("j1", event::kRunning, std::nullopt, "", At(seconds(30))).ok());
  Result<bool> changed = store->MarkLost("j1", "its controller (pid 4242) is gone");
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  EXPECT_TRUE(*changed);
  Result<JobRecord> job = store->GetJob("j1");
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->status, JobStatus::kLost);
  EXPECT_EQ(job->ended, At(seconds(30)));
  EXPECT_EQ(store->GetEvents("j1")->back().detail, "its controller (pid 4242) is gone");

  JobRecord done = MakeJob("j2", "train", At());
  done.status = JobStatus::kSucceeded;
  done.ended = At(seconds(5));
  ASSERT_TRUE(store->CreateJob(done).ok());
  changed = store->MarkLost("j2", "gone");
  ASSERT_TRUE(changed.ok());
  EXPECT_FALSE(*changed);
  EXPECT_EQ(store->GetJob("j2")->status, JobStatus::kSucceeded);
  EXPECT_EQ(store->GetEvents("j2")->size(), 1u);
  EXPECT_FALSE(store->MarkLost("nope", "").ok());
}

TEST(JobStore, CountsRestartsAndTakesANewController) {
  TempDir tmp;
  auto store = OpenOrDie(tmp.path());
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->CreateJob(MakeJob("j1", "train", At())).ok());
  ASSERT_TRUE(store->NoteRestart("j1", "host 10.0.0.2 lost").ok());
  ASSERT_TRUE(store->NoteRestart("j1", "preempted").ok());
  ASSERT_TRUE(store->SetControllerPid("j1", 777).ok());
  EXPECT_EQ(store->GetJob("j1")->restart_count, 2);
  EXPECT_EQ(store->GetJob("j1")->controller_pid, 777);
  // The identity is the pid's process's, read as the pid is written.
  ASSERT_TRUE(store->SetControllerPid("j1", getpid()).ok());
  EXPECT_EQ(store->GetJob("j1")->controller_identity, ReadProcessIdentity(getpid()));
  EXPECT_TRUE(store->GetJob("j1")->controller_identity);
  EXPECT_EQ(store->GetEvents("j1")->back().kind, "restarting");
  EXPECT_FALSE(store->NoteRestart("nope", "").ok());
  EXPECT_FALSE(store->SetControllerPid("nope", 1).ok());
}

TEST(JobStore, RemoveJobDeletesItsNodesAndEventsAndNoOtherJobs) {
  TempDir tmp;
  auto store = OpenOrDie(tmp.path());
  ASSERT_TRUE(store);
  for (const char* id : {"j1", "j2"}) {
    ASSERT_TRUE(store->CreateJob(MakeJob(id, "train", At())).ok());
    ASSERT_TRUE(store->UpsertNode({id, 0, "head", "h", "c", "", "", 0, ""}).ok());
    ASSERT_TRUE(store->AddEvent(id, event::kTornDown, std::nullopt, "").ok());
  }
  ASSERT_TRUE(store->RemoveJob("j1").ok());
  EXPECT_FALSE(store->GetJob("j1").ok());
  EXPECT_TRUE(store->GetNodes("j1")->empty());
  EXPECT_TRUE(store->GetEvents("j1")->empty());
  EXPECT_TRUE(store->GetJob("j2").ok());
  EXPECT_EQ(store->GetNodes("j2")->size(), 1u);
  EXPECT_EQ(store->GetEvents("j2")->size(), 2u);
  EXPECT_EQ(store->RemoveJob("j1").message(), "no job 'j1'");
}

TEST(JobStore, RemoveJobDeletesItsHostsAndPhasesAndNoOtherJobs) {
  TempDir tmp;
  auto store = OpenOrDie(tmp.path());
  ASSERT_TRUE(store);
  for (const char* id : {"j1", "j2"}) {
    ASSERT_TRUE(store->CreateJob(MakeJob(id, "train", At())).ok());
    ASSERT_TRUE(store->UpsertHost({id, 0, "h", "10.0.0.1", std::nullopt}).ok());
    ASSERT_TRUE(store->WritePhases({{0, id, 0, "h", 0, "start", At(), At(seconds(1)), "ok", std::nullopt}}).ok());
  }
  ASSERT_TRUE(store->RemoveJob("j1").ok());
  EXPECT_TRUE(store->GetHosts("j1")->empty());
  EXPECT_TRUE(store->GetPhases("j1")->empty());
  EXPECT_EQ(store->GetHosts("j2")->size(), 1u);
  EXPECT_EQ(store->GetPhases("j2")->size(), 1u);
}

TEST(JobStore, HostsRoundTripByIdAndASpareNamesTheHostItReplaces) {
  TempDir tmp;
  auto store = OpenOrDie(tmp.path());
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->CreateJob(MakeJob("j1", "train", At())).ok());
  ASSERT_TRUE(store->UpsertHost({"j1", 1, "gpu-b", "", std::nullopt}).ok());
  ASSERT_TRUE(store->UpsertHost({"j1", 0, "gpu-a", "", std::nullopt}).ok());
  // The address becomes known later: the upsert replaces the row.
  ASSERT_TRUE(store->UpsertHost({"j1", 0, "gpu-a", "10.0.0.1", std::nullopt}).ok());
  ASSERT_TRUE(store->UpsertHost({"j1", 2, "spare-1", "10.0.0.9", 1}).ok());
  Result<std::vector<HostRecord>> hosts = store->GetHosts("j1");
  ASSERT_TRUE(hosts.ok()) << hosts.status().message();
  ASSERT_EQ(hosts->size(), 3u);
  EXPECT_EQ((*hosts)[0].host_id, 0);
  EXPECT_EQ((*hosts)[0].name, "gpu-a");
  EXPECT_EQ((*hosts)[0].address, "10.0.0.1");
  EXPECT_FALSE((*hosts)[0].replaces.has_value());
  EXPECT_EQ((*hosts)[1].name, "gpu-b");
  EXPECT_EQ((*hosts)[1].address, "");
  EXPECT_EQ((*hosts)[2].job_id, "j1");
  EXPECT_EQ((*hosts)[2].name, "spare-1");
  EXPECT_EQ((*hosts)[2].replaces, 1);
  EXPECT_EQ(store->UpsertHost({"nope", 0, "h", "", std::nullopt}).message(), "no job 'nope'");
}

TEST(JobStore, WritePhasesInsertsNewSpansAndClosesOpenOnesByIdInOneBatch) {
  TempDir tmp;
  auto store = OpenOrDie(tmp.path());
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->CreateJob(MakeJob("j1", "train", At())).ok());
  PhaseRecord connect{0, "j1", 0, "gpu-a", std::nullopt, "connect", At(), At(milliseconds(90)),
                      "ok", std::nullopt};
  PhaseRecord start{0, "j1", 0, "gpu-a", 0, "start", At(seconds(2)), std::nullopt, "", 4};
  PhaseRecord start1{0, "j1", 1, "gpu-b", 1, "start", At(seconds(1)), std::nullopt, "", 0};
  Result<std::vector<int64_t>> ids = store->WritePhases({connect, start, start1});
  ASSERT_TRUE(ids.ok()) << ids.status().message();
  ASSERT_EQ(ids->size(), 3u);
  EXPECT_LT((*ids)[0], (*ids)[1]);
  EXPECT_LT((*ids)[1], (*ids)[2]);

  // Close one span and open another in the same batch.
  start.id = (*ids)[1];
  start.ended = At(seconds(3));
  start.outcome = "exit status 125: no such image";
  PhaseRecord stop{0, "j1", 0, "gpu-a", 0, "stop", At(seconds(4)), At(seconds(5)), "ok", std::nullopt};
  Result<std::vector<int64_t>> more = store->WritePhases({start, stop});
  ASSERT_TRUE(more.ok()) << more.status().message();
  EXPECT_EQ((*more)[0], (*ids)[1]);
  EXPECT_GT((*more)[1], (*ids)[2]);

  Result<std::vector<PhaseRecord>> phases = store->GetPhases("j1");
  ASSERT_TRUE(phases.ok()) << phases.status().message();
  ASSERT_EQ(phases->size(), 4u);
  // By began: connect (0 s), gpu-b's start (1 s), gpu-a's start (2 s), stop (4 s).
  EXPECT_EQ((*phases)[0].phase, "connect");
  EXPECT_FALSE((*phases)[0].rank.has_value());
  EXPECT_EQ((*phases)[0].ended, At(milliseconds(90)));
  EXPECT_EQ((*phases)[1].host, "gpu-b");
  EXPECT_EQ((*phases)[1].host_id, 1);
  EXPECT_FALSE((*phases)[1].ended.has_value());
  EXPECT_EQ((*phases)[1].outcome, "");
  EXPECT_EQ((*phases)[2].id, (*ids)[1]);
  EXPECT_EQ((*phases)[2].rank, 0);
  EXPECT_EQ((*phases)[2].began, At(seconds(2)));
  EXPECT_EQ((*phases)[2].ended, At(seconds(3)));
  EXPECT_EQ((*phases)[2].outcome, "exit status 125: no such image");
  // The GPUs a node was given (schema version 5), kept as given: none is not unknown.
  EXPECT_EQ((*phases)[2].gpus, 4);
  EXPECT_EQ((*phases)[1].gpus, 0);
  EXPECT_EQ((*phases)[0].gpus, std::nullopt);
  EXPECT_EQ((*phases)[3].phase, "stop");
  EXPECT_EQ((*phases)[3].job_id, "j1");
  EXPECT_TRUE(store->WritePhases({})->empty());
}

TEST(JobStore, ABatchWithOneBadRecordWritesNothing) {
  TempDir tmp;
  auto store = OpenOrDie(tmp.path());
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->CreateJob(MakeJob("j1", "train", At())).ok());
  PhaseRecord good{0, "j1", 0, "h", 0, "start", At(), std::nullopt, "", std::nullopt};
  PhaseRecord unknown_row{999, "j1", 0, "h", 0, "start", At(), At(seconds(1)), "ok", std::nullopt};
  Result<std::vector<int64_t>> ids = store->WritePhases({good, unknown_row});
  ASSERT_FALSE(ids.ok());
  EXPECT_EQ(ids.status().message(), "no phase row 999 (phase start of host h of job j1)");
  PhaseRecord unknown_job{0, "nope", 0, "h", 0, "start", At(), std::nullopt, "", std::nullopt};
  ids = store->WritePhases({good, unknown_job});
  ASSERT_FALSE(ids.ok());
  EXPECT_EQ(ids.status().message(), "no job 'nope'");
  EXPECT_TRUE(store->GetPhases("j1")->empty());
}

// At 1,000 hosts the controller writes a batch per phase edge of all hosts.
// One transaction for the batch keeps it fast: 2,000 inserts and 2,000
// updates take well under a second even on a slow shared disk (one
// transaction per record would take seconds with fsyncs).
// (How fast such a batch is written is a benchmark's question, not this
// test's: it checks that every row is written, closed and read back.)
TEST(JobStore, ABatchOfTwoThousandPhasesIsWrittenAndClosedWithEveryRowReadBack) {
  TempDir tmp;
  auto store = OpenOrDie(tmp.path());
  ASSERT_TRUE(store);
  ASSERT_TRUE(store->CreateJob(MakeJob("j1", "big", At())).ok());
  std::vector<PhaseRecord> batch;
  for (int h = 0; h < 1000; ++h) {
    for (const char* phase : {"connect", "preflight"}) {
      batch.push_back({0, "j1", h, "host-" + std::to_string(h), std::nullopt, phase,
                       At(milliseconds(h)), std::nullopt, "", std::nullopt});
    }
  }
  Result<std::vector<int64_t>> ids = store->WritePhases(batch);
  ASSERT_TRUE(ids.ok()) << ids.status().message();
  ASSERT_EQ(ids->size(), batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    batch[i].id = (*ids)[i];
    batch[i].ended = At(seconds(2));
    batch[i].outcome = "ok";
  }
  Result<std::vector<int64_t>> closed = store->WritePhases(batch);
  ASSERT_TRUE(closed.ok()) << closed.status().message();
  EXPECT_EQ(*closed, *ids);
  Result<std::vector<PhaseRecord>> phases = store->GetPhases("j1");
  ASSERT_TRUE(phases.ok());
  ASSERT_EQ(phases->size(), 2000u);
  for (const PhaseRecord& p : *phases) {
    ASSERT_EQ(p.outcome, "ok") << p.id;
    ASSERT_EQ(p.ended, At(seconds(2))) << p.id;
  }
}

TEST(JobStore, ARunRequestIsKeptBeforeItsJobExistsAndRemovedWithIt) {
  TempDir tmp;
  auto store = OpenOrDie(tmp.path());
  ASSERT_TRUE(store);
  EXPECT_EQ(*store->GetRunRequest("j1"), std::nullopt);
  ASSERT_TRUE(store->SetRunRequest("j1", R"({"file": "/a.yaml"})").ok());
  ASSERT_TRUE(store->CreateJob(MakeJob("j1", "train", At())).ok());
  ASSERT_TRUE(store->SetRunRequest("j2", "other").ok());
  EXPECT_EQ(*store->GetRunRequest("j1"), std::optional<std::string>(R"({"file": "/a.yaml"})"));
  ASSERT_TRUE(store->RemoveJob("j1").ok());
  EXPECT_EQ(*store->GetRunRequest("j1"), std::nullopt);
  EXPECT_EQ(*store->GetRunRequest("j2"), std::optional<std::string>("other"));
}

TEST(JobStore, AVersionOneDatabaseGainsTheRunRequestTableAndKeepsItsJobs) {
  TempDir tmp;
  {
    auto store = OpenOrDie(tmp.path());
    ASSERT_TRUE(store);
    ASSERT_TRUE(store->CreateJob(MakeJob("old", "train", At())).ok());
  }
  // Back to what version 1 had: no hosts, phases or run_requests tables,
  // no controller identity.
  RawExec(tmp.path() + "/barge.db",
          "DROP TABLE run_requests; DROP TABLE phases; DROP TABLE hosts; "
          "ALTER TABLE jobs DROP COLUMN controller_boot_id; ALTER TABLE jobs DROP COLUMN controller_start_time; "
          "ALTER TABLE jobs DROP COLUMN controller_uid; PRAGMA user_version = 1");
  auto store = OpenOrDie(tmp.path());
  ASSERT_TRUE(store);
  EXPECT_EQ(RawUserVersion(tmp.path() + "/barge.db"), JobStore::kSchemaVersion);
  EXPECT_TRUE(store->GetJob("old").ok());
  EXPECT_EQ(store->GetJob("old")->controller_pid, 4242);
  EXPECT_FALSE(store->GetJob("old")->controller_identity);
  EXPECT_EQ(*store->GetRunRequest("old"), std::nullopt);
  EXPECT_TRUE(store->SetRunRequest("old", "{}").ok());
}

TEST(JobStore, JobsEndedBeforeListsFinishedJobsThatEndedEarlierOldestFirst) {
  TempDir tmp;
  auto store = OpenOrDie(tmp.path());
  ASSERT_TRUE(store);
  auto add = [&](const std::string& id, JobStatus status, std::optional<TimePoint> ended) {
    JobRecord j = MakeJob(id, "n", At());
    j.status = status;
    j.ended = ended;
    ASSERT_TRUE(store->CreateJob(j).ok());
  };
  add("late", JobStatus::kSucceeded, At(hours(10)));
  add("old2", JobStatus::kLost, At(hours(2)));
  add("old1", JobStatus::kFailed, At(hours(1)));
  add("live", JobStatus::kRunning, std::nullopt);
  add("odd", JobStatus::kRunning, At(hours(1)));  // not final: never listed
  Result<std::vector<JobRecord>> jobs = store->JobsEndedBefore(At(hours(5)));
  ASSERT_TRUE(jobs.ok());
  std::vector<std::string> ids;
  for (const auto& j : *jobs) ids.push_back(j.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"old1", "old2"}));
}

// Each child opens the store itself (a fresh database: both race to create
// the schema), then writes kJobs jobs and kEvents events, each in its own
// transaction, while the other does the same.
TEST(JobStore, TwoProcessesWritingAtOnceLoseNothing) {
  TempDir tmp;
  const std::string state = tmp.path() + "/state";
  constexpr int kChildren = 2;
  constexpr int kJobs = 50;
  constexpr int kEventsPerJob = 6;  // 300 events per child

  int go[2];
  ASSERT_EQ(pipe(go), 0);
  std::vector<pid_t> children;
  for (int c = 0; c < kChildren; ++c) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(go[1]);
      char byte;
      (void)!read(go[0], &byte, 1);  // returns at EOF: the parent closed its end
      Result<std::unique_ptr<JobStore>> store = JobStore::Open(state);
      if (!store.ok()) {
        std::fprintf(stderr, "child %d: %s\n", c, store.status().message().c_str());
        _exit(10);
      }
      for (int i = 0; i < kJobs; ++i) {
        const std::string id = "c" + std::to_string(c) + "j" + std::to_string(i);
        Status s = (*store)->CreateJob(MakeJob(id, "child" + std::to_string(c), WallNow()));
        for (int k = 0; s.ok() && k < kEventsPerJob; ++k) {
          s = (*store)->AddEvent(id, event::kNodeExited, "host" + std::to_string(k),
                                 std::to_string(k));
        }
        if (s.ok()) s = (*store)->SetStatus(id, JobStatus::kSucceeded, 0);
        if (!s.ok()) {
          std::fprintf(stderr, "child %d: %s\n", c, s.message().c_str());
          _exit(11);
        }
        usleep(1000);  // let the other process in between jobs, as controllers do
      }
      store->reset();
      _exit(0);
    }
    children.push_back(pid);
  }
  close(go[0]);
  close(go[1]);  // both start now
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
  }

  auto store = OpenOrDie(state);
  ASSERT_TRUE(store);
  Result<std::vector<JobRecord>> jobs = store->ListJobs();
  ASSERT_TRUE(jobs.ok());
  ASSERT_EQ(jobs->size(), size_t{kChildren * kJobs});
  std::set<int64_t> event_ids;
  std::map<std::string, int> per_child;
  for (const JobRecord& j : *jobs) {
    ++per_child[j.name];
    EXPECT_EQ(j.status, JobStatus::kSucceeded) << j.id;
    Result<std::vector<EventRecord>> events = store->GetEvents(j.id);
    ASSERT_TRUE(events.ok());
    // created + kEventsPerJob + succeeded
    ASSERT_EQ(events->size(), size_t{kEventsPerJob + 2}) << j.id;
    for (int k = 0; k < kEventsPerJob; ++k) {
      EXPECT_EQ((*events)[k + 1].detail, std::to_string(k));
    }
    for (const auto& e : *events) event_ids.insert(e.id);
  }
  EXPECT_EQ(per_child["child0"], kJobs);
  EXPECT_EQ(per_child["child1"], kJobs);
  EXPECT_EQ(event_ids.size(), size_t{kChildren * kJobs * (kEventsPerJob + 2)});
}

}  // namespace
}  // namespace barge::runner
