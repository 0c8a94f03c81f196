#include "runner/cli/jobs_cli.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "runner/store/upload_store.h"

namespace barge::runner {
namespace {

namespace fs = std::filesystem;
using std::chrono::days;
using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;

// 2024-05-01T12:00:00Z plus `offset`.
TimePoint At(milliseconds offset = milliseconds(0)) {
  return TimePoint(milliseconds(int64_t{1714564800} * 1000)) + offset;
}

// What a command printed on `out` and `err`, and its exit code.
struct Output {
  int code = -1;
  std::string out;
  std::string err;
};

// A FILE* that collects what is written to it.
class Capture {
 public:
  Capture() : f_(open_memstream(&buf_, &len_)) {}
  ~Capture() {
    if (f_) std::fclose(f_);
    std::free(buf_);
  }
  std::FILE* file() { return f_; }
  std::string Take() {
    std::fclose(f_);
    f_ = nullptr;
    return std::string(buf_, len_);
  }

 private:
  char* buf_ = nullptr;
  size_t len_ = 0;
  std::FILE* f_;
};

template <typename F>
Output RunCommand(F command) {
  Capture out, err;
  Output o;
  o.code = command(out.file(), err.file());
  o.out = out.Take();
  o.err = err.Take();
  return o;
}

// A pid that no process has any more.
int DeadPid() {
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  int status = 0;
  waitpid(pid, &status, 0);
  return pid;
}

void WriteFile(const std::string& path, size_t bytes) {
  std::ofstream f(path, std::ios::binary);
  f << std::string(bytes, 'x');
}

ListOptions Json(std::optional<std::string> status = std::nullopt,
                 std::optional<std::string> name = std::nullopt, int limit = 0) {
  ListOptions o;
  o.status = std::move(status);
  o.name = std::move(name);
  o.limit = limit;
  o.json = true;
  return o;
}

class JobsCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Tables print local time: make it UTC for the expectations below.
    setenv("TZ", "UTC", 1);
    tzset();
    char tmpl[] = "/tmp/barge-cli-test-XXXXXX";
    root_ = mkdtemp(tmpl);
    state_ = root_ + "/state";
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  JobStore& Store() {
    if (!store_) {
      Result<std::unique_ptr<JobStore>> s = JobStore::Open(state_);
      EXPECT_TRUE(s.ok()) << s.status().message();
      store_ = std::move(s).value();
    }
    return *store_;
  }

  // A finished job with a run directory holding `bytes` bytes in two files.
  JobRecord AddFinished(const std::string& id, const std::string& name, TimePoint created,
                        milliseconds ran, JobStatus status, int exit_code, int nodes = 1,
                        size_t bytes = 0) {
    JobRecord j;
    j.id = id;
    j.name = name;
    j.spec = "name: " + name + "\n";
    j.status = status;
    j.created = created;
    j.started = created + seconds(2);
    j.ended = created + ran;
    j.exit_code = exit_code;
    j.controller_pid = DeadPid();
    j.nodes = nodes;
    j.run_dir = state_ + "/runs/" + id;
    EXPECT_TRUE(Store().CreateJob(j).ok());
    fs::create_directories(j.run_dir + "/artifacts/0");
    WriteFile(j.run_dir + "/0-local.log", bytes / 2);
    WriteFile(j.run_dir + "/artifacts/0/model.pt", bytes - bytes / 2);
    return j;
  }

  // A job whose controller is this test process, so it is alive.
  JobRecord AddRunning(const std::string& id, const std::string& name, TimePoint created) {
    JobRecord j;
    j.id = id;
    j.name = name;
    j.status = JobStatus::kRunning;
    j.created = created;
    j.started = created + seconds(1);
    j.controller_pid = getpid();
    j.nodes = 2;
    j.run_dir = state_ + "/runs/" + id;
    EXPECT_TRUE(Store().CreateJob(j).ok());
    fs::create_directories(j.run_dir);
    WriteFile(j.run_dir + "/0-local.log", 10);
    return j;
  }

