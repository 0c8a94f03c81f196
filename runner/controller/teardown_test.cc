// Teardown on its own (teardown.h): given the job's context, its hosts, the
// attempt, the plan and the artifacts, on scripted fake hosts
// (tests/support/part_world.h). The attempt is launched first by the
// launch's own parts (Stages, with NodeStreams' log streams and exit
// reports), so that stops end real streams: h1 runs the head (rank 0), h2
// the worker (rank 1); stop_grace is 1 s.
#include "runner/controller/teardown.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "runner/controller/artifacts.h"
#include "runner/controller/faults.h"
#include "runner/controller/job_state.h"
#include "runner/controller/node_streams.h"
#include "runner/controller/stages.h"
#include "runner/remote/watchdog.h"
#include "tests/support/part_world.h"

namespace barge::runner {
namespace teardown_test {

using std::chrono::milliseconds;

struct TeardownWorld {
  explicit TeardownWorld(const std::string& extra = "")
      : world(PartWorld::Yaml(extra)),
        faults(&world.ctx(), &world.hosts(), &world.attempt(), &world.plan()),
        streams(&world.ctx(), &world.attempt(), &faults),
        stages(&world.ctx(), &world.attempt(), &world.plan(), &faults, &streams),
        artifacts(&world.ctx(), &world.attempt(), &world.plan()),
        teardown(&world.ctx(), &world.hosts(), &world.attempt(), &world.plan(), &artifacts) {}
  // Hosts connected, the attempt's nodes made, its sink open, its stages
  // run.
  void Launch() {
    ASSERT_TRUE(world.Connect());
    world.MakeNodes();
    ASSERT_TRUE(world.OpenSink());
    Status s = stages.RunStages();
    ASSERT_TRUE(s.ok()) << s.message();
  }
  internal::NodeState& node(int rank) { return *world.attempt().nodes.at(rank); }
  const std::string& name(int rank) { return world.plan().nodes.at(rank).container.name; }
  // The lines sent to `host` that contain `part`.
  std::vector<std::string> Sent(FakeHost& host, const std::string& part) {
    std::vector<std::string> out;
    for (const std::string& l : host.lines()) {
      if (l.find(part) != std::string::npos) out.push_back(l);
    }
    return out;
  }
  std::vector<std::string> Sent(const std::string& host, const std::string& part) {
    return Sent(world.host(host), part);
  }
  // The index in every host's lines ("HOST: LINE") of the first that
  // contains `part`, or -1.
  int First(const std::string& part) {
    const auto& all = world.fake().all_lines();
    for (size_t i = 0; i < all.size(); ++i) {
      if (all[i].find(part) != std::string::npos) return static_cast<int>(i);
    }
    return -1;
  }
  int Last(const std::string& part) {
    const auto& all = world.fake().all_lines();
    for (size_t i = all.size(); i-- > 0;) {
      if (all[i].find(part) != std::string::npos) return static_cast<int>(i);
    }
    return -1;
  }

