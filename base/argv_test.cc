#include "base/argv.h"

#include <gtest/gtest.h>

namespace barge {
namespace {

TEST(NullTerminated, PointsAtEachWordInOrderThenNull) {
  std::vector<std::string> words = {"barge", "hosts", ""};
  std::vector<char*> argv = NullTerminated(words);
  ASSERT_EQ(argv.size(), 4u);
  EXPECT_STREQ(argv[0], "barge");
  EXPECT_STREQ(argv[1], "hosts");
  EXPECT_STREQ(argv[2], "");
  EXPECT_EQ(argv[1], words[1].data());
  EXPECT_EQ(argv[3], nullptr);
  std::vector<std::string> none;
  EXPECT_EQ(NullTerminated(none), std::vector<char*>{nullptr});
}

}  // namespace
}  // namespace barge