  Output Ls(ListOptions options = {}) {
    return RunCommand(
        [&](std::FILE* o, std::FILE* e) { return ListJobsCommand(state_, options, o, e); });
  }
  Output Show(const std::string& job, bool json = false) {
    return RunCommand(
        [&](std::FILE* o, std::FILE* e) { return ShowJobCommand(state_, job, json, o, e); });
  }
  Output Rm(const std::string& job) {
    return RunCommand(
        [&](std::FILE* o, std::FILE* e) { return RemoveJobCommand(state_, job, o, e); });
  }
  Output Prune(milliseconds older_than) {
    return RunCommand(
        [&](std::FILE* o, std::FILE* e) { return PruneCommand(state_, older_than, o, e); });
  }

  std::string root_;
  std::string state_;
  std::unique_ptr<JobStore> store_;
};

TEST(JobsCliFormat, Hours) {
  EXPECT_EQ(FormatHours(0), "0");
  EXPECT_EQ(FormatHours(0.25), "0.25");
  EXPECT_EQ(FormatHours(0.0010866), "0.0011");
  EXPECT_EQ(FormatHours(1), "1.00");
  EXPECT_EQ(FormatHours(12.345, true), "12.35*");
  EXPECT_EQ(FormatHours(0, true), "0*");
}

TEST(JobsCliFormat, DurationsBytesAndTimes) {
  EXPECT_EQ(FormatDuration(milliseconds(-5)), "0s");
  EXPECT_EQ(FormatDuration(milliseconds(999)), "0s");
  EXPECT_EQ(FormatDuration(seconds(45)), "45s");
  EXPECT_EQ(FormatDuration(seconds(192)), "3m12s");
  EXPECT_EQ(FormatDuration(minutes(62) + seconds(5)), "1h02m");
  EXPECT_EQ(FormatDuration(days(2) + hours(3) + minutes(59)), "2d03h");
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(1023), "1023 B");
  EXPECT_EQ(FormatBytes(1024), "1.0 KiB");
  EXPECT_EQ(FormatBytes(5 * 1024 * 1024 + 512 * 1024), "5.5 MiB");
  EXPECT_EQ(IsoUtc(At(milliseconds(7))), "2024-05-01T12:00:00.007Z");
  EXPECT_EQ(IsoUtc(TimePoint(milliseconds(0))), "1970-01-01T00:00:00.000Z");
}

TEST_F(JobsCliTest, LsPrintsOneRowPerJobNewestFirstWithEveryColumn) {
  AddFinished("aaaa1111", "train", At(), minutes(62) + seconds(5), JobStatus::kSucceeded, 0, 2);
  AddFinished("bbbb2222", "eval", At(days(1)), seconds(45), JobStatus::kFailed, 1);
  // aaaa1111's node held its host and 2 GPUs for an hour (runner/store/usage.h).
  ASSERT_TRUE(Store()
                  .WritePhases({{0, "aaaa1111", 0, "h1", 0, "start", At(), At(seconds(1)), "ok", 2},
                                {0, "aaaa1111", 0, "h1", std::nullopt, "remove", At(minutes(59)), At(hours(1)), "ok",
                                 std::nullopt}})
                  .ok());
  Output o = Ls();
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(o.err, "");
  EXPECT_EQ(o.out,
            "ID        NAME   STATUS     NODES  STARTED              DURATION  EXIT  HOST-H  GPU-H\n"
            "bbbb2222  eval   failed     1      2024-05-02 12:00:00  45s       1     0       0\n"
            "aaaa1111  train  succeeded  2      2024-05-01 12:00:00  1h02m     0     1.00    2.00\n");
  o = Ls(Json());
  const nlohmann::json ls = nlohmann::json::parse(o.out);
  EXPECT_DOUBLE_EQ(ls[1]["host_hours"].get<double>(), 1.0) << o.out;
  EXPECT_DOUBLE_EQ(ls[1]["gpu_hours"].get<double>(), 2.0) << o.out;
  EXPECT_EQ(ls[1]["gpus_unknown"], false) << o.out;
}

TEST_F(JobsCliTest, LsOfAStateDirWithoutADatabasePrintsTheHeaderAndCreatesNothing) {
  Output o = Ls();
  EXPECT_EQ(o.code, 0);
  EXPECT_EQ(o.out, "ID  NAME  STATUS  NODES  STARTED  DURATION  EXIT  HOST-H  GPU-H\n");
  EXPECT_FALSE(fs::exists(state_));
  o = Ls(Json());
  EXPECT_EQ(o.code, 0);
  EXPECT_EQ(o.out, "[]\n");
}

