#include "runner/cli/logs_cli.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "container/timestamp.h"
#include "runner/store/job_store.h"

namespace barge::runner {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

// The longest a command may take before the test gives up on it.
constexpr milliseconds kBound{10000};

// 2024-05-01T12:00:00Z plus `offset`, in Docker's spelling.
std::string Stamp(milliseconds offset) {
  return container::FormatTimestamp((int64_t{1714564800} * 1000 + offset.count()) * 1'000'000);
}

// Now minus `ago`, in Docker's spelling.
std::string StampAgo(milliseconds ago) {
  auto now =
      std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch());
  return container::FormatTimestamp((now - ago).count() * 1'000'000);
}

// One line of a node's log file, as LogSink writes it.
std::string Out(const std::string& stamp, const std::string& text) {
  return stamp + " stdout " + text + "\n";
}
std::string Err(const std::string& stamp, const std::string& text) {
  return stamp + " stderr " + text + "\n";
}
std::string Out(seconds at, const std::string& text) { return Out(Stamp(at), text); }

// Appends `bytes` in one write(2), as a writer that just flushed would.
void Append(const std::string& path, const std::string& bytes) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0) << path;
  ASSERT_EQ(write(fd, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  close(fd);
}

// A pid that no process has any more.
int DeadPid() {
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  int status = 0;
  waitpid(pid, &status, 0);
  return pid;
}

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

// LogsCommand running in a child process, so that a follow that never ends
// fails the test instead of hanging it. The child is killed if still
// running when this is destroyed.
class FollowingLogs {
 public:
  FollowingLogs(const std::string& state_dir, const std::string& job, const LogsOptions& options) {
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) std::abort();
    pid_ = fork();
    if (pid_ == 0) {
      close(out[0]);
      close(err[0]);
      std::FILE* o = fdopen(out[1], "w");
      std::FILE* e = fdopen(err[1], "w");
      int code = LogsCommand(state_dir, job, options, o, e);
      std::fflush(o);
      std::fflush(e);
      _exit(code);
    }
    close(out[1]);
    close(err[1]);
    out_fd_ = out[0];
    err_fd_ = err[0];
  }
  ~FollowingLogs() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (out_fd_ >= 0) close(out_fd_);
    if (err_fd_ >= 0) close(err_fd_);
  }

  // Reads the child's output until it holds `text`; false if it did not
  // within kBound.
  bool WaitFor(const std::string& text) {
    const auto deadline = Clock::now() + kBound;
    while (output_.out.find(text) == std::string::npos) {
      if (!ReadSome(deadline)) return false;
    }
    return true;
  }

  // Everything the child printed and its exit code; code -1 if it did not
  // end within kBound.
  Output Finish() {
    const auto deadline = Clock::now() + kBound;
    while (out_fd_ >= 0 || err_fd_ >= 0) {
      if (!ReadSome(deadline)) return output_;
    }
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    output_.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return output_;
  }

 private:
  // Waits until `deadline` for output or the end of a pipe; false at the
  // deadline or once both pipes are closed.
  bool ReadSome(Clock::time_point deadline) {
    pollfd fds[2] = {{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};
    auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
    if (left <= 0 || (out_fd_ < 0 && err_fd_ < 0)) return false;
    if (poll(fds, 2, static_cast<int>(left)) <= 0) return false;
    Drain(fds[0], &out_fd_, &output_.out);
    Drain(fds[1], &err_fd_, &output_.err);
    return true;
  }
  static void Drain(const pollfd& p, int* fd, std::string* into) {
    if (*fd < 0 || !(p.revents & (POLLIN | POLLHUP | POLLERR))) return;
    char buf[4096];
    ssize_t n = read(*fd, buf, sizeof buf);
    if (n > 0) {
      into->append(buf, static_cast<size_t>(n));
    } else {
      close(*fd);
      *fd = -1;
    }
  }

  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  Output output_;
};

class LogsCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/barge-logs-test-XXXXXX";
    root_ = mkdtemp(tmpl);
    state_ = root_ + "/state";
  }
  void TearDown() override {
    store_.reset();
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

  // Job `id` named "train" with `nodes` nodes, rank 0 the head on host h0,
  // rank R a worker on hR, each recorded when `record_nodes`. A final job's
  // controller is gone; a live job's controller is this test process.
  JobRecord AddJob(const std::string& id, JobStatus status, int nodes = 2,
                   bool record_nodes = true) {
    JobRecord j;
    j.id = id;
    j.name = "train";
    j.status = status;
    j.created = WallNow();
    j.controller_pid = IsFinal(status) ? DeadPid() : static_cast<int>(getpid());
    j.nodes = nodes;
    j.run_dir = state_ + "/runs/" + id;
    EXPECT_TRUE(Store().CreateJob(j).ok());
    fs::create_directories(j.run_dir);
    if (record_nodes) {
      for (int rank = 0; rank < nodes; ++rank) RecordNode(j, rank);
    }
    return j;
  }

  void RecordNode(const JobRecord& j, int rank) {
    NodeRecord n;
    n.job_id = j.id;
    n.rank = rank;
    n.role = rank == 0 ? "head" : "worker";
    n.host = "h" + std::to_string(rank);
    n.container_name = "barge-" + j.id + "-" + std::to_string(rank);
    n.log_path = LogPath(j, rank);
    EXPECT_TRUE(Store().UpsertNode(n).ok());
  }

  static std::string LogPath(const JobRecord& j, int rank) {
    return j.run_dir + "/" + std::to_string(rank) + "-h" + std::to_string(rank) + ".log";
  }

  Output Logs(const std::string& job, const LogsOptions& options = {}) {
    Capture out, err;
    Output o;
    o.code = LogsCommand(state_, job, options, out.file(), err.file());
    o.out = out.Take();
    o.err = err.Take();
    return o;
  }

  // Two nodes, lines interleaved in time; node 1 ties node 0 at 3 s.
  JobRecord AddTwoNodeJob() {
    JobRecord j = AddJob("aaaa1111", JobStatus::kSucceeded);
    Append(LogPath(j, 0), Out(seconds(1), "a1") + Out(seconds(3), "a3") + Out(seconds(5), "a5"));
    Append(LogPath(j, 1), Out(seconds(2), "b2") + Out(seconds(3), "b3") + Out(seconds(4), "b4"));
    return j;
  }

  std::string root_;
  std::string state_;
  std::unique_ptr<JobStore> store_;
};

TEST_F(LogsCliTest, MergesTheNodesInTimestampOrderLowerRankFirstOnTies) {
  AddTwoNodeJob();
  Output o = Logs("aaaa1111");
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(o.out,
            "[0 head h0] a1\n"
            "[1 worker h1] b2\n"
            "[0 head h0] a3\n"
            "[1 worker h1] b3\n"
            "[1 worker h1] b4\n"
            "[0 head h0] a5\n");
  EXPECT_EQ(o.err, "");
}

TEST_F(LogsCliTest, ResolvesTheJobByNameOrIdPrefix) {
  AddTwoNodeJob();
  EXPECT_EQ(Logs("train").out, Logs("aaaa1111").out);
  EXPECT_EQ(Logs("aaaa").out, Logs("aaaa1111").out);
}

TEST_F(LogsCliTest, ANodeKeepsItsFileOrderEvenWhenItsStampsGoBack) {
  JobRecord j = AddJob("aaaa1111", JobStatus::kSucceeded, 1);
  Append(LogPath(j, 0), Out(seconds(5), "first") + Out(seconds(1), "second"));
  EXPECT_EQ(Logs("aaaa1111").out, "[0 head h0] first\n[0 head h0] second\n");
}

