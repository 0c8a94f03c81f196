#include "runner/array/host_pool.h"

#include <gtest/gtest.h>

#include <set>

namespace barge::runner::fleet {
namespace {

TEST(HostPool, MembersHoldDisjointHostsUntilTheyGiveThemBack) {
  HostPool pool(5);
  auto a = pool.TakeFreeHosts(2);
  auto b = pool.TakeFreeHosts(2);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(*a, (std::vector<size_t>{0, 1}));
  EXPECT_EQ(*b, (std::vector<size_t>{2, 3}));
  EXPECT_FALSE(pool.TakeFreeHosts(2).has_value());  // only host 4 is free
  EXPECT_EQ(pool.free_count(), 1u);
  pool.Release(*a);
  auto c = pool.TakeFreeHosts(3);
  ASSERT_TRUE(c);
  EXPECT_EQ(*c, (std::vector<size_t>{0, 1, 4}));
  std::set<size_t> held(b->begin(), b->end());
  for (size_t h : *c) EXPECT_FALSE(held.contains(h));
  EXPECT_FALSE(pool.TakeFreeHosts(0).has_value());
}

}  // namespace
}  // namespace barge::runner::fleet
