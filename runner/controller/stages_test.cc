// Stages on its own (stages.h): given the job's context, the attempt, the
// plan, the faults and the node streams, on scripted fake hosts
// (tests/support/part_world.h). The hosts are h1 (the head, rank 0) and h2
// (the worker, rank 1).
#include "runner/controller/stages.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "runner/controller/faults.h"
#include "runner/controller/job_state.h"
#include "runner/controller/node_streams.h"
#include "tests/support/part_world.h"

namespace barge::runner {
namespace stages_test {

using std::chrono::milliseconds;

struct StagesWorld {
  explicit StagesWorld(const std::string& extra = "")
      : world(PartWorld::Yaml(extra)),
        faults(&world.ctx(), &world.hosts(), &world.attempt(), &world.plan()),
        streams(&world.ctx(), &world.attempt(), &faults),
        stages(&world.ctx(), &world.attempt(), &world.plan(), &faults, &streams) {}
  // Hosts connected, the attempt's nodes made, its sink open.
  bool Ready() {
    if (!world.Connect()) return false;
    world.MakeNodes();
    return world.OpenSink();
  }
  internal::NodeState& node(int rank) { return *world.attempt().nodes.at(rank); }
  // How many lines sent to `host` contain `part`.
  int Count(const std::string& host, const std::string& part) {
    const auto& lines = world.host(host).lines();
    return static_cast<int>(std::count_if(lines.begin(), lines.end(), [&](const std::string& l) {
      return l.find(part) != std::string::npos;
    }));
  }
  // The index of the first edge equal to `edge`, or -1.
  int Edge(const std::string& edge) {
    const auto& edges = world.recorder().edges;
    auto it = std::find(edges.begin(), edges.end(), edge);
    return it == edges.end() ? -1 : static_cast<int>(it - edges.begin());
  }

  PartWorld world;
  internal::Faults faults;
  internal::NodeStreams streams;
  internal::Stages stages;
};

TEST(Stages, EveryNodeIsStartedWithDockerRunAndThenFollowedUntilItExits) {
  StagesWorld w;
  ASSERT_TRUE(w.Ready());
  Status s = w.stages.RunStages();
  ASSERT_TRUE(s.ok()) << s.message();
  for (int rank : {0, 1}) {
    SCOPED_TRACE(rank);
    const std::string name = w.world.plan().nodes[rank].container.name;
    const std::string host = rank == 0 ? "h1" : "h2";
    EXPECT_EQ(w.node(rank).phase, internal::NodePhase::kRunning);
    EXPECT_TRUE(w.node(rank).run_attempted);
    EXPECT_EQ(w.node(rank).container_id, "id-" + name);
    EXPECT_EQ(w.world.host(host).running(), std::set<std::string>{name});
    EXPECT_EQ(w.Count(host, "docker run -d "), 1);
    EXPECT_EQ(w.Count(host, "docker logs -f --timestamps " + name), 1);
    EXPECT_TRUE(w.node(rank).logs_open);
    const std::string who = std::to_string(rank) + " on " + host;
    EXPECT_GE(w.Edge("start ok " + who), 0);
    EXPECT_LT(w.Edge("start ok " + who), w.Edge("running began " + who));
  }
}

TEST(Stages, TheHeadIsReadyByItsLogLineBeforeAnyWorkerStarts) {
  StagesWorld w("roles: {head: {ready: {log: 'listening on [0-9]+'}}}\n");
  ASSERT_TRUE(w.Ready());
  w.world.fake().SetNode(0, FakeNode{std::chrono::hours(1), 0, false, {"loading", "listening on 29500"}});
  Status s = w.stages.RunStages();
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(w.node(0).logged_ready);
  ASSERT_GE(w.Edge("ready ok 0 on h1"), 0) << w.world.recorder().AllMessages();
  ASSERT_GE(w.Edge("start began 1 on h2"), 0);
  EXPECT_LT(w.Edge("ready ok 0 on h1"), w.Edge("start began 1 on h2"));
  EXPECT_EQ(w.node(1).phase, internal::NodePhase::kRunning);
  EXPECT_TRUE(w.world.recorder().Said("barge: waiting for the head to be ready (a log line matching /listening on [0-9]+/)"))
      << w.world.recorder().AllMessages();
  EXPECT_TRUE(w.world.recorder().Said("barge: head is ready")) << w.world.recorder().AllMessages();
  const auto& events = w.world.recorder().events;
  EXPECT_NE(std::find(events.begin(), events.end(), "head_ready h1: a log line matching /listening on [0-9]+/"),
            events.end());
}

TEST(Stages, AHeadThatIsNeverReadyFailsTheLaunchWithItsLastLinesAndNoWorkerStarts) {
  StagesWorld w("roles: {head: {ready: {log: never-printed, timeout: 1s}}}\n");
  ASSERT_TRUE(w.Ready());
  w.world.fake().SetNode(0, FakeNode{std::chrono::hours(1), 0, false, {"loading", "still loading"}});
  Status s = w.stages.RunStages();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "the head was not ready after 1.000 s (waiting for a log line matching /never-printed/); its last lines:\n"
            "  | loading\n"
            "  | still loading");
  EXPECT_EQ(w.Count("h2", "docker run -d"), 0);
  EXPECT_EQ(w.node(1).phase, internal::NodePhase::kPending);
  EXPECT_GE(w.Edge("ready failed 0 on h1: " + s.message().substr(0, s.message().find(';'))), 0);
}

TEST(Stages, ACommandGateIsProbedInTheHeadsContainerUntilItSucceeds) {
  StagesWorld w("roles: {head: {ready: {command: 'test -e /ok'}}}\n");
  ASSERT_TRUE(w.Ready());
  FakeHost& h1 = w.world.host("h1");
  h1.On("test -e /ok", FakeReply{1});
  h1.When("test -e /ok", [&] { h1.On("test -e /ok", FakeReply{0}); });  // the second succeeds
  Status s = w.stages.RunStages();
  ASSERT_TRUE(s.ok()) << s.message();
  const std::string name = w.world.plan().nodes[0].container.name;
  EXPECT_EQ(w.Count("h1", "docker exec " + name + " sh -c 'test -e /ok'"), 2);
  EXPECT_TRUE(w.world.recorder().Said("barge: waiting for the head to be ready (`test -e /ok` succeeding)"))
      << w.world.recorder().AllMessages();
  EXPECT_GE(w.Edge("ready ok 0 on h1"), 0);
  EXPECT_EQ(w.Count("h2", "docker run -d"), 1);
}

TEST(Stages, APortGateIsReadyOnceThePortListensInTheHeadsContainer) {
  StagesWorld w("roles: {head: {ready: {tcp_port: 29500}}}\n");
  ASSERT_TRUE(w.Ready());
  FakeHost& h1 = w.world.host("h1");
  // 29500 is 0x733C; 0A is LISTEN.
  const std::string header = "  sl  local_address rem_address   st\n";
  h1.On("/net/tcp", FakeReply{0, header + "   0: 00000000:0016 00000000:0000 0A\n"});
  h1.When("/net/tcp", [&] {
    h1.On("/net/tcp", FakeReply{0, header + "   0: 00000000:733C 00000000:0000 06\n"});  // not listening
    h1.When("/net/tcp", [&] { h1.On("/net/tcp", FakeReply{0, header + "   1: 00000000:733C 00000000:0000 0A\n"}); });
  });
  Status s = w.stages.RunStages();
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(w.Count("h1", "/net/tcp"), 3);
  EXPECT_TRUE(w.world.recorder().Said("(port 29500 open)")) << w.world.recorder().AllMessages();
  EXPECT_LT(w.Edge("ready ok 0 on h1"), w.Edge("start began 1 on h2"));
}

TEST(Stages, AWorkerThatFailsToStartIsAnErrorNamingItsHostAndWhy) {
  StagesWorld w;
  ASSERT_TRUE(w.Ready());
  w.world.host("h2").On("docker run -d", FakeReply{125, "", "docker: no space left on device\n"});
  Status s = w.stages.RunStages();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "node 1 (worker) on h2 did not start: docker: no space left on device");
  EXPECT_EQ(w.node(1).phase, internal::NodePhase::kExited);
  EXPECT_TRUE(w.node(1).run_attempted);  // a container may exist: teardown removes it
  EXPECT_FALSE(w.node(1).logs_open);
  EXPECT_GE(w.Edge("start failed 1 on h2: docker: no space left on device"), 0);
  EXPECT_EQ(w.node(0).phase, internal::NodePhase::kRunning);
}