TEST_F(LogsCliTest, ANodesStdoutAndStderrLinesComeInTheirStampOrderThoughTheFileHasThemStreamByStream) {
  // As a node printing to stdout and stderr in turn every 20 ms reaches the
  // file when its streams arrive in separate chunks.
  JobRecord j = AddJob("aaaa1111", JobStatus::kSucceeded, 1);
  Append(LogPath(j, 0), Out(seconds(1), "1") + Out(seconds(3), "3") + Out(seconds(5), "5") +
                            Err(Stamp(seconds(2)), "2") + Err(Stamp(seconds(4)), "4") +
                            Err(Stamp(seconds(6)), "6"));
  EXPECT_EQ(Logs("aaaa1111").out,
            "[0 head h0] 1\n[0 head h0 stderr] 2\n[0 head h0] 3\n"
            "[0 head h0 stderr] 4\n[0 head h0] 5\n[0 head h0 stderr] 6\n");
}

TEST_F(LogsCliTest, NodeOptionPrintsOnlyThatNode) {
  AddTwoNodeJob();
  LogsOptions o;
  o.node = 1;
  Output r = Logs("aaaa1111", o);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "[1 worker h1] b2\n[1 worker h1] b3\n[1 worker h1] b4\n");
}

TEST_F(LogsCliTest, AnUnknownRankIsAnErrorThatListsTheRanks) {
  AddTwoNodeJob();
  LogsOptions o;
  o.node = 5;
  Output r = Logs("aaaa1111", o);
  EXPECT_EQ(r.code, 125);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "barge: job aaaa1111 (train) has no node 5; its ranks are 0, 1\n");
}

TEST_F(LogsCliTest, ARankOfTheJobNotYetRecordedIsNoError) {
  AddJob("aaaa1111", JobStatus::kFailed, 3, /*record_nodes=*/false);
  LogsOptions o;
  o.node = 2;
  Output r = Logs("aaaa1111", o);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST_F(LogsCliTest, AnUnknownJobIsAnError) {
  Output none = Logs("nope");
  EXPECT_EQ(none.code, 125);
  EXPECT_EQ(none.err, "barge: no job matches 'nope'\n");
  EXPECT_FALSE(fs::exists(state_ + "/barge.db")) << "logs must not create a store";

  AddTwoNodeJob();
  Output r = Logs("nope");
  EXPECT_EQ(r.code, 125);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "barge: no job matches 'nope'\n");
}

TEST_F(LogsCliTest, SinceTakesAnRfc3339TimeAndIncludesThatInstant) {
  AddTwoNodeJob();
  const std::string expected =
      "[0 head h0] a3\n"
      "[1 worker h1] b3\n"
      "[1 worker h1] b4\n"
      "[0 head h0] a5\n";
  LogsOptions o;
  o.since = Stamp(seconds(3));
  EXPECT_EQ(Logs("aaaa1111", o).out, expected);
  o.since = "2024-05-01T12:00:03Z";
  EXPECT_EQ(Logs("aaaa1111", o).out, expected);
  o.since = "2024-05-01T14:00:03+02:00";
  EXPECT_EQ(Logs("aaaa1111", o).out, expected);
  o.since = "2024-05-01T12:00:03.000000001Z";
  EXPECT_EQ(Logs("aaaa1111", o).out, "[1 worker h1] b4\n[0 head h0] a5\n");
}

TEST_F(LogsCliTest, SinceTakesADurationBeforeNow) {
  JobRecord j = AddJob("aaaa1111", JobStatus::kSucceeded);
  Append(LogPath(j, 0),
         Out(StampAgo(minutes(120)), "two hours ago") + Out(StampAgo(minutes(1)), "a minute ago"));
  Append(LogPath(j, 1), Out(StampAgo(minutes(30)), "half an hour ago"));
  LogsOptions o;
  o.since = "10m";
  EXPECT_EQ(Logs("aaaa1111", o).out, "[0 head h0] a minute ago\n");
  o.since = "1h";
  EXPECT_EQ(Logs("aaaa1111", o).out, "[1 worker h1] half an hour ago\n[0 head h0] a minute ago\n");
  o.since = "100000d";
  EXPECT_EQ(Logs("aaaa1111", o).out,
            "[0 head h0] two hours ago\n[1 worker h1] half an hour ago\n"
            "[0 head h0] a minute ago\n");
}