TEST_F(JobsCliTest, LsFiltersByStatusNameAndLimit) {
  AddFinished("aaaa1111", "train", At(), seconds(1), JobStatus::kSucceeded, 0);
  AddFinished("bbbb2222", "train", At(hours(1)), seconds(1), JobStatus::kFailed, 1);
  AddFinished("cccc3333", "eval", At(hours(2)), seconds(1), JobStatus::kSucceeded, 0);
  AddRunning("dddd4444", "train", At(hours(3)));
  auto ids = [](const Output& o) {
    std::vector<std::string> out;
    for (const auto& j : nlohmann::json::parse(o.out)) out.push_back(j["id"]);
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(ids(Ls(Json())), (V{"dddd4444", "cccc3333", "bbbb2222", "aaaa1111"}));
  EXPECT_EQ(ids(Ls(Json("succeeded"))), (V{"cccc3333", "aaaa1111"}));
  EXPECT_EQ(ids(Ls(Json(std::nullopt, "train"))), (V{"dddd4444", "bbbb2222", "aaaa1111"}));
  EXPECT_EQ(ids(Ls(Json(std::nullopt, "train", 2))), (V{"dddd4444", "bbbb2222"}));
  EXPECT_EQ(ids(Ls(Json("running"))), (V{"dddd4444"}));

  ListOptions table;
  table.status = "done";
  Output bad = Ls(table);
  EXPECT_EQ(bad.code, 125);
  EXPECT_EQ(bad.out, "");
  EXPECT_EQ(bad.err,
            "barge: --status: unknown status 'done' (expected one of: preflight, waiting, pushing, "
            "starting, running, completing, succeeded, failed, cancelled, timed_out, lost)\n");
}

TEST_F(JobsCliTest, LsJsonIsOneArrayOfObjectsWithTheDocumentedFields) {
  AddFinished("aaaa1111", "train", At(milliseconds(250)), seconds(90), JobStatus::kSucceeded, 0, 4);
  AddRunning("bbbb2222", "eval", WallNow() - seconds(30));
  Output o = Ls(Json());
  ASSERT_EQ(o.code, 0) << o.err;
  nlohmann::json array = nlohmann::json::parse(o.out);  // throws (fails the test) if invalid
  ASSERT_TRUE(array.is_array());
  ASSERT_EQ(array.size(), 2u);

  const auto& running = array[0];
  EXPECT_EQ(running["id"], "bbbb2222");
  EXPECT_EQ(running["status"], "running");
  EXPECT_TRUE(running["exit_code"].is_null());
  EXPECT_TRUE(running["ended"].is_null());
  EXPECT_EQ(running["nodes"], 2);
  EXPECT_GE(running["duration_s"].get<double>(), 29.0);
  EXPECT_EQ(running["controller_pid"], getpid());

  const auto& done = array[1];
  EXPECT_EQ(done["id"], "aaaa1111");
  EXPECT_EQ(done["name"], "train");
  EXPECT_EQ(done["status"], "succeeded");
  EXPECT_TRUE(done["exit_code"].is_number_integer());
  EXPECT_EQ(done["exit_code"], 0);
  EXPECT_EQ(done["nodes"], 4);
  EXPECT_EQ(done["created"], "2024-05-01T12:00:00.250Z");
  EXPECT_EQ(done["started"], "2024-05-01T12:00:02.250Z");
  EXPECT_EQ(done["ended"], "2024-05-01T12:01:30.250Z");
  EXPECT_DOUBLE_EQ(done["duration_s"].get<double>(), 90.0);
  EXPECT_EQ(done["restart_count"], 0);
  EXPECT_EQ(done["run_dir"], state_ + "/runs/aaaa1111");
  const std::regex iso(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)");
  for (const auto& job : array) {
    EXPECT_TRUE(std::regex_match(job["created"].get<std::string>(), iso));
  }
}

TEST_F(JobsCliTest, LsShowsAJobWhoseControllerIsGoneAsLost) {
  JobRecord j;
  j.id = "dead0001";
  j.name = "train";
  j.status = JobStatus::kRunning;
  j.created = At();
  j.controller_pid = DeadPid();
  j.nodes = 1;
  ASSERT_TRUE(Store().CreateJob(j).ok());
  ASSERT_TRUE(Store().AddEvent(j.id, event::kHeadReady, std::nullopt, "", At(minutes(3))).ok());
  Output o = Ls();
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(o.out,
            "ID        NAME   STATUS  NODES  STARTED              DURATION  EXIT  HOST-H  GPU-H\n"
            "dead0001  train  lost    1      2024-05-01 12:00:00  3m00s     -     0       0\n");
  Result<std::vector<EventRecord>> events = Store().GetEvents(j.id);
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(events->back().kind, "lost");
  EXPECT_EQ(events->back().detail,
            "its controller (pid " + std::to_string(*j.controller_pid) + ") is gone");
}

TEST_F(JobsCliTest, ShowPrintsTheHeaderTheNodesAndTheEvents) {
  JobRecord j = AddFinished("aaaa1111", "train", At(), minutes(62), JobStatus::kFailed, 1, 2);
  ASSERT_TRUE(Store().UpsertNode({"aaaa1111", 0, "head", "10.0.0.1", "barge-train-aaaa1111-0",
                                  "f00d", "sha256:0123456789abcdef0123", 0,
                                  j.run_dir + "/0-10.0.0.1.log"})
                  .ok());
  ASSERT_TRUE(Store().UpsertNode({"aaaa1111", 1, "worker", "10.0.0.2", "barge-train-aaaa1111-1",
                                  "", "sha256:0123456789abcdef0123", std::nullopt,
                                  j.run_dir + "/1-10.0.0.2.log"})
                  .ok());
  ASSERT_TRUE(Store()
                  .AddEvent("aaaa1111", event::kHostLost, "10.0.0.2", "ssh: timeout\nno keepalive",
                            At(minutes(61) + milliseconds(5)))
                  .ok());
  // Node 0 held its host and 4 GPUs from 12:00:02 to 13:02:00: 3,718 s.
  ASSERT_TRUE(Store()
                  .WritePhases({{0, "aaaa1111", 0, "10.0.0.1", 0, "start", At(seconds(2)), At(seconds(3)), "ok", 4},
                                {0, "aaaa1111", 0, "10.0.0.1", std::nullopt, "remove", At(minutes(61)), At(minutes(62)),
                                 "ok", std::nullopt}})
                  .ok());
  Output o = Show("train");
  ASSERT_EQ(o.code, 0) << o.err;
  const std::string runs = state_ + "/runs/aaaa1111";
  EXPECT_EQ(o.out,
            "job aaaa1111 (train)\n"
            "status:     failed, exit code 1\n"
            "created:    2024-05-01 12:00:00\n"
            "started:    2024-05-01 12:00:02\n"
            "ended:      2024-05-01 13:02:00\n"
            "duration:   1h02m\n"
            "nodes:      2\n"
            "restarts:   0\n"
            "user:       -\n"
            "held:       1.03 host-hours, 4.13 GPU-hours\n"
            "controller: pid " + std::to_string(*j.controller_pid) + "\n"
            "run dir:    " + runs + "\n"
            "\n"
            "RANK  ROLE    HOST      CONTAINER               IMAGE ID      EXIT  LOG\n"
            "0     head    10.0.0.1  barge-train-aaaa1111-0  0123456789ab  0     " + runs +
                "/0-10.0.0.1.log\n"
            "1     worker  10.0.0.2  barge-train-aaaa1111-1  0123456789ab  -     " + runs +
                "/1-10.0.0.2.log\n"
            "\n"
            "TIME                     EVENT      HOST      DETAIL\n"
            "2024-05-01 12:00:00.000  failed     -\n"
            "2024-05-01 13:01:00.005  host_lost  10.0.0.2  ssh: timeout\n"
            "                                              no keepalive\n");
}

TEST_F(JobsCliTest, ShowDiagnosticsListsEachBundleWithWhenWhyAndItsFilesAndTheirSizes) {
  JobRecord j = AddFinished("aaaa1111", "train", At(), minutes(3), JobStatus::kFailed, 125, 2);
  Output none = RunCommand([&](std::FILE* o, std::FILE* e) { return ShowDiagnosticsCommand(state_, "train", false, o, e); });
  ASSERT_EQ(none.code, 0) << none.err;
  EXPECT_EQ(none.out, "job aaaa1111 (train): no diagnostics (a bundle is kept when an attempt fails)\n");
  EXPECT_EQ(Show("train").out.find("diagnostics:"), std::string::npos);

  const std::string diag = j.run_dir + "/diagnostics";
  fs::create_directories(diag + "/attempt-0");
  fs::create_directories(diag + "/attempt-1");
  std::ofstream(diag + "/attempt-0/index.txt") << "diagnostics of job aaaa1111\nwhy: node_failed: rank 1 (h2) exited with code 3\n"
                                                  "at: 2024-05-01T12:01:00.000Z\n";
  WriteFile(diag + "/attempt-0/rank-1-h2.txt", 2048);
  WriteFile(diag + "/attempt-0/rank-0-h1.txt", 10);
  WriteFile(diag + "/attempt-0/host-h1.txt", 300);
  std::ofstream(diag + "/attempt-1/index.txt") << "why: hang: the job made no progress\n";
  Output o = RunCommand([&](std::FILE* out, std::FILE* e) { return ShowDiagnosticsCommand(state_, "train", false, out, e); });
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(o.out,
            "job aaaa1111 (train): 2 diagnostics bundle(s) in " + diag + "\n"
            "\n"
            "attempt 0  " + diag + "/attempt-0\n"
            "  at:  2024-05-01T12:01:00.000Z\n"
            "  why: node_failed: rank 1 (h2) exited with code 3\n"
            "  FILE           SIZE\n"
            "  index.txt      106 B\n"
            "  rank-0-h1.txt  10 B\n"
            "  rank-1-h2.txt  2.0 KiB\n"
            "  host-h1.txt    300 B\n"
            "\n"
            "attempt 1  " + diag + "/attempt-1\n"
            "  why: hang: the job made no progress\n"
            "  FILE       SIZE\n"
            "  index.txt  36 B\n");
  EXPECT_NE(Show("train").out.find("diagnostics: 2 bundle(s) of failed attempts: barge show aaaa1111 --diagnostics\n"),
            std::string::npos);

  Output js = RunCommand([&](std::FILE* out, std::FILE* e) { return ShowDiagnosticsCommand(state_, "aaaa", true, out, e); });
  ASSERT_EQ(js.code, 0) << js.err;
  const nlohmann::json parsed = nlohmann::json::parse(js.out);
  EXPECT_EQ(parsed["job"], "aaaa1111");
  ASSERT_EQ(parsed["bundles"].size(), 2u);
  EXPECT_EQ(parsed["bundles"][0]["attempt"], 0);
  EXPECT_EQ(parsed["bundles"][0]["why"], "node_failed: rank 1 (h2) exited with code 3");
  EXPECT_EQ(parsed["bundles"][0]["files"][2]["path"], diag + "/attempt-0/rank-1-h2.txt");
  EXPECT_EQ(parsed["bundles"][0]["files"][2]["bytes"], 2048);

  Output missing = RunCommand([&](std::FILE* out, std::FILE* e) { return ShowDiagnosticsCommand(state_, "nope", false, out, e); });
  EXPECT_EQ(missing.code, 125);
  EXPECT_NE(missing.err.find("barge: "), std::string::npos) << missing.err;
}

TEST_F(JobsCliTest, ShowJsonHoldsTheJobItsNodesAndItsEvents) {
  AddFinished("aaaa1111", "train", At(), seconds(10), JobStatus::kSucceeded, 0);
  ASSERT_TRUE(Store().UpsertNode({"aaaa1111", 0, "head", "local", "c0", "id0", "sha256:ab", 0,
                                  "/x/0-local.log"})
                  .ok());
  // Bytes that are not UTF-8 do not break the JSON.
  ASSERT_TRUE(Store().AddEvent("aaaa1111", event::kNodeExited, "local", "bad \xff byte").ok());
  Output o = Show("aaaa", /*json=*/true);
  ASSERT_EQ(o.code, 0) << o.err;
  nlohmann::json j = nlohmann::json::parse(o.out);
  EXPECT_EQ(j["job"]["id"], "aaaa1111");
  EXPECT_EQ(j["job"]["spec"], "name: train\n");
  EXPECT_EQ(j["job"]["exit_code"], 0);
  ASSERT_EQ(j["nodes"].size(), 1u);
  EXPECT_EQ(j["nodes"][0]["container_id"], "id0");
  EXPECT_EQ(j["nodes"][0]["log_path"], "/x/0-local.log");
  ASSERT_EQ(j["events"].size(), 2u);
  EXPECT_EQ(j["events"][0]["kind"], "succeeded");
  EXPECT_EQ(j["events"][0]["at"], "2024-05-01T12:00:00.000Z");
  EXPECT_TRUE(j["events"][0]["host"].is_null());
  EXPECT_EQ(j["events"][1]["host"], "local");
  EXPECT_EQ(j["events"][1]["detail"], "bad \xef\xbf\xbd byte");
}

TEST_F(JobsCliTest, ShowListsWhereEachFileWentWithItsSizeChecksumAndOutcome) {
  JobRecord j = AddFinished("aaaa1111", "train", At(), seconds(10), JobStatus::kSucceeded, 0);
  EXPECT_EQ(Show("train").out.find("SENT TO"), std::string::npos);  // none recorded: no table
  Result<std::unique_ptr<UploadStore>> uploads = UploadStore::Open(state_);
  ASSERT_TRUE(uploads.ok()) << uploads.status().message();
  const std::string endpoint = "http://127.0.0.1:9000";
  ASSERT_TRUE((*uploads)
                  ->Record({.job_id = "aaaa1111",
                            .name = "s3://ml/aaaa1111/rank-0/ckpt/model.bin",
                            .endpoint = endpoint,
                            .url = endpoint + "/ml/aaaa1111/rank-0/ckpt/model.bin",
                            .local = j.run_dir + "/artifacts/0/ckpt/model.bin",
                            .state = UploadState::kSent,
                            .size = 25165824,
                            .md5 = "887c9b7f134179475e8ec054ab93597e",
                            .etag = "1f0e2d3c4b5a69788796a5b4c3d2e1f0-3",
                            .part_size = 8 << 20,
                            .parts = 3,
                            .parts_sent = 3,
                            .at = At(seconds(9))})
                  .ok());
  ASSERT_TRUE((*uploads)
                  ->Record({.job_id = "aaaa1111",
                            .name = "s3://ml/aaaa1111/logs/0-local.log",
                            .endpoint = endpoint,
                            .local = j.run_dir + "/0-local.log",
                            .state = UploadState::kFailed,
                            .size = 51,
                            .detail = "s3://ml/aaaa1111/logs/0-local.log at " + endpoint + ": HTTP 403 AccessDenied",
                            .at = At(seconds(9))})
                  .ok());
  ASSERT_TRUE((*uploads)
                  ->Record({.job_id = "aaaa1111",
                            .name = "s3://ml/aaaa1111/rank-0/ckpt/big.bin",
                            .endpoint = endpoint,
                            .local = j.run_dir + "/artifacts/0/ckpt/big.bin",
                            .state = UploadState::kSending,
                            .size = 1 << 30,
                            .upload_id = "up-7",
                            .at = At(seconds(9))})
                  .ok());
  Output o = Show("train");
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find(
                "\nFILE                        SENT TO                                 SIZE      MD5                   "
                "            OUTCOME\n"
                "0-local.log                 s3://ml/aaaa1111/logs/0-local.log       51 B      -                     "
                "            failed: s3://ml/aaaa1111/logs/0-local.log at http://127.0.0.1:9000: HTTP 403 "
                "AccessDenied\n"
                "artifacts/0/ckpt/big.bin    s3://ml/aaaa1111/rank-0/ckpt/big.bin    1.0 GiB   -                     "
                "            interrupted (the job's controller ended while it was sent): its multipart upload up-7 is "
                "kept for a resume\n"
                "artifacts/0/ckpt/model.bin  s3://ml/aaaa1111/rank-0/ckpt/model.bin  24.0 MiB  "
                "887c9b7f134179475e8ec054ab93597e  sent in 3 parts\n\nTIME"),
            std::string::npos)
      << o.out;

  Output js = Show("train", /*json=*/true);
  ASSERT_EQ(js.code, 0) << js.err;
  const nlohmann::json parsed = nlohmann::json::parse(js.out);
  ASSERT_EQ(parsed["uploads"].size(), 3u);
  const nlohmann::json& model = parsed["uploads"][2];
  EXPECT_EQ(model["name"], "s3://ml/aaaa1111/rank-0/ckpt/model.bin");
  EXPECT_EQ(model["url"], endpoint + "/ml/aaaa1111/rank-0/ckpt/model.bin");
  EXPECT_EQ(model["state"], "sent");
  EXPECT_EQ(model["size"], 25165824);
  EXPECT_EQ(model["md5"], "887c9b7f134179475e8ec054ab93597e");
  EXPECT_EQ(model["etag"], "1f0e2d3c4b5a69788796a5b4c3d2e1f0-3");
  EXPECT_EQ(model["parts"], 3);
  EXPECT_TRUE(model["upload_id"].is_null());
  EXPECT_EQ(parsed["uploads"][1]["state"], "interrupted");  // its job ended while it was sent
  EXPECT_EQ(parsed["uploads"][1]["upload_id"], "up-7");
  EXPECT_EQ(parsed["uploads"][0]["state"], "failed");
  EXPECT_EQ(parsed["uploads"][0]["detail"], "s3://ml/aaaa1111/logs/0-local.log at " + endpoint + ": HTTP 403 AccessDenied");
}

