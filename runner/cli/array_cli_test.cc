// The array verbs over a store made by hand (no job runs): ls --json and
// show --json, rm ARRAY, prune, and members left running by a killed array
// controller.
#include "runner/cli/array_cli.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <nlohmann/json.hpp>

#include "runner/store/array_store.h"
#include "runner/store/job_store.h"

namespace barge::runner {
namespace {

namespace fs = std::filesystem;
using std::chrono::hours;
using std::chrono::seconds;

int DeadPid() {
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  int status = 0;
  waitpid(pid, &status, 0);
  return pid;
}

struct Captured {
  int code = 0;
  std::string out, err;
};

template <typename F>
Captured Capture(F f) {
  std::FILE* out = std::tmpfile();
  std::FILE* err = std::tmpfile();
  Captured c;
  c.code = f(out, err);
  for (auto [file, text] : {std::pair{out, &c.out}, std::pair{err, &c.err}}) {
    std::rewind(file);
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, file)) > 0;) text->append(buf, n);
    std::fclose(file);
  }
  return c;
}

class ArrayCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/barge-array-cli-test-XXXXXX";
    root_ = mkdtemp(tmpl);
    state_ = root_ + "/state";
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  // A job of the job store with a run directory holding a log file; its
  // controller is this process when `live`, else a dead one.
  void AddJob(const std::string& id, JobStatus status, TimePoint created, bool live = false) {
    Result<std::unique_ptr<JobStore>> store = JobStore::Open(state_);
    ASSERT_TRUE(store.ok());
    JobRecord j;
    j.id = id;
    j.name = "sweep-" + id;
    j.spec = "name: sweep\n";
    j.status = status;
    j.created = created;
    j.started = created + seconds(1);
    if (IsFinal(status)) {
      j.ended = created + seconds(5);
      j.exit_code = status == JobStatus::kSucceeded ? 0 : 3;
    }
    j.controller_pid = live ? getpid() : DeadPid();
    j.nodes = 1;
    j.run_dir = state_ + "/runs/" + id;
    ASSERT_TRUE((*store)->CreateJob(j).ok());
    fs::create_directories(j.run_dir);
    std::ofstream(j.run_dir + "/0-local.log") << "line\n";
  }

  // An array of two members (rows lr=0.1 and lr=0.2 of params.csv) whose
  // attempts are `jobs0` and `jobs1`.
  void AddArray(const std::string& id, const std::string& status, TimePoint created, std::optional<TimePoint> ended,
                bool live_controller, std::vector<std::string> jobs0, std::vector<std::string> jobs1,
                MemberStatus s0, MemberStatus s1) {
    Result<std::unique_ptr<ArrayStore>> store = ArrayStore::Open(state_);
    ASSERT_TRUE(store.ok());
    array::ArrayParams params;
    params.columns = {"lr"};
    params.rows = {{"0.1"}, {"0.2"}};
    params.source = "params.csv";
    ArrayRecord a;
    a.id = id;
    a.name = "sweep";
    a.status = status;
    a.size = 2;
    a.parallel = 1;
    a.params_json = array::ParamsToJson(params);
    a.created = created;
    a.ended = ended;
    a.controller_pid = live_controller ? getpid() : DeadPid();
    a.run_dir = state_ + "/runs/" + id;
    std::vector<MemberRecord> members(2);
    for (int i = 0; i < 2; ++i) {
      members[i].array_id = id;
      members[i].index = i;
      members[i].params = "lr=" + params.rows[i][0];
      members[i].job_ids = i == 0 ? jobs0 : jobs1;
      members[i].attempts = static_cast<int>(members[i].job_ids.size());
      members[i].status = i == 0 ? s0 : s1;
    }
    ASSERT_TRUE((*store)->CreateArray(a, members).ok());
    fs::create_directories(a.run_dir);
    std::ofstream(a.run_dir + "/controller.log") << "controller\n";
    Result<std::unique_ptr<JobStore>> jobs = JobStore::Open(state_);
    ASSERT_TRUE((*jobs)->SetRunRequest(id, "{}").ok());
  }

  nlohmann::json LsJson() {
    Captured c = Capture([&](std::FILE* out, std::FILE* err) {
      ListOptions list;
      list.json = true;
      if (!AddArraysToList(state_, &list).ok()) return 99;
      return ListJobsCommand(state_, list, out, err);
    });
    EXPECT_EQ(c.code, 0) << c.err;
    return nlohmann::json::parse(c.out);
  }

  bool JobExists(const std::string& id) {
    Result<std::unique_ptr<JobStore>> store = JobStore::Open(state_);
    return store.ok() && (*store)->GetJob(id).ok();
  }

  std::string root_;
  std::string state_;
};

