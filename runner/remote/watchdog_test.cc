// Tests of the hosts' watchdog loop, run here with /bin/sh and a fake docker
// command that logs its arguments (the loop itself is real).
#include "runner/remote/watchdog.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>
#include <vector>

#include "runner/remote/docker_commands.h"
#include "runner/remote/image_relay.h"
#include "ssh/quote.h"

namespace barge::runner {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

int Sh(const std::string& line) { return std::system(("sh -c " + ssh::ShellQuote(line)).c_str()); }

// A job id of its own, a fake docker that logs to `log`, and clean-up.
class WatchdogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    job_ = "wdtest" + std::to_string(getpid()) + "x" + std::to_string(rand() % 100000);
    jobdir_ = NewHostJobDir(job_);
    scratch_ = fs::temp_directory_path() / ("barge-watchdog-test-" + job_);
    fs::create_directories(scratch_);
    log_ = (scratch_ / "docker.log").string();
    docker_ = (scratch_ / "docker").string();
    std::ofstream(docker_) << "#!/bin/sh\necho \"$*\" >> " << ssh::ShellQuote(log_)
                           << "\ncase $1 in ps) echo c1; echo c2 ;; inspect) echo true ;; esac\n";
    fs::permissions(docker_, fs::perms::owner_all);
  }
  void TearDown() override {
    (void)Sh(DisarmWatchdogCommand(jobdir_));
    fs::remove_all(scratch_);
  }
  WatchdogParams Params(std::chrono::seconds lease) const {
    WatchdogParams p;
    p.job_id = job_;
    p.dir = jobdir_;
    p.docker = {docker_};
    p.lease = lease;
    p.grace = 1s;
    return p;
  }
  // Waits up to `limit` for `done`.
  template <typename F>
  bool Within(std::chrono::milliseconds limit, F done) {
    auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
      if (done()) return true;
      std::this_thread::sleep_for(100ms);
    }
    return done();
  }
  std::string job_;
  std::string jobdir_;  // the job's directory (NewHostJobDir)
  fs::path scratch_;
  std::string log_, docker_;
};

TEST(WatchdogTick, OnTheHeadsHostIsHalfTheShorterOfLeaseAndGraceFromOneToTenSeconds) {
  WatchdogParams p;
  p.head_container = "barge-x-abcd1234-0";
  p.lease = 600s;
  p.grace = 90s;
  EXPECT_EQ(WatchdogTick(p), 10s);
  p.lease = 4s;
  p.grace = 5s;
  EXPECT_EQ(WatchdogTick(p), 2s);
  p.lease = 1s;
  EXPECT_EQ(WatchdogTick(p), 1s);
}

// A host without the head has no exit to watch: its look only judges the
// lease, the timeout and the keep, and comes six times less often with the
// default lease (60 s, not 10 s).
TEST(WatchdogTick, ElsewhereIsHalfTheLeaseFromOneToSixtySeconds) {
  WatchdogParams p;
  p.lease = 600s;
  p.grace = 90s;
  EXPECT_EQ(WatchdogTick(p), 60s);
  p.lease = 90s;
  EXPECT_EQ(WatchdogTick(p), 45s);
  p.lease = 600s;
  p.deadline_after = 10s;  // a deadline nearer than the lease: judged within half of it
  EXPECT_EQ(WatchdogTick(p), 5s);
  p.deadline_after = 0s;
  p.lease = 4s;
  p.grace = 5s;
  EXPECT_EQ(WatchdogTick(p), 2s);
  p.lease = 1s;
  EXPECT_EQ(WatchdogTick(p), 1s);
}

// Issue #40 (item 11): the `timeout:` deadline is judged on the host's
// clock, so the line that arms the watchdog carries how long is left (a
// duration) and no time of the controller's clock, which the host's
// `date +%s` was compared with before.
TEST(ArmWatchdog, TheLineCarriesTheTimeLeftAsADurationAndNoTimeOfThisMachinesClock) {
  WatchdogParams p;
  p.job_id = "0123abcd";
  p.dir = "/tmp/barge-0123abcd.aaaaaaaaaaaa";
  p.docker = {"docker"};
  p.deadline_after = 3690s;
  const std::string line = ArmWatchdogCommand(p);
  EXPECT_NE(line.find("$(($(date +%s) + 3690))"), std::string::npos) << line;
  // No number within ten years of this machine's clock.
  const long long now = static_cast<long long>(time(nullptr));
  const std::regex digits("[0-9]{9,18}");
  for (auto it = std::sregex_iterator(line.begin(), line.end(), digits); it != std::sregex_iterator(); ++it) {
    EXPECT_GT(std::llabs(std::stoll(it->str()) - now), 10LL * 365 * 86400) << "a time of this machine's clock: " << it->str();
  }
  // Without a timeout, no deadline.
  p.deadline_after = 0s;
  EXPECT_EQ(ArmWatchdogCommand(p).find("date +%s) +"), std::string::npos);
}