TEST_F(JobsCliTest, ShowAndRmSayWhenAJobCannotBeResolved) {
  Output none = Show("train");  // no database at all
  EXPECT_EQ(none.code, 125);
  EXPECT_EQ(none.err, "barge: no job matches 'train'\n");

  AddFinished("ab12cd34", "train", At(), seconds(1), JobStatus::kSucceeded, 0);
  AddFinished("ab99ef00", "eval", At(hours(1)), seconds(1), JobStatus::kSucceeded, 0);
  Output o = Show("zz");
  EXPECT_EQ(o.code, 125);
  EXPECT_EQ(o.out, "");
  EXPECT_EQ(o.err, "barge: no job matches 'zz'\n");
  o = Show("ab");
  EXPECT_EQ(o.code, 125);
  EXPECT_EQ(o.err, "barge: 'ab' matches 2 jobs: ab99ef00 (eval), ab12cd34 (train)\n");
  o = Rm("ab");
  EXPECT_EQ(o.code, 125);
  EXPECT_EQ(o.err, "barge: 'ab' matches 2 jobs: ab99ef00 (eval), ab12cd34 (train)\n");
  EXPECT_TRUE(fs::exists(state_ + "/runs/ab12cd34"));
}

TEST_F(JobsCliTest, RmRefusesAJobWhoseControllerIsRunning) {
  JobRecord j = AddRunning("aaaa1111", "train", At());
  Output o = Rm("train");
  EXPECT_EQ(o.code, 125);
  EXPECT_EQ(o.out, "");
  EXPECT_EQ(o.err, "barge: job aaaa1111 (train) is running and its controller (pid " +
                       std::to_string(getpid()) +
                       ") is alive; stop it first (barge down aaaa1111)\n");
  EXPECT_TRUE(fs::exists(j.run_dir + "/0-local.log"));
  EXPECT_TRUE(Store().GetJob("aaaa1111").ok());
}