TEST_F(LogsCliTest, SinceRejectsWhatIsNeitherATimeNorADuration) {
  AddTwoNodeJob();
  LogsOptions o;
  o.since = "yesterday";
  Output r = Logs("aaaa1111", o);
  EXPECT_EQ(r.code, 125);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err,
            "barge: --since: 'yesterday' is neither a time (e.g. 2024-05-01T12:00:00Z) nor a "
            "duration (e.g. 10m, 1h30m)\n");
}

TEST_F(LogsCliTest, TailPrintsTheLastLinesOfTheMergedOutput) {
  AddTwoNodeJob();
  LogsOptions o;
  o.tail = 3;
  EXPECT_EQ(Logs("aaaa1111", o).out, "[1 worker h1] b3\n[1 worker h1] b4\n[0 head h0] a5\n");
  o.tail = 100;
  EXPECT_EQ(Logs("aaaa1111", o).out, Logs("aaaa1111").out);
  o.tail = 0;
  Output none = Logs("aaaa1111", o);
  EXPECT_EQ(none.code, 0);
  EXPECT_EQ(none.out, "");
}

TEST_F(LogsCliTest, TailCountsOnlyTheSelectedLines) {
  AddTwoNodeJob();
  LogsOptions o;
  o.tail = 2;
  o.node = 0;
  EXPECT_EQ(Logs("aaaa1111", o).out, "[0 head h0] a3\n[0 head h0] a5\n");
  o.node.reset();
  o.since = Stamp(seconds(4));
  o.tail = 5;
  EXPECT_EQ(Logs("aaaa1111", o).out, "[1 worker h1] b4\n[0 head h0] a5\n");
}

TEST_F(LogsCliTest, ANegativeTailIsAnError) {
  AddTwoNodeJob();
  LogsOptions o;
  o.tail = -1;
  Output r = Logs("aaaa1111", o);
  EXPECT_EQ(r.code, 125);
  EXPECT_EQ(r.err, "barge: --tail must be 0 or more\n");
}

TEST_F(LogsCliTest, StderrLinesGoToOutMarkedInsideThePrefix) {
  JobRecord j = AddJob("aaaa1111", JobStatus::kFailed);
  Append(LogPath(j, 0), Out(seconds(1), "step 1") + Err(Stamp(seconds(2)), "Traceback"));
  Append(LogPath(j, 1), Err(Stamp(seconds(3)), "NCCL WARN") + Out(seconds(4), ""));
  Output r = Logs("aaaa1111");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out,
            "[0 head h0] step 1\n"
            "[0 head h0 stderr] Traceback\n"
            "[1 worker h1 stderr] NCCL WARN\n"
            "[1 worker h1] \n");
  EXPECT_EQ(r.err, "");
}

TEST_F(LogsCliTest, TimestampsPrefixEachLineWithDockersStamp) {
  JobRecord j = AddJob("aaaa1111", JobStatus::kSucceeded);
  Append(LogPath(j, 0), Out(seconds(1), "a") + Err(Stamp(seconds(2)), "b"));
  LogsOptions o;
  o.timestamps = true;
  EXPECT_EQ(Logs("aaaa1111", o).out,
            "2024-05-01T12:00:01.000000000Z [0 head h0] a\n"
            "2024-05-01T12:00:02.000000000Z [0 head h0 stderr] b\n");
}

TEST_F(LogsCliTest, LinesWithoutAStampKeepTheirPlaceInTheirFile) {
  JobRecord j = AddJob("aaaa1111", JobStatus::kSucceeded);
  Append(LogPath(j, 0), " stdout before any stamp\n" + Out(seconds(1), "a1") +
                            " stdout no stamp\n" + "not barge's format at all\n" +
                            Out(seconds(5), "a5"));
  Append(LogPath(j, 1), Out(seconds(3), "b3"));
  EXPECT_EQ(Logs("aaaa1111").out,
            "[0 head h0] before any stamp\n"
            "[0 head h0] a1\n"
            "[0 head h0] no stamp\n"
            "[0 head h0] not barge's format at all\n"
            "[1 worker h1] b3\n"
            "[0 head h0] a5\n");
  LogsOptions o;
  o.timestamps = true;
  o.since = Stamp(seconds(1));
  EXPECT_EQ(Logs("aaaa1111", o).out,
            "2024-05-01T12:00:01.000000000Z [0 head h0] a1\n"
            "- [0 head h0] no stamp\n"
            "- [0 head h0] not barge's format at all\n"
            "2024-05-01T12:00:03.000000000Z [1 worker h1] b3\n"
            "2024-05-01T12:00:05.000000000Z [0 head h0] a5\n");
}

