#include "runner/controller/teardown_plan.h"

#include <gtest/gtest.h>

#include "runner/remote/reservation.h"
#include "runner/remote/watchdog.h"

namespace barge::runner::internal {
namespace {

TeardownNode NodeOn(size_t host, const std::string& name, bool running, bool attempted = true) {
  TeardownNode n;
  n.host = host;
  n.container = name;
  n.run_attempted = attempted;
  n.running = running;
  return n;
}

TeardownHost CliHost() { return TeardownHost{}; }

TeardownHost ApiHost() {
  TeardownHost h;
  h.engine_api = true;
  return h;
}

TeardownRules Graceful() { return TeardownRules{}; }

TEST(TeardownPlan, StopsTheRunningContainersAndRemovesEveryAttemptedOneHostByHostInNodeOrder) {
  const TeardownPlan plan = PlanTeardown(
      {NodeOn(0, "j-0", true), NodeOn(1, "j-1", false), NodeOn(0, "j-2", true), NodeOn(1, "j-3", true),
       NodeOn(1, "j-4", false, /*attempted=*/false)},
      {CliHost(), CliHost()}, Graceful());
  ASSERT_EQ(plan.stops.size(), 2u);
  EXPECT_EQ(plan.stops[0].host, 0u);
  EXPECT_EQ(plan.stops[0].names, (std::vector<std::string>{"j-0", "j-2"}));
  EXPECT_EQ(plan.stops[1].host, 1u);
  EXPECT_EQ(plan.stops[1].names, (std::vector<std::string>{"j-3"}));
  ASSERT_EQ(plan.removals.size(), 2u);
  EXPECT_EQ(plan.removals[0].names, (std::vector<std::string>{"j-0", "j-2"}));
  EXPECT_EQ(plan.removals[1].host, 1u);
  EXPECT_EQ(plan.removals[1].names, (std::vector<std::string>{"j-1", "j-3"}));
}

TEST(TeardownPlan, ALostHostIsLeftAloneAndAHostWithNothingRunningIsOnlyRemoved) {
  TeardownHost lost;
  lost.lost = true;
  const TeardownPlan plan =
      PlanTeardown({NodeOn(0, "j-0", true), NodeOn(1, "j-1", false), NodeOn(2, "j-2", false, false)},
                   {lost, CliHost(), CliHost()}, Graceful());
  EXPECT_TRUE(plan.stops.empty());
  EXPECT_EQ(plan.StopOf(0), nullptr);
  EXPECT_EQ(plan.StopOf(1), nullptr);
  ASSERT_EQ(plan.removals.size(), 1u);
  EXPECT_EQ(plan.removals[0].host, 1u);
}

TEST(TeardownPlan, AGracefulStopGoesThroughTheEngineApiWhereTheHostHasItAKillNever) {
  TeardownRules rules;
  rules.grace_seconds = 7;
  TeardownPlan plan = PlanTeardown({NodeOn(0, "a", true), NodeOn(1, "b", true)}, {ApiHost(), CliHost()}, rules);
  ASSERT_EQ(plan.stops.size(), 2u);
  EXPECT_TRUE(plan.stops[0].with_api);
  EXPECT_FALSE(plan.stops[1].with_api);
  EXPECT_EQ(plan.StopOf(1), &plan.stops[1]);
  const DockerCommands docker({"docker"});
  EXPECT_EQ(StopLine(docker, plan, plan.stops[1]), docker.Stop({"b"}, 7));

  rules.graceful = false;
  plan = PlanTeardown({NodeOn(0, "a", true)}, {ApiHost()}, rules);
  ASSERT_EQ(plan.stops.size(), 1u);
  EXPECT_FALSE(plan.stops[0].with_api);
  EXPECT_EQ(StopLine(docker, plan, plan.stops[0]), docker.Kill({"a"}));
}

TEST(TeardownPlan, TheLastTeardownReleasesTheHoldsAndDisarmsAnArmedWatchdogWithTheRemoval) {
  TeardownHost armed;
  armed.watchdog_armed = true;
  armed.holding = true;
  TeardownHost unarmed;
  const TeardownPlan plan = PlanTeardown({NodeOn(0, "a", false), NodeOn(1, "b", false)}, {armed, unarmed}, Graceful());
  ASSERT_EQ(plan.removals.size(), 2u);
  EXPECT_TRUE(plan.removals[0].disarm);
  EXPECT_TRUE(plan.removals[0].release);
  EXPECT_FALSE(plan.removals[1].disarm);
  EXPECT_FALSE(plan.removals[1].release);
  EXPECT_TRUE(plan.run_hooks);
}

TEST(TeardownPlan, BeforeARestartTheHoldsStayTheWatchdogStaysArmedAndNoHookRuns) {
  TeardownHost host;
  host.watchdog_armed = true;
  host.holding = true;
  host.hold_ids = {"h1"};
  TeardownRules rules;
  rules.final = false;
  const TeardownPlan plan = PlanTeardown({NodeOn(0, "a", true)}, {host}, rules);
  ASSERT_EQ(plan.removals.size(), 1u);
  EXPECT_FALSE(plan.removals[0].disarm);
  EXPECT_FALSE(plan.removals[0].release);
  EXPECT_TRUE(plan.removals[0].hold_ids.empty());
  EXPECT_FALSE(plan.run_hooks);
}

TEST(TeardownPlan, ARegistryLogoutOrAHostHookStillToComeKeepsTheWatchdogArmedAtTheRemoval) {
  TeardownHost host;
  host.watchdog_armed = true;
  TeardownRules registry;
  registry.registry = true;
  EXPECT_FALSE(PlanTeardown({NodeOn(0, "a", false)}, {host}, registry).removals[0].disarm);
  TeardownRules hook;
  hook.host_hook = true;
  EXPECT_FALSE(PlanTeardown({NodeOn(0, "a", false)}, {host}, hook).removals[0].disarm);
}

TEST(TeardownPlan, HoldsNamedByIdGoThroughTheEngineApiHoldsItCannotNameByTheCommandLine) {
  TeardownHost named = ApiHost();
  named.holding = true;
  named.hold_ids = {"h1", "h2"};
  TeardownHost unnamed = ApiHost();
  unnamed.holding = true;
  const TeardownPlan plan = PlanTeardown({NodeOn(0, "a", false), NodeOn(1, "b", false)}, {named, unnamed}, Graceful());
  ASSERT_EQ(plan.removals.size(), 2u);
  EXPECT_TRUE(plan.removals[0].with_api);
  EXPECT_EQ(plan.removals[0].hold_ids, (std::vector<std::string>{"h1", "h2"}));
  EXPECT_FALSE(plan.removals[1].with_api);
  // Without holds to release, an API host removes through the API.
  TeardownRules again;
  again.final = false;
  EXPECT_TRUE(PlanTeardown({NodeOn(0, "a", false)}, {unnamed}, again).removals[0].with_api);
}

TEST(TeardownPlan, WithArtifactsNoRemovalStartsBeforeEveryStopHasEnded) {
  EXPECT_TRUE(PlanTeardown({NodeOn(0, "a", true)}, {CliHost()}, Graceful()).pipelined);
  TeardownRules rules;
  rules.artifacts = true;
  EXPECT_FALSE(PlanTeardown({NodeOn(0, "a", true)}, {CliHost()}, rules).pipelined);
}

TEST(TeardownPlan, TheRemovalLineReleasesTheHoldsThenDisarmsAndExitsWithTheRemovalsStatus) {
  const DockerCommands docker({"docker"});
  TeardownRemoval r;
  r.names = {"a", "b"};
  EXPECT_EQ(RemoveLine(docker, r, "j1", "/tmp/d"), docker.Remove({"a", "b"}));
  EXPECT_EQ(AfterApiRemovalLine(r, "/tmp/d"), "");

  r.release = true;
  EXPECT_EQ(RemoveLine(docker, r, "j1", "/tmp/d"),
            "{ " + docker.Remove({"a", "b"}) + "; s=$?; " + ReleaseHoldsCommand(docker, "j1") +
                " || s=1; [ $s -eq 0 ]; }");
  r.hold_ids = {"h1"};
  EXPECT_EQ(RemoveLine(docker, r, "j1", "/tmp/d"), RemoveWithHoldsCommand(docker, {"a", "b"}, {"h1"}, "j1"));

  r.disarm = true;
  EXPECT_EQ(RemoveLine(docker, r, "j1", "/tmp/d"),
            "{ " + RemoveWithHoldsCommand(docker, {"a", "b"}, {"h1"}, "j1") + "; s=$?; " +
                DisarmWatchdogCommand("/tmp/d") + "; exit $s; }");
  EXPECT_EQ(AfterApiRemovalLine(r, "/tmp/d"), DisarmWatchdogCommand("/tmp/d"));
}

TEST(TeardownPlan, EveryHostGetsItsHostHookThenItsLocalHookAndALostHostsHostHookIsSkipped) {
  TeardownHooks hooks;
  hooks.host_command = "poweroff";
  hooks.local_command = "terminate {host.address}";
  TeardownHost lost;
  lost.lost = true;
  TeardownHost no_session;
  no_session.connected = false;
  const std::vector<TeardownHook> plan = PlanTeardownHooks(hooks, {CliHost(), lost, no_session});
  ASSERT_EQ(plan.size(), 6u);
  for (size_t i = 0; i < plan.size(); ++i) {
    EXPECT_EQ(plan[i].host, i / 2);
    EXPECT_EQ(plan[i].where, i % 2 == 0 ? TeardownHook::Where::kHost : TeardownHook::Where::kLocal);
    EXPECT_EQ(plan[i].hook, i % 2 == 0 ? "poweroff" : "terminate {host.address}");
    EXPECT_EQ(plan[i].skipped, i == 2 || i == 4) << i;
  }
  EXPECT_STREQ(plan[0].kind(), "host_command");
  EXPECT_STREQ(plan[1].kind(), "local_command");

  TeardownHooks local_only;
  local_only.local_command = "echo";
  const std::vector<TeardownHook> local = PlanTeardownHooks(local_only, {lost});
  ASSERT_EQ(local.size(), 1u);
  EXPECT_EQ(local[0].where, TeardownHook::Where::kLocal);
  EXPECT_FALSE(local[0].skipped);
  EXPECT_TRUE(PlanTeardownHooks(TeardownHooks{}, {CliHost()}).empty());
}

}  // namespace
}  // namespace barge::runner::internal