TEST_F(JobsCliTest, RmRemovesAFinishedJobsRecordLogsAndArtifacts) {
  JobRecord j = AddFinished("aaaa1111", "train", At(), seconds(1), JobStatus::kSucceeded, 0, 1,
                            3 * 1024);
  AddFinished("bbbb2222", "other", At(), seconds(1), JobStatus::kSucceeded, 0, 1, 10);
  ASSERT_TRUE(fs::exists(j.run_dir + "/artifacts/0/model.pt"));
  Output o = Rm("aaaa");
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(o.out, "removed aaaa1111 (train, succeeded): 3.0 KiB freed\n");
  EXPECT_FALSE(fs::exists(j.run_dir));
  EXPECT_TRUE(fs::exists(state_ + "/runs"));
  EXPECT_TRUE(fs::exists(state_ + "/runs/bbbb2222/0-local.log"));
  EXPECT_FALSE(Store().GetJob("aaaa1111").ok());
  EXPECT_TRUE(Store().GetEvents("aaaa1111")->empty());
  EXPECT_TRUE(Store().GetJob("bbbb2222").ok());
}

TEST_F(JobsCliTest, RmRemovesAJobWhoseControllerDiedAsLost) {
  JobRecord j = AddRunning("aaaa1111", "train", At());
  ASSERT_TRUE(Store().SetControllerPid(j.id, DeadPid()).ok());
  Output o = Rm("aaaa1111");
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(o.out, "removed aaaa1111 (train, lost): 10 B freed\n");
  EXPECT_FALSE(fs::exists(j.run_dir));
  EXPECT_FALSE(Store().GetJob("aaaa1111").ok());
}

