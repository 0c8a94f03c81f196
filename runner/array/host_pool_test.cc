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

TEST(HostCausedFailures, LostAndPreemptedHostsAndTheHostsOwnPreflightProblemsNotTheJobs) {
  std::vector<EventRecord> events(3);
  events[0].kind = event::kHostLost;
  events[0].host = "10.0.0.1";
  events[0].detail = "10.0.0.1 is lost: the Docker engine did not answer";
  events[1].kind = event::kNodeFailed;  // the job's own failure
  events[1].host = "10.0.0.2";
  events[2].kind = event::kPreempted;
  events[2].host = "10.0.0.3";
  std::vector<PhaseRecord> phases(5);
  phases[4].host = "10.0.0.8";
  phases[4].phase = "preflight";
  phases[4].outcome = "cannot reserve the host (a hold container on its engine): error: listing holds:";
  phases[0].host = "10.0.0.4";
  phases[0].phase = "preflight";
  phases[0].outcome = "docker is not reachable: Cannot connect to the Docker daemon";
  phases[1].host = "10.0.0.5";
  phases[1].phase = "preflight";
  phases[1].outcome = "image img:1 is missing and cannot be pulled: not found";
  phases[2].host = "10.0.0.6";
  phases[2].phase = "connect";
  phases[2].outcome = "connection refused";
  phases[3].host = "10.0.0.7";
  phases[3].phase = "running";
  phases[3].outcome = "exit code 1";
  const auto caused = HostCausedFailures(events, phases);
  std::set<std::string> hosts;
  for (const auto& [h, why] : caused) hosts.insert(h);
  EXPECT_EQ(hosts, (std::set<std::string>{"10.0.0.1", "10.0.0.3", "10.0.0.4", "10.0.0.6", "10.0.0.8"}));
  EXPECT_EQ(caused.at("10.0.0.1"), "host_lost: 10.0.0.1 is lost: the Docker engine did not answer");
}

TEST(HostCausedFailures, AHostTheGpuHealthGatePutOutIsTheHostsButAGpuTakenOutIsNot) {
  std::vector<EventRecord> events(2);
  events[0].kind = event::kGpuUnhealthy;
  events[0].host = "10.0.0.1";
  events[0].detail = "the host is out";
  events[1].kind = event::kGpuUnhealthy;
  events[1].host = "10.0.0.2";
  events[1].detail = "GPU(s) 0 taken out: pages pending retirement (reset the GPU)";
  const auto caused = HostCausedFailures(events, {});
  ASSERT_EQ(caused.size(), 1u);
  EXPECT_EQ(caused.at("10.0.0.1"), "gpu_unhealthy: the host is out");
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

TEST(UnavailableHosts, OnlyHostsTheGpuHealthGatePutOut) {
  std::vector<EventRecord> events(3);
  events[0].kind = event::kGpuUnhealthy;
  events[0].host = "10.0.0.1";
  events[0].detail = "the host is out";
  events[1].kind = event::kGpuUnhealthy;
  events[1].host = "10.0.0.2";
  events[1].detail = "GPU(s) 0 taken out: pages pending retirement (reset the GPU)";
  events[2].kind = event::kHostLost;
  events[2].host = "10.0.0.3";
  events[2].detail = "link down";
  EXPECT_EQ(UnavailableHosts(events), (std::set<std::string>{"10.0.0.1"}));
}

}  // namespace
}  // namespace barge::runner::fleet
