#include "runner/array/member_output.h"

#include <gtest/gtest.h>

namespace barge::runner::array {
namespace {

TEST(MemberOutput, ContainerLinesGetTheIndexInTheirBracketAndOthersABracketOfTheirOwn) {
  MemberOutput out(3, true);
  EXPECT_EQ(out.Add("[0 head h1] hel"), "");
  EXPECT_EQ(out.Add("lo\n[1 worker h2] x\nplain"), "[3:0 head h1] hello\n[3:1 worker h2] x\n");
  EXPECT_EQ(out.Flush(), "[3] plain\n");
  EXPECT_EQ(out.Flush(), "");
  MemberOutput err(12, false);
  EXPECT_EQ(err.Add("barge: job abc\n[0/1] preflight\n"), "[12] barge: job abc\n[12] [0/1] preflight\n");
}

}  // namespace
}  // namespace barge::runner::array
