#include "base/lines.h"

#include <gtest/gtest.h>

#include <string_view>
#include <vector>

namespace barge {
namespace {

using V = std::vector<std::string_view>;

TEST(SplitLines, SplitsAtNewlinesDropsCarriageReturnsAndMakesNoEmptyLastLine) {
  EXPECT_EQ(SplitLines("a\nb\r\n\nc"), (V{"a", "b", "", "c"}));
  EXPECT_EQ(SplitLines("a\n"), (V{"a"}));
  EXPECT_EQ(SplitLines(""), V{});
  EXPECT_EQ(SplitLines("\n"), (V{""}));
  EXPECT_EQ(SplitLines("x\r"), (V{"x"}));
}

}  // namespace
}  // namespace barge