// The host sets the deadline from its own clock when the watchdog is first
// armed in the job's directory and keeps it there: arming again (a
// reconnect) keeps it instead of starting the timeout again, and the
// watchdog ends the job once the host's clock reaches it.
TEST_F(WatchdogTest, TheTimeoutsDeadlineIsTheHostsClockAtTheFirstArmingPlusTheTimeLeftAndArmingAgainKeepsIt) {
  WatchdogParams p = Params(600s);
  p.grace = 2s;
  p.deadline_after = 4s;  // 2 s ticks (half the time left to the deadline)
  const long long before = static_cast<long long>(time(nullptr));
  ASSERT_EQ(Sh(ArmWatchdogCommand(p)), 0);
  const long long after = static_cast<long long>(time(nullptr));
  const std::string first = ReadAll(jobdir_ + "/deadline");
  ASSERT_TRUE(std::regex_match(first, std::regex("[0-9]+\n"))) << "no deadline kept on the host: '" << first << "'";
  const long long deadline = std::stoll(first);
  EXPECT_GE(deadline, before + 4);
  EXPECT_LE(deadline, after + 4);
  std::this_thread::sleep_for(2s);
  ASSERT_EQ(Sh(ArmWatchdogCommand(p)), 0);
  EXPECT_EQ(ReadAll(jobdir_ + "/deadline"), first) << "arming again started the timeout again";
  long long gone_at = 0;
  EXPECT_TRUE(Within(8000ms, [&] {
    gone_at = static_cast<long long>(time(nullptr));
    return !fs::exists(jobdir_);
  })) << "the job directory is still there after its deadline";
  EXPECT_GE(gone_at, deadline) << "the watchdog ended the job before its deadline";
  EXPECT_THAT(ReadAll(log_), ::testing::HasSubstr("rm -f c1 c2"));
}

TEST_F(WatchdogTest, ALapsedLeaseRemovesTheJobsContainersAndDirectoryWithinFiveSeconds) {
  ASSERT_EQ(Sh(ArmWatchdogCommand(Params(1s))), 0);
  const std::string dir = jobdir_;
  ASSERT_TRUE(fs::exists(dir + "/lease"));
  EXPECT_TRUE(Within(5000ms, [&] { return !fs::exists(dir); })) << "the job directory is still there";
  std::string log = ReadAll(log_);
  EXPECT_THAT(log, ::testing::HasSubstr("ps -aq --filter label=barge.job=" + job_));
  EXPECT_THAT(log, ::testing::HasSubstr("rm -f c1 c2"));
}

// A controller killed during `image_pull: push` leaves the relay's lines in
// ~/.ssh/authorized_keys (outside the job's directory): the watchdog that
// removes the job removes them too, and leaves every other byte as it was.
TEST_F(WatchdogTest, ALapsedLeaseRemovesTheJobsRelayLinesFromAuthorizedKeysAndNothingElse) {
  const fs::path home = scratch_ / "home";
  fs::create_directories(home / ".ssh");
  const std::string before = "ssh-ed25519 AAAAmine me@here\nssh-ed25519 AAAAother barge-relay:/tmp/other";
  std::ofstream(home / ".ssh" / "authorized_keys") << before;
  const std::string env = "export HOME=" + ssh::ShellQuote(home.string()) + "; ";
  ASSERT_EQ(Sh(env + ArmWatchdogCommand(Params(1s))), 0);
  const std::string line = RelayAuthorizedKey(jobdir_, "10.0.0.1", "ssh-ed25519 AAAAtest");
  ASSERT_EQ(Sh(env + "printf %s " + ssh::ShellQuote(line) + " | { " + RelayAuthorizeCommand(jobdir_) + "; }"), 0);
  ASSERT_EQ(ReadAll((home / ".ssh" / "authorized_keys").string()), before + "\n" + line);
  EXPECT_TRUE(Within(5000ms, [&] { return !fs::exists(jobdir_); })) << "the job directory is still there";
  EXPECT_EQ(ReadAll((home / ".ssh" / "authorized_keys").string()), before);
}

