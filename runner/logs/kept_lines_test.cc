#include "runner/logs/kept_lines.h"

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <string>

#include "tests/support/ssh_test_util.h"

namespace barge::runner {
namespace {

size_t Hash(std::string_view text) { return std::hash<std::string_view>{}(text); }

TEST(KeptLines, CountsEachStreamsLinesFromTheLastRestartOnAndHashesTheLastText) {
  ssh::testing::TempDir dir;
  const std::string path = dir.File("0-h1.log");
  std::ofstream(path) << "2026-11-25T04:00:00.000000001Z stdout old attempt\n"
                         "2026-11-25T04:00:00.000000002Z stderr old err\n"
                         "2026-11-25T04:00:01.000000000Z stdout a\n"
                         "2026-11-25T04:00:01.000000001Z stderr e 1\n"
                         " stdout continuation piece of a\n"
                         "2026-11-25T04:00:01.000000002Z stdout \n"
                         "2026-11-25T04:00:01.000000003Z stderr e 2\n"
                         "2026-11-25T04:00:01.000000004Z stdout last text\n"
                         "not a kept line\n";
  KeptLines all = CountKeptLines(path, std::nullopt);
  EXPECT_TRUE(all.found);
  EXPECT_EQ(all.lines[0], 4u);
  EXPECT_EQ(all.lines[1], 3u);
  // 2026-11-25T04:00:01Z: the restart.
  KeptLines since = CountKeptLines(path, int64_t{1795579201} * 1000000000);
  EXPECT_EQ(since.lines[0], 3u);  // "a", "" and "last text"
  EXPECT_EQ(since.lines[1], 2u);
  EXPECT_EQ(since.last_hash[0], Hash("last text"));
  EXPECT_EQ(since.last_hash[1], Hash("e 2"));
  KeptLines missing = CountKeptLines(dir.File("none.log"), std::nullopt);
  EXPECT_FALSE(missing.found);
  EXPECT_EQ(missing.lines[0] + missing.lines[1], 0u);
}

}  // namespace
}  // namespace barge::runner
