// An AddressSanitizer build of barge (BARGE_BINARY here is build-asan's,
// made by scripts/test.sh with -DBARGE_SANITIZE=ON) through the moments
// where a phase stops waiting before its remote commands have answered: a
// Ctrl-C during preflight on a host whose dockerd is frozen, a Ctrl-C while
// the workers start, a deadline hit in teardown. Each frozen dockerd thaws
// later, so the late answers arrive while barge still polls: before the
// CommandGroup reshape they were delivered into a returned stack frame
// (stack-use-after-return, or a segfault in a release build). Passes only
// with the right exit code and no sanitizer report.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <signal.h>

#include "tests/support/bed_job.h"

namespace {

using barge::testing::BedHostsYaml;
using barge::testing::CliOutcome;
using barge::testing::GetBed;
using barge::testing::JobContainers;
using barge::testing::JobDir;
using barge::testing::RunShell;
using namespace std::chrono_literals;

void SignalDockerd(const std::string& host, int sig) {
  std::ifstream in(GetBed().raw.at("BED_HOST_" + host + "_DOCKERD_PIDFILE"));
  int pid = 0;
  in >> pid;
  ASSERT_GT(pid, 0);
  kill(pid, sig);
}

void ExpectNoSanitizerReport(const CliOutcome& o) {
  EXPECT_EQ(o.err.find("AddressSanitizer"), std::string::npos) << o.err;
  EXPECT_EQ(o.err.find("runtime error:"), std::string::npos) << o.err;
}

class AsanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(BARGE_BINARY))
        << BARGE_BINARY << " is missing: scripts/test.sh builds it (BUILD_DIR=build-asan, -DBARGE_SANITIZE=ON)";
    ASSERT_GE(GetBed().hosts.size(), 2u);
    setenv("ASAN_OPTIONS", "detect_stack_use_after_return=1:detect_leaks=0", 1);
    job_ = std::make_unique<JobDir>(std::string("asan-") +
                                    ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override {
    SignalDockerd("h2", SIGCONT);
    for (size_t i = 0; i < 2; ++i) {
      const auto& h = GetBed().hosts[i];
      const auto end = std::chrono::steady_clock::now() + 30s;
      while (!JobContainers(h).empty() && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(250ms);
      EXPECT_EQ(JobContainers(h), "") << "a container of the job was left on " << h.name;
    }
    job_.reset();
  }
  std::string Yaml(const std::string& name, const std::string& head_command) {
    return "name: " + name + "\nimage: " + GetBed().image + "\n" + BedHostsYaml(0, 2, "  dead_after: 10s\n") +
           "stop_grace: 1s\nlease: 20s\nroles:\n  head: {command: ['sh', '-c', '" + head_command +
           "']}\n  worker: {command: ['sleep', '600']}\n";
  }
  std::unique_ptr<JobDir> job_;
};

TEST_F(AsanTest, ACtrlCDuringPreflightOnAFrozenEngineExits130WithNoSanitizerReport) {
  job_->Write(Yaml("asanpre", "sleep 600"));
  SignalDockerd("h2", SIGSTOP);
  pid_t pid = job_->Start("run job.yaml");
  ASSERT_TRUE(job_->WaitFor("err.txt", "preflight")) << "preflight never began";
  std::this_thread::sleep_for(1500ms);
  kill(pid, SIGINT);
  std::this_thread::sleep_for(500ms);
  SignalDockerd("h2", SIGCONT);  // its answers now arrive while barge tears down
  CliOutcome o = job_->Wait(pid, 120s);
  EXPECT_EQ(o.code, 130) << o.err;
  ExpectNoSanitizerReport(o);
}

TEST_F(AsanTest, ACtrlCWhileTheWorkersStartExits130WithNoSanitizerReport) {
  job_->Write(Yaml("asanstart", "sleep 600"));
  pid_t pid = job_->Start("run job.yaml");
  ASSERT_TRUE(job_->WaitFor("err.txt", "starting the head")) << "the head never started";
  SignalDockerd("h2", SIGSTOP);  // the worker's docker run now hangs
  ASSERT_TRUE(job_->WaitFor("err.txt", "starting workers"));
  std::this_thread::sleep_for(1000ms);
  kill(pid, SIGINT);
  std::this_thread::sleep_for(1000ms);
  SignalDockerd("h2", SIGCONT);
  CliOutcome o = job_->Wait(pid, 120s);
  EXPECT_EQ(o.code, 130) << o.err;
  ExpectNoSanitizerReport(o);
}

TEST_F(AsanTest, ADeadlineHitInTeardownEndsTheJobWithTheHeadsCodeAndNoSanitizerReport) {
  // The head ends after 4 s; h2's engine freezes as teardown begins, so its
  // docker stop outlives the drain deadline (stop_grace 1 s + 15 s); it
  // thaws 3 s after that and answers into a phase that has moved on.
  job_->Write(Yaml("asandown", "sleep 4; exit 3"));
  pid_t pid = job_->Start("run job.yaml");
  ASSERT_TRUE(job_->WaitFor("err.txt", "starting workers"));
  ASSERT_TRUE(job_->WaitFor("err.txt", "head ended", 60s));
  SignalDockerd("h2", SIGSTOP);
  std::this_thread::sleep_for(19s);
  SignalDockerd("h2", SIGCONT);
  CliOutcome o = job_->Wait(pid, 180s);
  EXPECT_EQ(o.code, 3) << o.err;
  ExpectNoSanitizerReport(o);
}

}  // namespace