// `barge down` of a job whose controller is gone: the relay's lines of
// every directory of the job go, also of a directory that is gone itself
// (a host whose /tmp was cleared); another job's line stays.
TEST_F(WatchdogTest, DisarmingEveryDirectoryOfAJobRemovesItsRelayLinesAlsoWhereTheDirectoryIsGone) {
  const fs::path home = scratch_ / "home";
  fs::create_directories(home / ".ssh");
  const std::string before = "ssh-ed25519 AAAAmine me@here\nssh-ed25519 AAAAother barge-relay:/tmp/barge-other.abcdefabcdef\n";
  std::ofstream(home / ".ssh" / "authorized_keys") << before;
  const std::string env = "export HOME=" + ssh::ShellQuote(home.string()) + "; ";
  ASSERT_EQ(Sh(env + ArmWatchdogCommand(Params(600s))), 0);
  const std::string gone = NewHostJobDir(job_);  // never made on this "host"
  const std::string lines = RelayAuthorizedKey(jobdir_, "10.0.0.1", "ssh-ed25519 AAAAone") +
                            RelayAuthorizedKey(gone, "10.0.0.2", "ssh-ed25519 AAAAtwo");
  ASSERT_EQ(Sh(env + "printf %s " + ssh::ShellQuote(lines) + " | { " + RelayAuthorizeCommand(jobdir_) + "; }"), 0);
  ASSERT_EQ(ReadAll((home / ".ssh" / "authorized_keys").string()), before + lines);
  ASSERT_EQ(Sh(env + DisarmJobWatchdogsCommand(job_)), 0);
  EXPECT_FALSE(fs::exists(jobdir_));
  EXPECT_EQ(ReadAll((home / ".ssh" / "authorized_keys").string()), before);
}

// Issue #42 (item 5): a failed job kept for a look (on_failure.keep). Its
// head has exited and its timeout passes while it is kept; neither ends it
// (the controller keeps it on purpose), the keep's deadline on the host's
// clock does, even when no controller renews anything any more.
TEST_F(WatchdogTest, AKeptJobOutlivesItsHeadsExitAndItsTimeoutAndGoesAtTheKeepsEnd) {
  std::ofstream(docker_) << "#!/bin/sh\necho \"$*\" >> " << ssh::ShellQuote(log_)
                         << "\ncase $1 in ps) echo c1; echo c2 ;; inspect) echo false ;; esac\n";
  WatchdogParams p = Params(600s);
  p.head_container = "barge-head";
  p.deadline_after = 1s;  // the timeout: passed before the keep ends
  ASSERT_EQ(Sh(ArmWatchdogCommand(p)), 0);
  const long long before = static_cast<long long>(time(nullptr));
  ASSERT_EQ(Sh(KeepUntilCommand(jobdir_, 4s)), 0);
  const std::string kept = ReadAll(jobdir_ + "/keep");
  ASSERT_TRUE(std::regex_match(kept, std::regex("[0-9]+\n"))) << "no keep deadline on the host: '" << kept << "'";
  const long long until = std::stoll(kept);
  EXPECT_GE(until, before + 4);
  EXPECT_FALSE(fs::exists(jobdir_ + "/keep.next"));
  // Past the head rule's grace (1 s) and the timeout (1 s), lease never renewed.
  std::this_thread::sleep_for(2500ms);
  EXPECT_TRUE(fs::exists(jobdir_)) << "the head's exit or the timeout ended a kept job";
  EXPECT_THAT(ReadAll(log_), ::testing::Not(::testing::HasSubstr("rm -f")));
  long long gone_at = 0;
  EXPECT_TRUE(Within(6000ms, [&] {
    gone_at = static_cast<long long>(time(nullptr));
    return !fs::exists(jobdir_);
  })) << "the job directory is still there after the keep's end";
  EXPECT_GE(gone_at, until) << "the watchdog ended the keep early";
  EXPECT_THAT(ReadAll(log_), ::testing::HasSubstr("rm -f c1 c2"));
}