TEST_F(ArrayCliTest, LsJsonShowsTheArrayWithSourceCountsAndMemberJobIdsAmongUnchangedJobObjects) {
  const TimePoint t0 = WallNow() - hours(1);
  AddJob("solo", JobStatus::kSucceeded, t0);
  AddJob("m0", JobStatus::kSucceeded, t0 + seconds(10));
  AddJob("m1a", JobStatus::kFailed, t0 + seconds(11));
  AddJob("m1b", JobStatus::kFailed, t0 + seconds(12));
  AddArray("arr", "failed", t0 + seconds(10), t0 + seconds(20), false, {"m0"}, {"m1a", "m1b"},
           MemberStatus::kSucceeded, MemberStatus::kFailed);
  nlohmann::json ls = LsJson();
  ASSERT_TRUE(ls.is_array());
  ASSERT_EQ(ls.size(), 2u) << ls.dump(2);  // the members are not listed one by one
  const nlohmann::json& a = ls[0];          // newest first
  EXPECT_EQ(a["kind"], "array");
  EXPECT_EQ(a["id"], "arr");
  EXPECT_EQ(a["status"], "failed");
  EXPECT_EQ(a["source"], "params.csv");
  EXPECT_EQ(a["counts"]["succeeded"], 1);
  EXPECT_EQ(a["counts"]["failed"], 1);
  EXPECT_EQ(a["counts"]["running"], 0);
  ASSERT_EQ(a["members"].size(), 2u);
  EXPECT_EQ(a["members"][1]["job_ids"], (nlohmann::json{"m1a", "m1b"}));
  EXPECT_EQ(a["members"][1]["job"], "m1b");
  EXPECT_EQ(a["members"][0]["params"], "lr=0.1");
  // The job's object has exactly the fields ls gives a job.
  const nlohmann::json& j = ls[1];
  EXPECT_EQ(j["id"], "solo");
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(keys, (std::vector<std::string>{"controller_pid", "created", "duration_s", "ended", "exit_code",
                                            "gpu_hours", "gpus_unknown", "host_hours", "id", "name", "nodes",
                                            "restart_count", "run_dir", "started", "status"}));

  Captured show = Capture([&](std::FILE* out, std::FILE*) { return ShowArray(state_, "arr", out, true); });
  ASSERT_EQ(show.code, 0);
  nlohmann::json shown = nlohmann::json::parse(show.out);
  EXPECT_EQ(shown["id"], "arr");
  EXPECT_EQ(shown["members"][0]["job"], "m0");
}