TEST(Stages, AHeadThatEndsBeforeItIsReadyEndsTheLaunchWithoutStartingTheWorkers) {
  StagesWorld w("roles: {head: {ready: {log: never-printed, timeout: 1m}}}\n");
  ASSERT_TRUE(w.Ready());
  w.world.fake().SetNode(0, FakeNode{milliseconds(300), 0});
  Status s = w.stages.RunStages();
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(w.node(0).phase, internal::NodePhase::kExited);
  EXPECT_GE(w.Edge("ready failed 0 on h1: it ended"), 0);
  EXPECT_EQ(w.Count("h2", "docker run -d"), 0);
  EXPECT_EQ(w.node(1).phase, internal::NodePhase::kPending);
}

TEST(Stages, AnInterruptWhileWaitingForTheHeadIsAnErrorAndNoWorkerStarts) {
  StagesWorld w("roles: {head: {ready: {log: never-printed, timeout: 1m}}}\n");
  ASSERT_TRUE(w.Ready());
  w.world.host("h1").When("docker logs -f", [&] { w.world.ctx().interrupts = 1; });
  Status s = w.stages.RunStages();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "interrupted while waiting for the head");
  EXPECT_GE(w.Edge("ready failed 0 on h1: interrupted"), 0);
  EXPECT_EQ(w.Count("h2", "docker run -d"), 0);
}

TEST(Stages, NothingStartsOnceAFaultHasEndedTheAttempt) {
  StagesWorld w;
  ASSERT_TRUE(w.Ready());
  w.world.attempt().fault = internal::Fault{RestartCause::kHostLost, "h2", "h2 is lost"};
  Status s = w.stages.RunStages();
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(w.Count("h1", "docker run -d"), 0);
  EXPECT_EQ(w.Count("h2", "docker run -d"), 0);
}

}  // namespace stages_test
}  // namespace barge::runner