TEST_F(WatchdogTest, ALapsedLeaseStillEndsAKeptJob) {
  ASSERT_EQ(Sh(ArmWatchdogCommand(Params(1s))), 0);
  ASSERT_EQ(Sh(KeepUntilCommand(jobdir_, 600s)), 0);
  const std::string dir = jobdir_;
  EXPECT_TRUE(Within(5000ms, [&] { return !fs::exists(dir); })) << "the job directory is still there";
  EXPECT_THAT(ReadAll(log_), ::testing::HasSubstr("rm -f c1 c2"));
}

TEST(KeepUntil, TheLineCarriesTheTimeLeftAsADurationAndWritesOnlyInTheJobsOwnDirectory) {
  const std::string line = KeepUntilCommand("/tmp/barge-0123abcd.aaaaaaaaaaaa", 95s);
  EXPECT_NE(line.find("$(($(date +%s) + 95))"), std::string::npos) << line;
  EXPECT_EQ(line.rfind(OwnDirTest("/tmp/barge-0123abcd.aaaaaaaaaaaa") + " && ", 0), 0u) << line;
}

TEST_F(WatchdogTest, ARenewedLeaseKeepsTheJobAndDisarmingEndsTheLoop) {
  ASSERT_EQ(Sh(ArmWatchdogCommand(Params(2s))), 0);
  const std::string dir = jobdir_;
  const pid_t pid = std::stoi(ReadAll(dir + "/watchdog.pid"));
  for (int i = 0; i < 8; ++i) {  // 4 s: twice the lease
    ASSERT_EQ(Sh(RenewLeaseCommand(jobdir_)), 0);
    std::this_thread::sleep_for(500ms);
  }
  EXPECT_TRUE(fs::exists(dir));
  EXPECT_THAT(ReadAll(log_), ::testing::Not(::testing::HasSubstr("rm -f")));
  ASSERT_EQ(Sh(DisarmWatchdogCommand(jobdir_)), 0);
  EXPECT_FALSE(fs::exists(dir));
  // Gone, or a zombie waiting for a late reaper: not running either way.
  EXPECT_TRUE(Within(3000ms, [&] {
    std::string stat = ReadAll("/proc/" + std::to_string(pid) + "/stat");
    return stat.empty() || stat.find(") Z ") != std::string::npos;
  }));
}

// The directories disarming moves `dir` into (`dir`.gone.XXXXXX, mktemp's)
// that are still there, by name.
std::vector<std::string> GoneDirsOf(const std::string& dir) {
  const std::string prefix = fs::path(dir).filename().string() + ".gone.";
  std::vector<std::string> found;
  for (const auto& e : fs::directory_iterator(fs::path(dir).parent_path())) {
    if (e.path().filename().string().rfind(prefix, 0) == 0) found.push_back(e.path().filename().string());
  }
  return found;
}

TEST_F(WatchdogTest, DisarmingAtAnyPointOfATickLeavesNoDirectoryBehindInTenRounds) {
  const std::string dir = jobdir_;
  for (int round = 0; round < 10; ++round) {
    ASSERT_EQ(Sh(ArmWatchdogCommand(Params(2s))), 0);
    // Spread over one tick (1 s): the disarm meets the loop at every step.
    std::this_thread::sleep_for(std::chrono::milliseconds(1000 + 100 * round));
    ASSERT_EQ(Sh(DisarmWatchdogCommand(jobdir_)), 0);
    std::this_thread::sleep_for(200ms);
    EXPECT_FALSE(fs::exists(dir)) << "round " << round;
    EXPECT_EQ(GoneDirsOf(dir), std::vector<std::string>{}) << "round " << round;
  }
}

// The PIDs of the processes in process group `pgid` that are running
// (zombies waiting for a late reaper do not count).
std::vector<pid_t> RunningInGroup(pid_t pgid) {
  std::vector<pid_t> found;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string stat = ReadAll(e.path().string() + "/stat");
    const size_t close = stat.rfind(") ");
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    std::string state;
    long ppid = 0, pgrp = 0;
    rest >> state >> ppid >> pgrp;
    if (pgrp == pgid && state != "Z" && state != "X") found.push_back(std::stoi(name));
  }
  return found;
}

