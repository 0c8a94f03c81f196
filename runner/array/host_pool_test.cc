#include "runner/array/host_pool.h"

#include <gtest/gtest.h>

#include <set>

namespace barge::runner::array {
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

TEST(HostPool, ARetryTakesOtherFreeHostsFirstAndTheAvoidedOnesOnlyWhenNothingElseIsFree) {
  HostPool pool(3);
  auto a = pool.TakeFreeHosts(1, {0});
  ASSERT_TRUE(a);
  EXPECT_EQ(*a, (std::vector<size_t>{1}));
  auto b = pool.TakeFreeHosts(2, {0});
  ASSERT_TRUE(b);
  EXPECT_EQ(*b, (std::vector<size_t>{0, 2})) << "the avoided host, since nothing else makes two";
}

TEST(HostPool, AHostWhoseTwoAttemptsInARowFailedBecauseOfItIsSetAsideForGood) {
  HostPool pool(2);
  EXPECT_TRUE(pool.NoteAttempt({0}, {0}).empty());  // one host-caused failure
  EXPECT_TRUE(pool.NoteAttempt({0}, {}).empty());   // then one that was not: the count starts again
  EXPECT_TRUE(pool.NoteAttempt({0}, {0}).empty());
  EXPECT_EQ(pool.NoteAttempt({0, 1}, {0}), (std::vector<size_t>{0}));
  EXPECT_TRUE(pool.set_aside(0));
  EXPECT_FALSE(pool.set_aside(1));
  EXPECT_TRUE(pool.NoteAttempt({0}, {0}).empty()) << "set aside once";
  EXPECT_EQ(pool.free_count(), 1u);
  auto only = pool.TakeFreeHosts(1);
  ASSERT_TRUE(only);
  EXPECT_EQ(*only, (std::vector<size_t>{1}));
  pool.Release(*only);
  EXPECT_FALSE(pool.TakeFreeHosts(2).has_value()) << "a host set aside is never taken";
}

TEST(HostPool, AnUnavailableHostIsSetAsideAtOnceAndCountsNoMoreAsUsable) {
  HostPool pool(3);
  auto a = pool.TakeFreeHosts(2);
  ASSERT_TRUE(a);
  EXPECT_EQ(pool.usable_count(), 3u);
  // Host 1 was unhealthy (the health gate put it out): aside after one
  // attempt, where a lost host needs two in a row.
  EXPECT_EQ(pool.NoteAttempt(*a, {1}, {1}), std::vector<size_t>{1});
  pool.Release(*a);
  EXPECT_TRUE(pool.set_aside(1));
  EXPECT_FALSE(pool.set_aside(0));
  EXPECT_EQ(pool.usable_count(), 2u);
  auto b = pool.TakeFreeHosts(2);
  ASSERT_TRUE(b);
  EXPECT_EQ(*b, (std::vector<size_t>{0, 2}));
  EXPECT_TRUE(pool.NoteAttempt(*b, {}, {}).empty());
}

TEST(HostPool, FreeHostsCanBeCountedLeavingSomeOut) {
  HostPool pool(4);
  auto a = pool.TakeFreeHosts(1);  // host 0
  ASSERT_TRUE(a);
  EXPECT_EQ(pool.FreeCountExcept({}), 3u);
  EXPECT_EQ(pool.FreeCountExcept({0, 1}), 2u);  // host 0 is busy anyway
  EXPECT_EQ(pool.FreeCountExcept({1, 2, 3}), 0u);
}

// A member given host 0, which another job holds, waits there; it moves
// once a host it never waited for is free, and when it waits again there
// (held too), host 0 being free does not bring it back: only a third does.
TEST(HostPool, AWaitingMemberMovesOnlyToHostsItNeverWaitedForSoNeverBack) {
  HostPool pool(3);
  auto member = pool.TakeFreeHosts(1);
  auto others = pool.TakeFreeHosts(2);
  ASSERT_TRUE(member && others);
  ASSERT_EQ(*member, std::vector<size_t>{0});
  std::set<size_t> waited;
  EXPECT_FALSE(pool.NoteWaitAndCanMove(*member, 1, &waited)) << "no host is free";
  EXPECT_EQ(waited, (std::set<size_t>{0}));
  pool.Release({1});
  ASSERT_TRUE(pool.NoteWaitAndCanMove(*member, 1, &waited));
  pool.Release(*member);  // it moves: stopped, then taken again avoiding what it waited for
  member = pool.TakeFreeHosts(1, waited);
  ASSERT_TRUE(member);
  ASSERT_EQ(*member, std::vector<size_t>{1});
  EXPECT_FALSE(pool.NoteWaitAndCanMove(*member, 1, &waited)) << "host 0 is free, but it waited for it";
  EXPECT_EQ(waited, (std::set<size_t>{0, 1}));
  pool.Release({2});
  ASSERT_TRUE(pool.NoteWaitAndCanMove(*member, 1, &waited));
  pool.Release(*member);
  member = pool.TakeFreeHosts(1, waited);
  ASSERT_TRUE(member);
  EXPECT_EQ(*member, std::vector<size_t>{2});
}

}  // namespace
}  // namespace barge::runner::array
