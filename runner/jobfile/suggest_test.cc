#include "runner/jobfile/suggest.h"

#include <gtest/gtest.h>

#include <string_view>

namespace barge::runner {
namespace {

TEST(EditDistance, CountsInsertionsDeletionsSubstitutionsAndSwaps) {
  EXPECT_EQ(EditDistance("", ""), 0u);
  EXPECT_EQ(EditDistance("abc", ""), 3u);
  EXPECT_EQ(EditDistance("", "abc"), 3u);
  EXPECT_EQ(EditDistance("shm_sise", "shm_size"), 1u);  // substitution
  EXPECT_EQ(EditDistance("imgae", "image"), 1u);        // adjacent swap
  EXPECT_EQ(EditDistance("hots", "hosts"), 1u);         // insertion
  EXPECT_EQ(EditDistance("workers", "worker"), 1u);     // deletion
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
}

constexpr std::string_view kKeys[] = {"name",  "image",      "command", "container",
                                      "hosts", "hosts_file", "shm_size"};

TEST(ClosestMatch, SuggestsTheNearestKeyForATypo) {
  EXPECT_EQ(ClosestMatch("imgae", kKeys), "image");
  EXPECT_EQ(ClosestMatch("hots", kKeys), "hosts");
  EXPECT_EQ(ClosestMatch("shm-size", kKeys), "shm_size");
  EXPECT_EQ(ClosestMatch("containr", kKeys), "container");
  EXPECT_EQ(ClosestMatch("host_file", kKeys), "hosts_file");
}

TEST(ClosestMatch, IgnoresCaseWhenComparing) {
  EXPECT_EQ(ClosestMatch("Name", kKeys), "name");
  EXPECT_EQ(ClosestMatch("IMAGE", kKeys), "image");
}

TEST(ClosestMatch, SuggestsNothingForExactMatchesOrFarWords) {
  EXPECT_EQ(ClosestMatch("image", kKeys), std::nullopt);
  EXPECT_EQ(ClosestMatch("frobnicate", kKeys), std::nullopt);
  EXPECT_EQ(ClosestMatch("cmd", kKeys), std::nullopt);  // 4 edits from "command"
  EXPECT_EQ(ClosestMatch("lease", kKeys), std::nullopt);
}

TEST(ClosestMatch, AllowsMoreEditsForLongerWords) {
  constexpr std::string_view kConventions[] = {"barge", "torch", "ray", "skypilot"};
  EXPECT_EQ(ClosestMatch("pytorch", kConventions), "torch");   // 2 edits, 7 letters
  EXPECT_EQ(ClosestMatch("tch", kConventions), std::nullopt);  // 2 edits, 3 letters
}

TEST(ClosestMatch, TheEarlierCandidateWinsATie) {
  constexpr std::string_view kTwo[] = {"ab", "ac"};
  EXPECT_EQ(ClosestMatch("aa", kTwo), "ab");
}

}  // namespace
}  // namespace barge::runner