TEST_F(WatchdogTest, DisarmingEndsTheWatchdogAndItsSleepAtOnceWithinOneSecond) {
  WatchdogParams p = Params(600s);
  p.grace = 20s;  // a 10 s tick: the loop sits in `sleep 10`
  ASSERT_EQ(Sh(ArmWatchdogCommand(p)), 0);
  const pid_t pid = std::stoi(ReadAll(jobdir_ + "/watchdog.pid"));
  ASSERT_TRUE(Within(2000ms, [&] { return RunningInGroup(pid).size() >= 2; }))
      << "the watchdog and its sleep should both run in group " << pid;
  ASSERT_EQ(Sh(DisarmWatchdogCommand(jobdir_)), 0);
  EXPECT_TRUE(Within(1000ms, [&] { return RunningInGroup(pid).empty(); }))
      << RunningInGroup(pid).size() << " processes of the watchdog's group still run";
}

// The common end of a job: disarming a watchdog (no relay on the host)
// runs two programs, the directory mode's `stat` and `rm` (every other
// step is a shell builtin), and ends the watchdog.
TEST_F(WatchdogTest, DisarmingAWatchdogWithNoRelayRunsOnlyStatAndRm) {
  WatchdogParams p = Params(600s);
  p.grace = 20s;  // a 10 s tick: the loop sits in `sleep 10`
  ASSERT_EQ(Sh(ArmWatchdogCommand(p)), 0);
  const pid_t pid = std::stoi(ReadAll(jobdir_ + "/watchdog.pid"));
  ASSERT_TRUE(Within(2000ms, [&] { return RunningInGroup(pid).size() >= 2; }));
  // Every program a disarm could run, each logging its name, then the real one.
  const fs::path bin = scratch_ / "bin";
  const std::string ran = (scratch_ / "ran").string();
  fs::create_directories(bin);
  for (const char* name : {"stat", "rm", "mktemp", "mv", "tr", "cat", "grep", "head", "wc", "rmdir", "kill", "sleep"}) {
    const std::string real = "/usr/bin/" + std::string(name);
    const std::string at = fs::exists(real) ? real : "/bin/" + std::string(name);
    std::ofstream(bin / name) << "#!/bin/sh\necho " << name << " >> " << ssh::ShellQuote(ran) << "\nexec "
                              << ssh::ShellQuote(at) << " \"$@\"\n";
    fs::permissions(bin / name, fs::perms::owner_all);
  }
  ASSERT_EQ(Sh("PATH=" + ssh::ShellQuote(bin.string()) + "; export PATH; " + DisarmWatchdogCommand(jobdir_)), 0);
  EXPECT_EQ(ReadAll(ran), "stat\nrm\n");
  EXPECT_FALSE(fs::exists(jobdir_));
  EXPECT_TRUE(Within(1000ms, [&] { return RunningInGroup(pid).empty(); }))
      << RunningInGroup(pid).size() << " processes of the watchdog's group still run";
}

// A watchdog.pid that is not this job's watchdog is never signalled: not a
// number, a negative one (kill -1 would end every process of ours), or the
// PID of another process (one of ours leading its own group, but not the
// watchdog): without a start time (an older barge's file), with another
// start time than that process's (a PID reused), or with more than the two
// numbers.
TEST_F(WatchdogTest, DisarmingSignalsNothingButThisJobsWatchdog) {
  const std::string dir = jobdir_;
  // A bystander leading its own group, as the watchdog does.
  pid_t bystander = fork();
  ASSERT_GE(bystander, 0);
  if (bystander == 0) {
    setsid();
    execlp("sleep", "sleep", "30", static_cast<char*>(nullptr));
    _exit(127);
  }
  // The bystander's start time (field 22 of /proc/PID/stat) and one off it:
  // a PID of ours reused by another process has another start time.
  const std::string stat_line = ReadAll("/proc/" + std::to_string(bystander) + "/stat");
  std::istringstream fields(stat_line.substr(stat_line.rfind(") ") + 2));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
  }
  ASSERT_FALSE(field.empty());
  const std::string other_start = std::to_string(std::stoll(field) + 1);
  for (const std::string& planted :
       {std::string("-1"), std::string("-9 -1"), "-" + std::to_string(bystander),
        std::to_string(bystander), std::to_string(bystander) + " " + other_start,
        std::to_string(bystander) + " " + field + " 1", std::string("$(touch x)")}) {
    fs::create_directories(dir);
    ASSERT_EQ(chmod(dir.c_str(), 0700), 0);  // as barge makes it (MakeOwnDir)
    std::ofstream(dir + "/watchdog.pid") << planted << "\n";
    ASSERT_EQ(Sh(DisarmWatchdogCommand(jobdir_)), 0) << planted;
    EXPECT_FALSE(fs::exists(dir)) << planted;
    std::string stat = ReadAll("/proc/" + std::to_string(bystander) + "/stat");
    EXPECT_TRUE(!stat.empty() && stat.find(") Z ") == std::string::npos)
        << "the bystander was signalled through watchdog.pid '" << planted << "'";
  }
  kill(bystander, SIGKILL);
  waitpid(bystander, nullptr, 0);
}