  PartWorld world;
  internal::Faults faults;
  internal::NodeStreams streams;
  internal::Stages stages;
  internal::Artifacts artifacts;
  internal::Teardown teardown;
};

TEST(Teardown, AGracefulTeardownStopsEveryRunningContainerThenRemovesItAndLeavesNothing) {
  TeardownWorld w;
  w.Launch();
  w.teardown.Run(/*graceful=*/true);
  for (int rank : {0, 1}) {
    SCOPED_TRACE(rank);
    const std::string host = rank == 0 ? "h1" : "h2";
    const int stop = w.First(host + ": docker stop -t 1 " + w.name(rank));
    const int rm = w.First(host + ": docker rm -f " + w.name(rank));
    ASSERT_GE(stop, 0);
    ASSERT_GE(rm, 0);
    EXPECT_LT(stop, rm);
    EXPECT_TRUE(w.Sent(host, "docker kill").empty());
    EXPECT_TRUE(w.world.host(host).containers().empty());
    // Its exit report came in before the removal: how it ended is known.
    EXPECT_EQ(w.node(rank).phase, internal::NodePhase::kExited);
    EXPECT_EQ(w.node(rank).end_reason, "killed by SIGTERM (exit code 143)");
  }
  EXPECT_TRUE(w.world.attempt().tearing_down);
  EXPECT_FALSE(w.world.attempt().fault.has_value());  // the exits were barge's doing
  EXPECT_TRUE(w.world.recorder().Said("barge: stopping 2 container(s)")) << w.world.recorder().AllMessages();
  ASSERT_FALSE(w.world.recorder().events.empty());
  EXPECT_EQ(w.world.recorder().events.back(), "torn_down: ");
}

TEST(Teardown, AnUngracefulTeardownKillsInsteadOfStopping) {
  TeardownWorld w;
  w.Launch();
  w.teardown.Run(/*graceful=*/false);
  for (int rank : {0, 1}) {
    SCOPED_TRACE(rank);
    const std::string host = rank == 0 ? "h1" : "h2";
    EXPECT_EQ(w.Sent(host, "docker kill -s KILL " + w.name(rank)).size(), 1u);
    EXPECT_TRUE(w.Sent(host, "docker stop").empty());
    EXPECT_TRUE(w.world.host(host).containers().empty());
    EXPECT_EQ(w.node(rank).end_reason, "killed by SIGKILL (exit code 137)");
  }
  EXPECT_TRUE(w.world.recorder().Said("barge: killing 2 container(s)")) << w.world.recorder().AllMessages();
}

TEST(Teardown, ALostHostIsLeftAloneAndTheOthersAreTornDown) {
  TeardownWorld w;
  w.Launch();
  w.world.host_state(1).lost = true;
  const size_t sent_to_h2 = w.world.host("h2").lines().size();
  w.teardown.Run(/*graceful=*/true);
  EXPECT_EQ(w.world.host("h2").lines().size(), sent_to_h2);
  EXPECT_EQ(w.world.host("h2").containers(), std::set<std::string>{w.name(1)});
  EXPECT_EQ(w.Sent("h1", "docker rm -f " + w.name(0)).size(), 1u);
  EXPECT_TRUE(w.world.host("h1").containers().empty());
  EXPECT_TRUE(w.world.recorder().Said("barge: stopping 1 container(s)")) << w.world.recorder().AllMessages();
}

TEST(Teardown, ANodeThatDidNotStartIsRemovedButNotStopped) {
  TeardownWorld w;
  ASSERT_TRUE(w.world.Connect());
  w.world.MakeNodes();
  ASSERT_TRUE(w.world.OpenSink());
  w.world.host("h2").On("docker run -d", FakeReply{125, "", "docker: no space left on device\n"});
  ASSERT_FALSE(w.stages.RunStages().ok());
  w.teardown.Run(/*graceful=*/true);
  EXPECT_TRUE(w.Sent("h2", "docker stop").empty());
  EXPECT_EQ(w.Sent("h2", "docker rm -f " + w.name(1)).size(), 1u);  // its start may have made it
  EXPECT_EQ(w.Sent("h1", "docker stop -t 1 " + w.name(0)).size(), 1u);
  EXPECT_TRUE(w.world.host("h1").containers().empty());
  EXPECT_TRUE(w.world.recorder().Said("barge: stopping 1 container(s)")) << w.world.recorder().AllMessages();
}

TEST(Teardown, AnArmedWatchdogIsDisarmedWithTheLastRemovalButNotBeforeARestart) {
  for (const bool final : {true, false}) {
    SCOPED_TRACE(final ? "final" : "before a restart");
    TeardownWorld w;
    w.Launch();
    for (size_t h : {0u, 1u}) w.world.host_state(h).lease.armed = true;
    w.teardown.Run(/*graceful=*/true, final);
    for (size_t h : {0u, 1u}) {
      const std::string host = h == 0 ? "h1" : "h2";
      const std::vector<std::string> rm = w.Sent(host, "docker rm -f " + w.name(static_cast<int>(h)));
      ASSERT_EQ(rm.size(), 1u);
      const std::string disarm = DisarmWatchdogCommand(w.world.host_state(h).job_dir);
      EXPECT_EQ(rm[0].find(disarm) != std::string::npos, final) << rm[0];
      EXPECT_EQ(w.world.host_state(h).lease.armed, !final);
      EXPECT_TRUE(w.world.host(host).containers().empty());
    }
    EXPECT_EQ(w.world.recorder().events.back(), final ? "torn_down: " : "torn_down: before a restart");
  }
}

TEST(Teardown, TheHooksRunForEveryHostOnItAndHereAfterItsRemovalAndOnlyWhenTheJobIsOver) {
  const std::string hooks = "teardown: {host_command: 'echo bye {host.address}', local_command: 'echo done {host.address}'}\n";
  {
    TeardownWorld w(hooks);
    w.Launch();
    w.teardown.Run(/*graceful=*/true, /*final=*/true);
    for (const std::string host : {"h1", "h2"}) {
      SCOPED_TRACE(host);
      EXPECT_EQ(w.Sent(host, "; echo bye " + host).size(), 1u);
      EXPECT_EQ(w.Sent(w.world.fake().local(), "; echo done " + host).size(), 1u);
      EXPECT_LT(w.First(host + ": docker rm -f"), w.First(host + ": export BARGE_JOB_ID=abcd1234"));
      EXPECT_TRUE(w.world.recorder().Said("barge: teardown host_command for " + host + ": ok"))
          << w.world.recorder().AllMessages();
      EXPECT_TRUE(w.world.recorder().Said("barge: teardown local_command for " + host + ": ok"))
          << w.world.recorder().AllMessages();
    }
  }
  {
    TeardownWorld w(hooks);
    w.Launch();
    w.teardown.Run(/*graceful=*/true, /*final=*/false);
    EXPECT_TRUE(w.Sent("h1", "echo bye").empty());
    EXPECT_TRUE(w.world.fake().local().lines().empty());
  }
}

TEST(Teardown, AHostHookForALostHostIsNotRunAndSaidWhileItsLocalHookStillRuns) {
  TeardownWorld w("teardown: {host_command: 'echo bye', local_command: 'echo done {host.address}'}\n");
  ASSERT_TRUE(w.world.Connect());
  w.world.host_state(1).lost = true;
  w.world.host("h2").On("echo bye", FakeReply{1, "", "should not run\n"});
  w.teardown.RunTeardownHooks();
  EXPECT_TRUE(w.Sent("h2", "echo bye").empty());
  EXPECT_EQ(w.Sent("h1", "echo bye").size(), 1u);
  EXPECT_TRUE(w.world.recorder().Said("barge: teardown host_command for h2 not run: the host is lost (its watchdog runs it)"))
      << w.world.recorder().AllMessages();
  EXPECT_EQ(w.Sent(w.world.fake().local(), "echo done h2").size(), 1u);
}

TEST(Teardown, WithArtifactsTheLastCopyIsTakenAfterEveryStopAndBeforeAnyRemoval) {
  TeardownWorld w("artifacts: [{node: all, path: /out}]\n");
  w.Launch();
  w.teardown.Run(/*graceful=*/true);
  const int last_stop = w.Last("docker stop");
  const int first_copy = w.First("docker cp");
  const int last_copy = w.Last("docker cp");
  const int first_rm = w.First("docker rm -f");
  ASSERT_GE(last_stop, 0);
  ASSERT_GE(first_copy, 0);
  ASSERT_GE(first_rm, 0);
  EXPECT_LT(last_stop, first_copy);
  EXPECT_LT(last_copy, first_rm);
  EXPECT_EQ(w.Sent("h1", "docker cp " + w.name(0) + ":/out -").size(), 1u);
  EXPECT_EQ(w.Sent("h2", "docker cp " + w.name(1) + ":/out -").size(), 1u);
  EXPECT_TRUE(w.world.host("h1").containers().empty());
  EXPECT_TRUE(w.world.host("h2").containers().empty());
}

}  // namespace teardown_test
}  // namespace barge::runner