TEST_F(ArrayCliTest, RmRefusesWhileTheControllerOrAMemberRunsAndThenRemovesMembersLogsAndRecords) {
  const TimePoint t0 = WallNow() - hours(1);
  AddJob("m0", JobStatus::kSucceeded, t0);
  AddJob("m1", JobStatus::kRunning, t0, /*live=*/true);
  AddArray("live", "running", t0, std::nullopt, /*live_controller=*/true, {"m0"}, {"m1"}, MemberStatus::kSucceeded,
           MemberStatus::kRunning);
  Captured refused = Capture([&](std::FILE* out, std::FILE* err) { return RemoveArrayCommand(state_, "live", out, err); });
  EXPECT_EQ(refused.code, 125);
  EXPECT_TRUE(JobExists("m0"));

  // Its controller gone (lost), member 1 still running as its own process.
  AddJob("n0", JobStatus::kSucceeded, t0);
  AddJob("n1", JobStatus::kRunning, t0, /*live=*/true);
  AddArray("orphan", "running", t0, std::nullopt, /*live_controller=*/false, {"n0"}, {"n1"},
           MemberStatus::kSucceeded, MemberStatus::kRunning);
  ::testing::internal::CaptureStderr();
  Captured member_runs =
      Capture([&](std::FILE* out, std::FILE* err) { return RemoveArrayCommand(state_, "orphan", out, err); });
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(member_runs.code, 125);
  EXPECT_NE(said.find("member 1 (job n1) is running"), std::string::npos) << said;
  EXPECT_NE(said.find("barge down orphan"), std::string::npos) << said;
  EXPECT_TRUE(JobExists("n0"));
  EXPECT_TRUE(fs::exists(state_ + "/runs/n0"));

  // Member 1's job ends: rm removes both member jobs, their files, the
  // controller's directory and the array.
  {
    Result<std::unique_ptr<JobStore>> store = JobStore::Open(state_);
    ASSERT_TRUE((*store)->SetStatus("n1", JobStatus::kSucceeded, 0).ok());
  }
  Captured removed = Capture([&](std::FILE* out, std::FILE* err) { return RemoveArrayCommand(state_, "orphan", out, err); });
  EXPECT_EQ(removed.code, 0) << removed.err;
  EXPECT_NE(removed.out.find("removed array orphan (sweep, lost) and its 2 member job(s)"), std::string::npos)
      << removed.out;
  EXPECT_FALSE(JobExists("n0"));
  EXPECT_FALSE(JobExists("n1"));
  EXPECT_FALSE(fs::exists(state_ + "/runs/n0"));
  EXPECT_FALSE(fs::exists(state_ + "/runs/orphan"));
  Result<std::optional<std::string>> found = FindArray(state_, "orphan");
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(*found, std::nullopt);
  // The other array is untouched.
  EXPECT_EQ(*FindArray(state_, "live"), std::optional<std::string>("live"));
}

TEST_F(ArrayCliTest, AMemberLeftRunningByAKilledControllerTakesItsJobsOutcomeOnceThatJobEnds) {
  const TimePoint t0 = WallNow() - hours(1);
  AddJob("k0", JobStatus::kRunning, t0, /*live=*/true);
  AddJob("k1", JobStatus::kRunning, t0, /*live=*/true);
  AddArray("killed", "running", t0, std::nullopt, /*live_controller=*/false, {"k0"}, {"k1"}, MemberStatus::kRunning,
           MemberStatus::kRunning);
  {
    Result<std::unique_ptr<JobStore>> store = JobStore::Open(state_);
    ASSERT_TRUE((*store)->SetStatus("k0", JobStatus::kSucceeded, 0).ok());
  }
  nlohmann::json a = LsJson()[0];
  EXPECT_EQ(a["status"], "lost");
  EXPECT_EQ(a["members"][0]["status"], "succeeded");
  EXPECT_EQ(a["members"][1]["status"], "running");  // its job still runs
  Captured members = Capture([&](std::FILE* out, std::FILE*) { return ListArrayMembers(state_, "killed", out); });
  EXPECT_NE(members.out.find("k1"), std::string::npos) << members.out;
}