// A directory named like the old fixed rename target, made beforehand, does
// not receive the job's directory, and its watchdog.pid is not read.
TEST_F(WatchdogTest, APremadeGoneDirectoryIsNeitherUsedNorReadAtDisarm) {
  const std::string dir = jobdir_;
  ASSERT_EQ(Sh(ArmWatchdogCommand(Params(600s))), 0);
  const pid_t pid = std::stoi(ReadAll(dir + "/watchdog.pid"));
  fs::create_directories(dir + ".gone");
  std::ofstream(dir + ".gone/watchdog.pid") << "-1\n";
  ASSERT_EQ(Sh(DisarmWatchdogCommand(jobdir_)), 0);
  EXPECT_FALSE(fs::exists(dir));
  EXPECT_FALSE(fs::exists(dir + ".gone/" + fs::path(dir).filename().string()));
  EXPECT_EQ(ReadAll(dir + ".gone/watchdog.pid"), "-1\n");
  EXPECT_TRUE(Within(1000ms, [&] { return RunningInGroup(pid).empty(); }));
  fs::remove_all(dir + ".gone");
}

// Issue #40 (item 12): disarming reads, moves and removes nothing of a
// directory at the job's path that is not this user's own. uid 65534's
// directory there names one of our own watchdogs of this job in its
// watchdog.pid (one that passes every PID check); it is neither moved,
// read nor removed, and that watchdog keeps running.
TEST_F(WatchdogTest, DisarmingLeavesAnotherUsersDirectoryAtTheJobsPathUnreadAndUnmoved) {
  WatchdogParams ours = Params(600s);
  ours.dir = NewHostJobDir(job_);
  ASSERT_EQ(Sh(ArmWatchdogCommand(ours)), 0);
  const pid_t pid = std::stoi(ReadAll(ours.dir + "/watchdog.pid"));
  fs::create_directories(jobdir_);
  std::ofstream(jobdir_ + "/watchdog.pid") << pid << "\n";
  ASSERT_EQ(chown((jobdir_ + "/watchdog.pid").c_str(), 65534, 65534), 0);
  ASSERT_EQ(chmod(jobdir_.c_str(), 0700), 0);
  ASSERT_EQ(chown(jobdir_.c_str(), 65534, 65534), 0);
  ASSERT_EQ(Sh(DisarmWatchdogCommand(jobdir_)), 0);
  EXPECT_EQ(ReadAll(jobdir_ + "/watchdog.pid"), std::to_string(pid) + "\n") << "another user's directory was moved or removed";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::path(jobdir_).parent_path(), ec)) {
    EXPECT_EQ(e.path().string().rfind(jobdir_ + ".gone.", 0), std::string::npos) << e.path();
  }
  std::string stat = ReadAll("/proc/" + std::to_string(pid) + "/stat");
  EXPECT_TRUE(!stat.empty() && stat.find(") Z ") == std::string::npos)
      << "our watchdog was signalled through another user's watchdog.pid";
  ASSERT_EQ(Sh(DisarmWatchdogCommand(ours.dir)), 0);
  EXPECT_TRUE(Within(3000ms, [&] { return RunningInGroup(pid).empty(); }));
  fs::remove_all(jobdir_);
}

