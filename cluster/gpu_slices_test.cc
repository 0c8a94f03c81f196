#include "cluster/gpu_slices.h"

#include <gtest/gtest.h>

namespace barge::cluster {
namespace {

HostGpus Host8(std::set<int> held = {}) {
  HostGpus h;
  h.address = "gpu-a";
  h.total = 8;
  h.held = std::move(held);
  return h;
}

TEST(GpuSlices, FourNodesOfTwoOnAnEightGpuHostGetFourDisjointSlicesInRankOrder) {
  std::vector<GpuClaim> claims = {{3, 0, 2}, {0, 0, 2}, {2, 0, 2}, {1, 0, 2}};
  auto got = AllocateGpuSlices(claims, {{0, Host8()}});
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(*got, (std::map<int, std::vector<int>>{
                      {0, {0, 1}}, {1, {2, 3}}, {2, {4, 5}}, {3, {6, 7}}}));
}

TEST(GpuSlices, IndicesHeldByOtherJobsAreNeverGiven) {
  auto got = AllocateGpuSlices({{0, 0, 3}, {1, 0, 2}}, {{0, Host8({0, 2, 5})}});
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(*got, (std::map<int, std::vector<int>>{{0, {1, 3, 4}}, {1, {6, 7}}}));
}

TEST(GpuSlices, IndicesThisJobListsExplicitlyAreAvoided) {
  HostGpus h = Host8();
  h.listed = {0, 1};
  auto got = AllocateGpuSlices({{1, 0, 2}}, {{0, h}});
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(got->at(1), (std::vector<int>{2, 3}));
}

TEST(GpuSlices, EachHostIsSlicedOnItsOwn) {
  HostGpus b = Host8();
  b.address = "gpu-b";
  b.total = 2;
  auto got = AllocateGpuSlices({{0, 0, 2}, {1, 1, 2}, {2, 0, 1}}, {{0, Host8()}, {1, b}});
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(*got, (std::map<int, std::vector<int>>{{0, {0, 1}}, {1, {0, 1}}, {2, {2}}}));
}

TEST(GpuSlices, TooFewFreeGpusIsAnErrorNamingTheHostWhatIsFreeAndWhatWasAsked) {
  auto got = AllocateGpuSlices({{0, 0, 4}, {1, 0, 2}}, {{0, Host8({0, 1, 2})}});
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().message(),
            "not enough free GPUs on gpu-a: its nodes ask for 6 (node 0: 4, node 1: 2), but only 5 "
            "of its 8 are free (3-7); held by other jobs: 0-2");
}

TEST(GpuSlices, AHostWithNoGpusRefusesAnyCount) {
  HostGpus h;
  h.address = "cpu-box";
  auto got = AllocateGpuSlices({{0, 0, 1}}, {{0, h}});
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("on cpu-box: its nodes ask for 1 (node 0: 1), but only 0 of its 0 are free (none)"),
            std::string::npos)
      << got.status().message();
}

TEST(GpuSlices, AClaimOnAHostOfUnknownCountIsAnError) {
  EXPECT_FALSE(AllocateGpuSlices({{0, 4, 1}}, {{0, Host8()}}).ok());
}

TEST(GpuSlices, TheDockerValueIsADeviceListInDoubleQuotes) {
  EXPECT_EQ(GpuDeviceValue({0, 1}), "\"device=0,1\"");
  EXPECT_EQ(GpuDeviceValue({6}), "\"device=6\"");
}

TEST(GpuSlices, OnlyAPlainNumberIsACount) {
  EXPECT_EQ(GpuCount("2"), 2);
  EXPECT_EQ(GpuCount("all"), std::nullopt);
  EXPECT_EQ(GpuCount("\"device=0,1\""), std::nullopt);
  EXPECT_EQ(GpuCount(""), std::nullopt);
}

TEST(GpuSlices, TheIndicesOfADeviceListLeaveOutUuids) {
  EXPECT_EQ(GpuDeviceIndices("\"device=0,3\""), (std::set<int>{0, 3}));
  EXPECT_EQ(GpuDeviceIndices("\"device=GPU-3a1f,2\""), (std::set<int>{2}));
  EXPECT_EQ(GpuDeviceIndices("2"), std::set<int>{});
  EXPECT_EQ(GpuDeviceIndices("all"), std::set<int>{});
}

TEST(GpuSlices, IndicesAreDescribedAsRanges) {
  EXPECT_EQ(DescribeGpuIndices({}), "none");
  EXPECT_EQ(DescribeGpuIndices({0, 1}), "0,1");
  EXPECT_EQ(DescribeGpuIndices({0, 1, 2, 3, 6}), "0-3,6");
  EXPECT_EQ(DescribeGpuIndices({1, 3, 4, 5, 7}), "1,3-5,7");
}

}  // namespace
}  // namespace barge::cluster
