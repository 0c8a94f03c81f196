#include "base/json_depth.h"

#include <gtest/gtest.h>

#include <string>

namespace barge {
namespace {

TEST(JsonNesting, CountsArraysAndObjectsOutsideStringsUpToTheBound) {
  EXPECT_TRUE(JsonNestingWithin(R"({"a": [1, {"b": [2]}]})", 4));
  EXPECT_FALSE(JsonNestingWithin(R"({"a": [1, {"b": [2]}]})", 3));
  // Brackets in strings, escaped quotes included, do not count.
  EXPECT_TRUE(JsonNestingWithin(R"({"a": "[[[[\"[[[["})", 1));
  EXPECT_TRUE(JsonNestingWithin("", 0));
  EXPECT_TRUE(JsonNestingWithin("]]]]}}", 0));
  EXPECT_TRUE(JsonNestingWithin(std::string(kMaxJsonNesting, '[')));
  EXPECT_FALSE(JsonNestingWithin(std::string(kMaxJsonNesting + 1, '[')));
  // A deep one after many shallow ones.
  std::string text;
  for (int i = 0; i < 1000; ++i) text += "[1],";
  EXPECT_TRUE(JsonNestingWithin(text, 1));
  EXPECT_FALSE(JsonNestingWithin(text + std::string(2, '['), 1));
}

}  // namespace
}  // namespace barge