// Issue #29: another user of the host could make a job's directory first
// when its name was fixed (/tmp/barge-<job id>: the id shows in ps); the
// name is now drawn at each setup, but a name seen in /tmp still must not
// be trusted once it was out of barge's hands. barge then uses nothing
// there.
class ForeignJobDirTest : public WatchdogTest {
 protected:
  // The job's directory, made first by uid 65534 (nobody), open to all.
  void MakeForeign() {
    dir_ = jobdir_;
    fs::create_directories(dir_);
    ASSERT_EQ(chown(dir_.c_str(), 65534, 65534), 0);
    fs::permissions(dir_, fs::perms::all);
  }
  // Runs `line` under sh with `input` on stdin; its stderr in *err.
  int ShWithInput(const std::string& line, const std::string& input, std::string* err) {
    const std::string in = (scratch_ / "stdin").string(), e = (scratch_ / "stderr").string();
    std::ofstream(in) << input;
    const int status = Sh("{ " + line + "; } <" + ssh::ShellQuote(in) + " 2>" + ssh::ShellQuote(e));
    *err = ReadAll(e);
    return status;
  }
  void TearDown() override {
    fs::remove_all(dir_);
    WatchdogTest::TearDown();
  }
  std::string dir_;
};

TEST_F(ForeignJobDirTest, ArmingRefusesADirectoryAnotherUserMadeFirstNamingItAndWritesNothing) {
  MakeForeign();
  std::string err;
  EXPECT_NE(ShWithInput(ArmWatchdogCommand(Params(600s)), "", &err), 0);
  EXPECT_NE(err.find("barge: " + dir_ + " is not a directory of this user with mode 0700"), std::string::npos)
      << err;
  EXPECT_FALSE(fs::exists(dir_ + "/lease"));
  EXPECT_FALSE(fs::exists(dir_ + "/watchdog.pid"));
  // (Processes that end while grep reads /proc make it exit 2: only the
  // names it prints count.)
  EXPECT_EQ(Sh("! grep -ls " + ssh::ShellQuote("[b]arge-watchdog-" + job_) + " /proc/[0-9]*/cmdline | grep -q ."), 0)
      << "a watchdog started";
}

TEST_F(ForeignJobDirTest, SecretsRegistryConfigAndUploadsAreNotWrittenIntoIt) {
  MakeForeign();
  std::string err;
  EXPECT_NE(ShWithInput(WriteSecretCommand(jobdir_, SecretsDir(jobdir_) + "/TOKEN"), "s3cret", &err), 0);
  EXPECT_NE(err.find("not a directory of this user"), std::string::npos) << err;
  EXPECT_NE(ShWithInput(ReceiveFileCommand(jobdir_, 0), "data", &err), 0);
  EXPECT_NE(ShWithInput(ReceiveWorkdirCommand(jobdir_), "", &err), 0);
  DockerCommands docker({"docker"});
  EXPECT_NE(ShWithInput(docker.Login(DockerConfigDir(jobdir_), "registry.example", "u"), "pw", &err), 0);
  EXPECT_NE(ShWithInput(RenewLeaseCommand(jobdir_), "", &err), 0);
  EXPECT_TRUE(fs::is_empty(dir_)) << "something was written into another user's directory";
}

TEST_F(ForeignJobDirTest, ASymlinkOrAnOwnDirectoryWithAWideModeIsRefusedToo) {
  dir_ = jobdir_;
  const std::string target = (scratch_ / "elsewhere").string();
  fs::create_directories(target);
  fs::permissions(target, fs::perms::owner_all, fs::perm_options::replace);
  fs::create_directory_symlink(target, dir_);
  std::string err;
  EXPECT_NE(ShWithInput(ArmWatchdogCommand(Params(600s)), "", &err), 0) << "a symlink was followed";
  EXPECT_FALSE(fs::exists(target + "/lease"));
  fs::remove(dir_);
  fs::create_directories(dir_);
  fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                            fs::perms::others_read | fs::perms::others_exec,
                  fs::perm_options::replace);
  EXPECT_NE(ShWithInput(WriteSecretCommand(jobdir_, SecretsDir(jobdir_) + "/TOKEN"), "s3cret", &err), 0);
  EXPECT_FALSE(fs::exists(SecretsDir(jobdir_)));
}