TEST_F(JobsCliTest, RmNeverRemovesARunDirOutsideTheStateDir) {
  const std::string elsewhere = root_ + "/precious";
  fs::create_directories(elsewhere);
  WriteFile(elsewhere + "/keep.txt", 5);
  fs::create_directories(state_ + "/runs");
  fs::create_symlink(elsewhere, state_ + "/runs/sneaky");
  for (const std::string& dir : {elsewhere, state_ + "/runs/sneaky", state_ + "/runs/../..",
                                  state_ + "/runs"}) {
    JobRecord j;
    j.id = "aaaa1111";
    j.name = "train";
    j.status = JobStatus::kFailed;
    j.created = At();
    j.ended = At(seconds(1));
    j.run_dir = dir;
    ASSERT_TRUE(Store().CreateJob(j).ok());
    Output o = Rm("aaaa1111");
    EXPECT_EQ(o.code, 0) << o.err;
    EXPECT_EQ(o.out, "removed aaaa1111 (train, failed): 0 B freed\n");
    EXPECT_EQ(o.err, "barge: warning: job aaaa1111: leaving " + dir + " in place: it is not under " +
                         state_ + "/runs\n");
    EXPECT_TRUE(fs::exists(elsewhere + "/keep.txt")) << dir;
    EXPECT_TRUE(fs::exists(state_ + "/runs")) << dir;
  }
}