TEST_F(LogsCliTest, AJobWithoutLogFilesPrintsNothing) {
  AddJob("aaaa1111", JobStatus::kFailed);
  AddJob("bbbb2222", JobStatus::kFailed, 2, /*record_nodes=*/false);
  for (const char* job : {"aaaa1111", "bbbb2222"}) {
    Output r = Logs(job);
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, "");
  }
}

TEST_F(LogsCliTest, ANodeWithoutARecordedPathIsReadWhereTheSinkWritesIt) {
  JobRecord j = AddJob("aaaa1111", JobStatus::kSucceeded, 1, /*record_nodes=*/false);
  NodeRecord n;
  n.job_id = j.id;
  n.rank = 0;
  n.role = "head";
  n.host = "10.0.0.1";
  ASSERT_TRUE(Store().UpsertNode(n).ok());
  Append(j.run_dir + "/0-10.0.0.1.log", Out(seconds(1), "hi"));
  EXPECT_EQ(Logs("aaaa1111").out, "[0 head 10.0.0.1] hi\n");
}

TEST_F(LogsCliTest, AnUnfinishedLastLineWaitsUntilTheJobIsFinal) {
  JobRecord j = AddJob("aaaa1111", JobStatus::kRunning, 1);
  Append(LogPath(j, 0), Out(seconds(1), "done") + Stamp(seconds(2)) + " stdout half a li");
  EXPECT_EQ(Logs("aaaa1111").out, "[0 head h0] done\n");
  ASSERT_TRUE(Store().SetStatus(j.id, JobStatus::kFailed, 1).ok());
  EXPECT_EQ(Logs("aaaa1111").out, "[0 head h0] done\n[0 head h0] half a li\n");
}

TEST_F(LogsCliTest, AJobWhoseControllerIsGoneIsMarkedLost) {
  JobRecord j = AddJob("aaaa1111", JobStatus::kRunning, 1);
  j.controller_pid = DeadPid();
  ASSERT_TRUE(Store().SetControllerPid(j.id, *j.controller_pid).ok());
  EXPECT_EQ(Logs("aaaa1111").code, 0);
  Result<JobRecord> now = Store().GetJob(j.id);
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(now->status, JobStatus::kLost);
}

TEST_F(LogsCliTest, FollowPrintsEveryLineOnceAsItIsWrittenUntilTheJobIsFinal) {
  // Before any container ran: no nodes recorded, no files.
  JobRecord j = AddJob("aaaa1111", JobStatus::kStarting, 2, /*record_nodes=*/false);
  LogsOptions o;
  o.follow = true;
  FollowingLogs logs(state_, "aaaa1111", o);

  RecordNode(j, 0);
  Append(LogPath(j, 0), Out(seconds(1), "one"));
  ASSERT_TRUE(Store().SetStatus(j.id, JobStatus::kRunning).ok());
  ASSERT_TRUE(logs.WaitFor("one\n")) << "a line written while following was not printed";

  RecordNode(j, 1);
  Append(LogPath(j, 1), Out(seconds(2), "two") + Err(Stamp(seconds(3)), "three"));
  ASSERT_TRUE(logs.WaitFor("three\n"));

  // A line written in two halves, with polls in between.
  Append(LogPath(j, 0), Stamp(seconds(4)) + " stdout hel");
  std::this_thread::sleep_for(milliseconds(700));
  Append(LogPath(j, 0), "lo world\n");
  ASSERT_TRUE(logs.WaitFor("hello world\n"));

  // The last lines, and the outcome right after them.
  Append(LogPath(j, 1), Out(seconds(5), "five"));
  Append(LogPath(j, 0), Out(seconds(6), "six"));
  ASSERT_TRUE(Store().SetStatus(j.id, JobStatus::kSucceeded, 0).ok());

  Output r = logs.Finish();
  EXPECT_EQ(r.code, 0) << "did not end within the bound; printed:\n" << r.out << r.err;
  EXPECT_EQ(r.out,
            "[0 head h0] one\n"
            "[1 worker h1] two\n"
            "[1 worker h1 stderr] three\n"
            "[0 head h0] hello world\n"
            "[1 worker h1] five\n"
            "[0 head h0] six\n");
  EXPECT_EQ(r.err, "");
}