// The registry login comes before the watchdog is armed: it makes the
// job's directory itself (and refuses another user's, as above).
TEST_F(ForeignJobDirTest, TheRegistryLoginMakesTheJobsDirectoryWhenItIsNotThereYet) {
  dir_ = jobdir_;
  DockerCommands docker({"true"});
  std::string err;
  EXPECT_EQ(ShWithInput(docker.Login(DockerConfigDir(jobdir_), "registry.example", "u"), "pw", &err), 0) << err;
  EXPECT_TRUE(fs::is_directory(DockerConfigDir(jobdir_)));
  EXPECT_EQ(fs::status(dir_).permissions() & fs::perms::all, fs::perms::owner_all);
  EXPECT_EQ(Sh(ArmWatchdogCommand(Params(600s))), 0) << "arming after the login finds its own directory";
}

TEST_F(ForeignJobDirTest, TheJobsOwnDirectoryIsUsedAsBefore) {
  ASSERT_EQ(Sh(ArmWatchdogCommand(Params(600s))), 0);
  dir_ = jobdir_;
  std::string err;
  EXPECT_EQ(ShWithInput(WriteSecretCommand(jobdir_, SecretsDir(jobdir_) + "/TOKEN"), "s3cret", &err), 0) << err;
  EXPECT_EQ(ReadAll(SecretsDir(jobdir_) + "/TOKEN"), "s3cret");
  EXPECT_EQ(ShWithInput(RenewLeaseCommand(jobdir_), "", &err), 0) << err;
  // Arming again (a reconnect) finds its own directory and goes on.
  EXPECT_EQ(ShWithInput(ArmWatchdogCommand(Params(600s)), "", &err), 0) << err;
}

TEST(HostJobDirName, IsDrawnAnewForEachSetupAndHasTwelveRandomCharacters) {
  const std::string a = NewHostJobDir("0123abcd"), b = NewHostJobDir("0123abcd");
  EXPECT_NE(a, b);
  EXPECT_TRUE(std::regex_match(a, std::regex("/tmp/barge-0123abcd\\.[a-z0-9]{12}"))) << a;
  EXPECT_EQ(HostJobDirShown("0123abcd"), "/tmp/barge-0123abcd.XXXXXXXXXXXX");
}

// `barge down` of a job whose controller is gone does not know the names
// drawn: it disarms every directory of the job that is the user's own, and
// another user's directory of that pattern is neither read nor removed.
TEST_F(WatchdogTest, DisarmingEveryDirectoryOfAJobEndsOurWatchdogsAndLeavesAnotherUsersDirectoryAlone) {
  const std::string second = NewHostJobDir(job_);
  WatchdogParams p2 = Params(600s);
  p2.dir = second;
  ASSERT_EQ(Sh(ArmWatchdogCommand(Params(600s))), 0);
  ASSERT_EQ(Sh(ArmWatchdogCommand(p2)), 0);
  const pid_t first_pid = std::stoi(ReadAll(jobdir_ + "/watchdog.pid"));
  const pid_t second_pid = std::stoi(ReadAll(second + "/watchdog.pid"));
  // uid 65534's directory of the job's pattern, naming a process of ours.
  const std::string foreign = "/tmp/barge-" + job_ + ".zzzzzzzzzzzz";
  fs::create_directories(foreign);
  std::ofstream(foreign + "/watchdog.pid") << first_pid << "\n";
  ASSERT_EQ(chown((foreign + "/watchdog.pid").c_str(), 65534, 65534), 0);
  ASSERT_EQ(chown(foreign.c_str(), 65534, 65534), 0);
  ASSERT_EQ(Sh(DisarmJobWatchdogsCommand(job_)), 0);
  EXPECT_FALSE(fs::exists(jobdir_));
  EXPECT_FALSE(fs::exists(second));
  EXPECT_TRUE(fs::exists(foreign + "/watchdog.pid")) << "another user's directory was touched";
  for (pid_t pid : {first_pid, second_pid}) {
    EXPECT_TRUE(Within(3000ms, [&] {
      std::string stat = ReadAll("/proc/" + std::to_string(pid) + "/stat");
      return stat.empty() || stat.find(") Z ") != std::string::npos;
    })) << "watchdog " << pid << " still runs";
  }
  fs::remove_all(foreign);
}

}  // namespace
}  // namespace barge::runner