TEST_F(ArrayCliTest, DownOfALostArrayGivesEveryMemberOneDeadlineWithinTheLimitAndNamesAMemberItCouldNotStop) {
  const TimePoint t0 = WallNow() - hours(1);
  AddJob("k0", JobStatus::kRunning, t0, /*live=*/true);
  AddJob("k1", JobStatus::kRunning, t0, /*live=*/true);
  AddArray("stuck", "running", t0, std::nullopt, /*live_controller=*/false, {"k0"}, {"k1"}, MemberStatus::kRunning,
           MemberStatus::kRunning);
  std::vector<std::string> asked;
  std::vector<std::chrono::steady_clock::time_point> deadlines;
  const auto before = std::chrono::steady_clock::now();
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  const int code = DownArray(state_, "stuck", [&](const std::string& job, std::chrono::steady_clock::time_point d) {
    asked.push_back(job);
    deadlines.push_back(d);
    return job == "k0" ? 125 : 0;  // k0's controller will not stop
  });
  const std::string out = ::testing::internal::GetCapturedStdout();
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, 125);
  EXPECT_EQ(asked, (std::vector<std::string>{"k0", "k1"}));
  ASSERT_EQ(deadlines.size(), 2u);
  EXPECT_EQ(deadlines[0], deadlines[1]);
  EXPECT_LE(deadlines[0], std::chrono::steady_clock::now() + kDownArrayLimit);
  EXPECT_GE(deadlines[0], before + kDownArrayLimit);
  EXPECT_NE(err.find("member 0 (job k0) could not be stopped"), std::string::npos) << err;
  EXPECT_EQ(err.find("member 1"), std::string::npos) << err;
  // The member that stopped is cancelled; the one that did not stays running.
  Captured members = Capture([&](std::FILE* o, std::FILE*) { return ListArrayMembers(state_, "stuck", o); });
  EXPECT_TRUE(std::regex_search(members.out, std::regex(R"(\n0 +\| k0 +\| [^|]+\| running )"))) << members.out;
  EXPECT_TRUE(std::regex_search(members.out, std::regex(R"(\n1 +\| k1 +\| [^|]+\| cancelled )"))) << members.out;
}

TEST_F(ArrayCliTest, PruneRemovesArraysEndedBeforeTheCutoffAndKeepsNewerOnesAndTheirMembers) {
  const TimePoint old = WallNow() - hours(48);
  const TimePoint recent = WallNow() - hours(1);
  AddJob("o0", JobStatus::kSucceeded, old);
  AddJob("o1", JobStatus::kFailed, old);
  AddArray("oldarr", "failed", old, old + seconds(30), false, {"o0"}, {"o1"}, MemberStatus::kSucceeded,
           MemberStatus::kFailed);
  AddJob("r0", JobStatus::kSucceeded, old);  // ended long ago, but its array did not
  AddJob("r1", JobStatus::kSucceeded, recent);
  AddArray("newarr", "succeeded", old, recent, false, {"r0"}, {"r1"}, MemberStatus::kSucceeded,
           MemberStatus::kSucceeded);
  std::set<std::string> kept;
  Captured pruned = Capture([&](std::FILE* out, std::FILE* err) {
    return PruneArrays(state_, std::chrono::hours(24), out, err, &kept);
  });
  EXPECT_EQ(pruned.code, 0) << pruned.err;
  EXPECT_NE(pruned.out.find("removed array oldarr"), std::string::npos) << pruned.out;
  EXPECT_FALSE(JobExists("o0"));
  EXPECT_FALSE(JobExists("o1"));
  EXPECT_EQ(*FindArray(state_, "oldarr"), std::nullopt);
  EXPECT_EQ(kept, (std::set<std::string>{"r0", "r1"}));
  // The jobs' prune then leaves the kept array's members alone.
  Captured jobs = Capture([&](std::FILE* out, std::FILE* err) {
    return PruneCommand(state_, std::chrono::hours(24), out, err, kept);
  });
  EXPECT_EQ(jobs.code, 0) << jobs.err;
  EXPECT_TRUE(JobExists("r0"));
  EXPECT_EQ(*FindArray(state_, "newarr"), std::optional<std::string>("newarr"));
}

}  // namespace
}  // namespace barge::runner