TEST_F(LogsCliTest, FollowOfOneNodeWithTailStartsFromItsLastLines) {
  JobRecord j = AddJob("aaaa1111", JobStatus::kRunning);
  Append(LogPath(j, 0), Out(seconds(1), "a1") + Out(seconds(2), "a2") + Out(seconds(3), "a3"));
  Append(LogPath(j, 1), Out(seconds(2), "b2"));
  LogsOptions o;
  o.follow = true;
  o.node = 0;
  o.tail = 1;
  FollowingLogs logs(state_, "aaaa1111", o);
  ASSERT_TRUE(logs.WaitFor("a3\n"));
  Append(LogPath(j, 1), Out(seconds(4), "b4"));
  Append(LogPath(j, 0), Out(seconds(5), "a5"));
  ASSERT_TRUE(logs.WaitFor("a5\n"));
  ASSERT_TRUE(Store().SetStatus(j.id, JobStatus::kSucceeded, 0).ok());
  Output r = logs.Finish();
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "[0 head h0] a3\n[0 head h0] a5\n");
}

TEST_F(LogsCliTest, FollowEndsWhenTheControllerIsGoneAndTheJobIsLost) {
  JobRecord j = AddJob("aaaa1111", JobStatus::kRunning, 1);
  ASSERT_TRUE(Store().SetControllerPid(j.id, DeadPid()).ok());
  Append(LogPath(j, 0), Out(seconds(1), "last words") + Stamp(seconds(2)) + " stdout cut sho");
  LogsOptions o;
  o.follow = true;
  FollowingLogs logs(state_, "aaaa1111", o);
  Output r = logs.Finish();
  EXPECT_EQ(r.code, 0) << r.err;
  // Nobody will finish the last line: it is printed as it is.
  EXPECT_EQ(r.out, "[0 head h0] last words\n[0 head h0] cut sho\n");
  Result<JobRecord> now = Store().GetJob(j.id);
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(now->status, JobStatus::kLost);
}

TEST_F(LogsCliTest, FollowOfAFinishedJobPrintsItAndReturns) {
  AddTwoNodeJob();
  LogsOptions o;
  o.follow = true;
  FollowingLogs logs(state_, "aaaa1111", o);
  Output r = logs.Finish();
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, Logs("aaaa1111").out);
}

TEST_F(LogsCliTest, LongLinesAndManyLinesArriveWhole) {
  JobRecord j = AddJob("aaaa1111", JobStatus::kSucceeded, 1);
  const std::string long_text(200 * 1024, 'x');
  std::string bytes;
  for (int i = 0; i < 3; ++i) bytes += Out(seconds(i), long_text);
  for (int i = 0; i < 5000; ++i) bytes += Out(seconds(10), "line " + std::to_string(i));
  Append(LogPath(j, 0), bytes);
  Output r = Logs("aaaa1111");
  EXPECT_EQ(r.code, 0) << r.err;
  std::string expected;
  for (int i = 0; i < 3; ++i) expected += "[0 head h0] " + long_text + "\n";
  for (int i = 0; i < 5000; ++i) expected += "[0 head h0] line " + std::to_string(i) + "\n";
  EXPECT_EQ(r.out, expected);
}

}  // namespace
}  // namespace barge::runner
