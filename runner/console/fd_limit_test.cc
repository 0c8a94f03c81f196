// Tests of the open-file budget: the estimate, the message, and the raise.
#include "runner/console/fd_limit.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

namespace barge::runner {
namespace {

using ::testing::HasSubstr;

TEST(FdLimit, NeedGrowsByAtLeastThreePerHostWithOneNodeEach) {
  const uint64_t base = OpenFilesNeeded(0, 0);
  EXPECT_GE(base, 32u);
  EXPECT_GE(OpenFilesNeeded(1000, 1000), base + 3000);
  // The margin is a quarter, not a multiple.
  EXPECT_LE(OpenFilesNeeded(1000, 1000), base + 3750);
}

TEST(FdLimit, AThousandHostsFitInAHardLimitOf4096ButNotInTheDefaultSoft1024) {
  EXPECT_TRUE(CheckOpenFileLimit(1000, 1000, {4096, 4096}).ok());
  EXPECT_FALSE(CheckOpenFileLimit(1000, 1000, {1024, 1024}).ok());
  EXPECT_TRUE(CheckOpenFileLimit(64, 64, {1024, 1024}).ok());
}

TEST(FdLimit, TheErrorNamesTheNeedTheHostCountTheLimitsAndTheFix) {
  Status s = CheckOpenFileLimit(1000, 1000, {1024, 1024});
  ASSERT_FALSE(s.ok());
  const std::string need = std::to_string(OpenFilesNeeded(1000, 1000));
  EXPECT_THAT(s.message(), HasSubstr("barge needs about " + need + " open files for 1000 hosts"));
  EXPECT_THAT(s.message(), HasSubstr("the open-file limit is 1024 (hard limit 1024)"));
  EXPECT_THAT(s.message(), HasSubstr("ulimit -Hn " + need));
  EXPECT_THAT(s.message(), HasSubstr("nothing was started"));
}

TEST(FdLimit, UnlimitedReadsAsUnlimitedAndIsEnough) {
  EXPECT_TRUE(CheckOpenFileLimit(100000, 100000, {UINT64_MAX, UINT64_MAX}).ok());
}

// In a child, so the test binary's own limit stays as it was.
TEST(FdLimit, RaiseLiftsTheSoftLimitToTheHardLimit) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    rlimit rl{};
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) _exit(10);
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < 256) _exit(11);  // cannot test here
    rlimit low = rl;
    low.rlim_cur = 128;
    if (setrlimit(RLIMIT_NOFILE, &low) != 0) _exit(12);
    Result<OpenFileLimit> raised = RaiseOpenFileLimit();
    if (!raised.ok()) _exit(13);
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) _exit(14);
    if (rl.rlim_cur <= 128) _exit(15);
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_cur != rl.rlim_max) _exit(16);
    if (raised->soft != rl.rlim_cur) _exit(17);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "step that failed: see the exit codes in the test";
}

}  // namespace
}  // namespace barge::runner
