// Faults on its own (faults.h): given the job's context, its hosts, the
// attempt and the plan, on scripted fake hosts (tests/support/part_world.h).
#include "runner/controller/faults.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "runner/controller/job_state.h"
#include "tests/support/part_world.h"

namespace barge::runner {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

struct FaultsWorld {
  explicit FaultsWorld(const std::string& extra = "")
      : world(PartWorld::Yaml(extra)), faults(&world.ctx(), &world.hosts(), &world.attempt(), &world.plan()) {}
  PartWorld world;
  internal::Faults faults;
};

TEST(Faults, TheFirstFaultEndsTheAttemptAndLaterOnesAreOnlyRecorded) {
  FaultsWorld w;
  w.faults.NoteFault({RestartCause::kNodeFailed, "h2", "node 1 failed", 3, 1});
  w.faults.NoteFault({RestartCause::kHostLost, "h1", "h1 is lost: reset"});
  ASSERT_TRUE(w.world.attempt().fault.has_value());
  EXPECT_EQ(w.world.attempt().fault->cause, RestartCause::kNodeFailed);
  EXPECT_EQ(w.world.attempt().fault->rank, 1);
  ASSERT_EQ(w.world.recorder().events.size(), 2u);
  EXPECT_EQ(w.world.recorder().events[0], "node_failed h2: node 1 failed");
  EXPECT_EQ(w.world.recorder().events[1], "host_lost h1: h1 is lost: reset");
}

TEST(Faults, NothingIsAFaultOnceTeardownHasBegun) {
  FaultsWorld w;
  w.world.attempt().tearing_down = true;
  w.faults.NoteFault({RestartCause::kHostLost, "h1", "h1 is lost: reset"});
  EXPECT_FALSE(w.world.attempt().fault.has_value());
  EXPECT_TRUE(w.world.recorder().Said("h1 is lost: reset")) << w.world.recorder().AllMessages();
}

TEST(Faults, AFaultIsRestartableOnlyForTheCausesListedAndWhileRestartsAreLeft) {
  FaultsWorld w("restart: {max_restarts: 2, on: [host_lost]}\n");
  const internal::Fault lost{RestartCause::kHostLost, "h1", "lost"};
  const internal::Fault failed{RestartCause::kNodeFailed, "h1", "failed", 1, 1};
  EXPECT_TRUE(w.faults.Restartable(lost));
  EXPECT_FALSE(w.faults.Restartable(failed));
  w.world.attempt().restart_count = 2;
  EXPECT_FALSE(w.faults.Restartable(lost));
  FaultsWorld none;
  EXPECT_FALSE(none.faults.Restartable(lost));
}

TEST(Faults, ALostHostsStartingAndRunningNodesAreLostAndTheHostIsToBeReplaced) {
  FaultsWorld w;
  ASSERT_TRUE(w.world.Connect());
  w.world.MakeNodes();
  auto& nodes = w.world.attempt().nodes;
  ASSERT_EQ(nodes.size(), 2u);
  nodes[0]->phase = internal::NodePhase::kRunning;
  nodes[1]->phase = internal::NodePhase::kExited;
  internal::HostState& h1 = w.world.host_state(0);
  w.faults.OnHostLost(h1, "reset");
  EXPECT_TRUE(h1.lost);
  EXPECT_TRUE(h1.health.replace);
  EXPECT_EQ(nodes[0]->phase, internal::NodePhase::kLost);
  EXPECT_EQ(nodes[1]->phase, internal::NodePhase::kExited);  // another host's
  ASSERT_TRUE(w.world.attempt().fault.has_value());
  EXPECT_EQ(w.world.attempt().fault->detail, "h1 is lost: reset");
}

TEST(Faults, APreemptedHostsRunningContainersGetSigtermAndTheFaultCountsThem) {
  FaultsWorld w;
  ASSERT_TRUE(w.world.Connect());
  w.world.MakeNodes();
  w.world.attempt().nodes[1]->phase = internal::NodePhase::kRunning;
  w.faults.OnPreempted(w.world.host_state(1), "spot notice");
  ASSERT_TRUE(w.world.RunUntil([&] { return !w.world.host("h2").lines().empty(); }));
  const std::string& line = w.world.host("h2").lines().back();
  EXPECT_NE(line.find("TERM"), std::string::npos) << line;
  EXPECT_NE(line.find(w.world.plan().nodes[1].container.name), std::string::npos) << line;
  EXPECT_TRUE(w.world.host("h1").lines().empty());
  ASSERT_TRUE(w.world.attempt().fault.has_value());
  EXPECT_EQ(w.world.attempt().fault->detail, "h2 is being preempted: spot notice; SIGTERM sent to 1 container(s)");
}

TEST(Faults, AnEngineThatMissesEveryProbeMakesItsHostLostAfterEngineMissesProbes) {
  FaultsWorld w;  // engine_timeout 1s, engine_misses 2
  ASSERT_TRUE(w.world.Connect());
  w.world.host("h2").On("version", FakeReply{.hang = true});
  w.faults.StartMonitors();
  ASSERT_TRUE(w.world.RunUntil([&] { return w.world.host_state(1).lost; }, milliseconds(30000)))
      << w.world.recorder().AllMessages();
  EXPECT_FALSE(w.world.host_state(0).lost);
  EXPECT_TRUE(w.world.recorder().Said("h2: the Docker engine did not answer within 1 s (miss 1 of 2)"))
      << w.world.recorder().AllMessages();
  ASSERT_TRUE(w.world.attempt().fault.has_value());
  EXPECT_NE(w.world.attempt().fault->detail.find("2 probes in a row"), std::string::npos)
      << w.world.attempt().fault->detail;
}

TEST(Faults, ANewAttemptStopsThePreviousAttemptsProbes) {
  FaultsWorld w;
  ASSERT_TRUE(w.world.Connect());
  w.faults.StartMonitors();
  w.faults.StartMonitors();  // a restart: generation 2
  w.world.RunUntil([] { return false; }, milliseconds(5500));
  // One probe chain per host: about one probe a second, not two.
  int probes = 0;
  for (const std::string& l : w.world.host("h1").lines()) probes += l.find("version") != std::string::npos;
  EXPECT_GE(probes, 3);
  EXPECT_LE(probes, 6);
}

}  // namespace
}  // namespace barge::runner
