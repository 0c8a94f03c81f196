// ControllerAlive and SignalController against real processes: children of
// this test (of this user, of uid 65534, exited but not reaped) whose pids
// a store records with the identity of another process, as after the
// controller died and the kernel gave its pid to someone else.
#include "runner/store/job_lookup.h"
#include "tests/support/raw_sql.h"

#include <gtest/gtest.h>
#include <grp.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

namespace barge::runner {
namespace {

constexpr uid_t kNobody = 65534;

using barge::testing::TempDir;

// A child that waits (as `uid` when given) until Release or the destructor,
// which kills and reaps it. Started() is false when it could not be made.
class Child {
 public:
  explicit Child(std::optional<uid_t> uid = std::nullopt) {
    int ready[2], release[2];
    if (pipe(ready) != 0 || pipe(release) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      close(ready[0]);
      close(release[1]);
      char ok = 'y';
      if (uid && (setgroups(0, nullptr) != 0 || setresgid(*uid, *uid, *uid) != 0 ||
                  setresuid(*uid, *uid, *uid) != 0)) {
        ok = 'n';
      }
      (void)!write(ready[1], &ok, 1);
      char byte;
      while (read(release[0], &byte, 1) < 0 && errno == EINTR) {
      }
      _exit(0);
    }
    close(ready[1]);
    close(release[0]);
    release_ = release[1];
    char ok = 'n';
    started_ = pid_ > 0 && read(ready[0], &ok, 1) == 1 && ok == 'y';
    close(ready[0]);
  }
  ~Child() {
    if (release_ >= 0) close(release_);
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  bool Started() const { return started_; }
  int pid() const { return pid_; }
  // Lets it exit; it stays a zombie until the destructor reaps it.
  void Release() {
    close(release_);
    release_ = -1;
  }
  // Reaps it and returns its wait status; the destructor then has nothing
  // to do.
  int Wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }
  // Whether it still runs (not reaped, not a zombie): never reaps it.
  bool Running() const {
    std::ifstream stat("/proc/" + std::to_string(pid_) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) return false;
    const size_t paren = line.rfind(')');
    return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'Z';
  }

