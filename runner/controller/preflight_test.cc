#include "runner/controller/preflight.h"

#include <gtest/gtest.h>

namespace barge::runner {
namespace {

TEST(Preflight, AFilesystemUnder256MiBFreeIsOneProblemPerMountPoint) {
  const std::string df =
      "Filesystem     1024-blocks    Used Available Capacity Mounted on\n"
      "tmpfs               16384   12288      4096      75% /tmp\n"
      "/dev/sda1        10000000 1000000   9000000      10% /\n"
      "tmpfs               16384   12288      4096      75% /tmp\n";
  std::vector<std::string> problems = LowDiskSpace(df);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0], "disk full: 4 MiB free on /tmp (barge needs 256 MiB there)");
}

TEST(Preflight, ExactlyTheThresholdIsEnough) {
  const std::string df = "fs 1 1 " + std::to_string(kMinFreeKib) + " 1% /var/lib/docker\n";
  EXPECT_TRUE(LowDiskSpace(df).empty());
  const std::string less = "fs 1 1 " + std::to_string(kMinFreeKib - 1) + " 1% /var/lib/docker\n";
  EXPECT_EQ(LowDiskSpace(less).size(), 1u);
}

TEST(Preflight, TheProblemTableNamesEveryHostOnEachOfItsRows) {
  std::string table = ProblemTable({{"h1", {"one", "two"}}, {"host-22", {"three"}}}, 3);
  EXPECT_EQ(table,
            "preflight failed on 2 of 3 host(s); nothing was started:\n"
            "  HOST     PROBLEM\n"
            "  h1       one\n"
            "  h1       two\n"
            "  host-22  three");
}

}  // namespace
}  // namespace barge::runner