TEST_F(JobsCliTest, PruneRemovesFinishedJobsThatEndedBeforeTheCutoffOnly) {
  const TimePoint now = WallNow();
  JobRecord old1 = AddFinished("old00001", "train", now - days(45), hours(2),
                               JobStatus::kSucceeded, 0, 1, 2048);
  JobRecord old2 =
      AddFinished("old00002", "eval", now - days(40), minutes(1), JobStatus::kFailed, 1, 1, 1024);
  JobRecord recent =
      AddFinished("new00001", "train", now - days(2), hours(1), JobStatus::kSucceeded, 0, 1, 10);
  JobRecord live = AddRunning("run00001", "train", now - days(60));

  Output o = Prune(days(30));
  EXPECT_EQ(o.code, 0) << o.err;
  const std::string cutoff_day = LocalTime(now - days(30), false).substr(0, 10);
  EXPECT_EQ(o.out.find("removed old00001 (train, succeeded, ended " +
                       LocalTime(*old1.ended, false) + "): 2.0 KiB\n"),
            0u)
      << o.out;
  EXPECT_NE(o.out.find("removed old00002 (eval, failed, ended " + LocalTime(*old2.ended, false) +
                       "): 1.0 KiB\n"),
            std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("pruned 2 job(s) that ended before " + cutoff_day), std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find(": 3.0 KiB freed\n"), std::string::npos) << o.out;
  EXPECT_FALSE(fs::exists(old1.run_dir));
  EXPECT_FALSE(fs::exists(old2.run_dir));
  EXPECT_TRUE(fs::exists(recent.run_dir));
  EXPECT_TRUE(fs::exists(live.run_dir));
  EXPECT_FALSE(Store().GetJob("old00001").ok());
  EXPECT_TRUE(Store().GetJob("new00001").ok());
  EXPECT_TRUE(Store().GetJob("run00001").ok());

  o = Prune(days(30));
  EXPECT_EQ(o.code, 0);
  EXPECT_EQ(o.out.rfind("nothing to prune: no job ended before ", 0), 0u) << o.out;
}

TEST_F(JobsCliTest, PruneTakesJobsWhoseControllerDiedLongAgo) {
  const TimePoint now = WallNow();
  JobRecord j;
  j.id = "dead0001";
  j.name = "train";
  j.status = JobStatus::kRunning;
  j.created = now - days(50);
  j.controller_pid = DeadPid();
  ASSERT_TRUE(Store().CreateJob(j).ok());
  Output o = Prune(days(30));
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("removed dead0001 (train, lost, ended "), std::string::npos) << o.out;
  EXPECT_FALSE(Store().GetJob("dead0001").ok());
}

TEST_F(JobsCliTest, PruneWithoutADatabaseHasNothingToDo) {
  Output o = Prune(days(30));
  EXPECT_EQ(o.code, 0);
  EXPECT_EQ(o.out.rfind("nothing to prune", 0), 0u);
  EXPECT_FALSE(fs::exists(state_));
}

}  // namespace
}  // namespace barge::runner