 private:
  pid_t pid_ = -1;
  int release_ = -1;
  bool started_ = false;
};

// A pid that no process has any more.
int DeadPid() {
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  waitpid(pid, nullptr, 0);
  return pid;
}

using barge::testing::RawExec;

JobRecord RunningJob(const std::string& id, int controller_pid) {
  JobRecord j;
  j.id = id;
  j.name = "train";
  j.status = JobStatus::kRunning;
  j.created = WallNow();
  j.controller_pid = controller_pid;
  return j;
}

TEST(ProcessIdentity, IsThatOfTheProcessWithThisUsersUidAndTheBootsId) {
  Child child;
  ASSERT_TRUE(child.Started());
  std::optional<ProcessIdentity> id = ReadProcessIdentity(child.pid());
  ASSERT_TRUE(id);
  EXPECT_EQ(id->uid, static_cast<int64_t>(geteuid()));
  EXPECT_GT(id->start_time, 0);
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string boot_id;
  std::getline(boot, boot_id);
  EXPECT_EQ(id->boot_id, boot_id);
  EXPECT_FALSE(ReadProcessIdentity(DeadPid()));
}

TEST(ControllerAlive, AProcessWithTheRecordedIdentityIsAliveAndOneWithAnotherStartTimeIsNot) {
  Child child;
  ASSERT_TRUE(child.Started());
  std::optional<ProcessIdentity> id = ReadProcessIdentity(child.pid());
  ASSERT_TRUE(id);
  EXPECT_TRUE(ControllerAlive(child.pid(), id));
  ProcessIdentity earlier = *id;
  earlier.start_time -= 1;
  EXPECT_FALSE(ControllerAlive(child.pid(), earlier));
  ProcessIdentity other_boot = *id;
  other_boot.boot_id = "00000000-0000-0000-0000-000000000000";
  EXPECT_FALSE(ControllerAlive(child.pid(), other_boot));
  EXPECT_FALSE(ControllerAlive(std::nullopt, id));
}

TEST(ControllerAlive, AJobWhosePidIsNowThisUsersProcessOfAnotherStartTimeIsMarkedLost) {
  TempDir tmp;
  Child child;
  ASSERT_TRUE(child.Started());
  {
    Result<std::unique_ptr<JobStore>> store = JobStore::Open(tmp.path());
    ASSERT_TRUE(store.ok()) << store.status().message();
    ASSERT_TRUE((*store)->CreateJob(RunningJob("j1", child.pid())).ok());
    // The store recorded the identity of the process with the pid.
    Result<JobRecord> job = (*store)->GetJob("j1");
    ASSERT_TRUE(job.ok());
    EXPECT_EQ(job->controller_identity, ReadProcessIdentity(child.pid()));
    EXPECT_TRUE(ControllerAlive(job->controller_pid, job->controller_identity));
  }
  // The controller that was recorded started a tick before the process
  // that has its pid now.
  RawExec(tmp.path() + "/barge.db", "UPDATE jobs SET controller_start_time = controller_start_time - 1");
  Result<FoundJob> found = FindJob(tmp.path(), "j1");
  ASSERT_TRUE(found.ok()) << found.status().message();
  EXPECT_EQ(found->job.status, JobStatus::kLost);
  EXPECT_EQ(found->store->GetEvents("j1")->back().detail,
            "its controller (pid " + std::to_string(child.pid()) + ") is gone");
  EXPECT_TRUE(child.Running());
}

TEST(ControllerAlive, AProcessOfUid65534WithTheRecordedPidIsNotAlive) {
  ASSERT_EQ(geteuid(), 0u) << "this test plays another user (uid 65534): it needs root";
  Child nobody(kNobody);
  ASSERT_TRUE(nobody.Started());
  std::optional<ProcessIdentity> id = ReadProcessIdentity(nobody.pid());
  ASSERT_TRUE(id);
  ASSERT_EQ(id->uid, kNobody);
  // Everything but the uid as recorded: this user's controller.
  ProcessIdentity ours = *id;
  ours.uid = geteuid();
  EXPECT_FALSE(ControllerAlive(nobody.pid(), ours));
  // A record of an older barge (no identity): another user's process is
  // never this user's controller, though root may signal it.
  EXPECT_FALSE(ControllerAlive(nobody.pid(), std::nullopt));
  EXPECT_TRUE(ControllerAlive(nobody.pid(), id));
}

TEST(ControllerAlive, AZombieIsNotAlive) {
  Child child;
  ASSERT_TRUE(child.Started());
  std::optional<ProcessIdentity> id = ReadProcessIdentity(child.pid());
  ASSERT_TRUE(id);
  child.Release();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (child.Running() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_FALSE(child.Running());
  ASSERT_EQ(kill(child.pid(), 0), 0);  // not reaped: the pid is still its
  EXPECT_FALSE(ControllerAlive(child.pid(), id));
  EXPECT_FALSE(ControllerAlive(child.pid(), std::nullopt));
}

TEST(ControllerAlive, ARecordWithoutAnIdentityIsJudgedByItsPidAndUser) {
  TempDir tmp;
  Child child;
  ASSERT_TRUE(child.Started());
  const int dead = DeadPid();
  {
    Result<std::unique_ptr<JobStore>> store = JobStore::Open(tmp.path());
    ASSERT_TRUE(store.ok()) << store.status().message();
    ASSERT_TRUE((*store)->CreateJob(RunningJob("live", child.pid())).ok());
    ASSERT_TRUE((*store)->CreateJob(RunningJob("dead", dead)).ok());
  }
  // As an older barge's rows read after the migration.
  RawExec(tmp.path() + "/barge.db",
          "UPDATE jobs SET controller_boot_id = NULL, controller_start_time = NULL, controller_uid = NULL");
  Result<FoundJob> live = FindJob(tmp.path(), "live");
  ASSERT_TRUE(live.ok()) << live.status().message();
  EXPECT_FALSE(live->job.controller_identity);
  EXPECT_EQ(live->job.status, JobStatus::kRunning);
  Result<FoundJob> gone = FindJob(tmp.path(), "dead");
  ASSERT_TRUE(gone.ok()) << gone.status().message();
  EXPECT_EQ(gone->job.status, JobStatus::kLost);
}

TEST(SignalController, SignalsTheRecordedProcessAndNotAnotherOneWithItsPid) {
  Child child;
  ASSERT_TRUE(child.Started());
  std::optional<ProcessIdentity> id = ReadProcessIdentity(child.pid());
  ASSERT_TRUE(id);
  ProcessIdentity earlier = *id;
  earlier.start_time -= 1;
  EXPECT_FALSE(SignalController(child.pid(), earlier, SIGTERM));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(child.Running());
  EXPECT_TRUE(SignalController(child.pid(), id, SIGTERM));
  const int status = child.Wait();
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
}

}  // namespace
}  // namespace barge::runner
