// NodeStreams on its own (node_streams.h), through the Docker CLI: given the
// job's context, the attempt and the faults, on scripted fake hosts
// (tests/support/part_world.h). The log sink is the attempt's, opened in the
// world's state directory.
#include "runner/controller/node_streams.h"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include "container/timestamp.h"
#include "runner/controller/faults.h"
#include "runner/controller/job_state.h"
#include "tests/support/part_world.h"

namespace barge::runner {
namespace node_streams_test {

using std::chrono::milliseconds;

struct StreamsWorld {
  explicit StreamsWorld(const std::string& extra = "")
      : world(PartWorld::Yaml(extra)),
        faults(&world.ctx(), &world.hosts(), &world.attempt(), &world.plan()),
        streams(&world.ctx(), &world.attempt(), &faults) {}
  // Hosts connected, the attempt's nodes made, its sink open.
  bool Ready() {
    if (!world.Connect()) return false;
    world.MakeNodes();
    return world.OpenSink();
  }
  internal::NodeState& node(int rank) { return *world.attempt().nodes.at(rank); }
  // Node `rank`'s container made on its fake host with `docker run -d` (as
  // Stages does), the node running.
  void Start(int rank) {
    internal::NodeState& n = node(rank);
    bool done = false;
    world.attempt().commands.Run(*n.host->exec, n.host->docker->Run(n.plan->container), [&](const Outcome& o) {
      n.container_id = internal::Trim(o.out);
      done = true;
    });
    ASSERT_TRUE(world.RunUntil([&] { return done; }));
    n.run_attempted = true;
    n.phase = internal::NodePhase::kRunning;
  }
  // The texts of node `rank`'s kept `stream` lines ("stdout", "stderr").
  std::vector<std::string> Kept(int rank, const std::string& stream = "stdout") {
    std::vector<std::string> out;
    std::ifstream in(world.attempt().sink->path(rank));
    const std::string tag = " " + stream + " ";
    for (std::string line; std::getline(in, line);) {
      const size_t at = line.find(tag);
      if (at != std::string::npos) out.push_back(line.substr(at + tag.size()));
    }
    return out;
  }
  // The lines sent to `host` that contain `part`.
  std::vector<std::string> Sent(const std::string& host, const std::string& part) {
    std::vector<std::string> out;
    for (const std::string& l : world.host(host).lines()) {
      if (l.find(part) != std::string::npos) out.push_back(l);
    }
    return out;
  }
  bool Ended(int rank) {
    return world.RunUntil([&] {
      return node(rank).phase != internal::NodePhase::kRunning && !node(rank).logs_open;
    });
  }

  PartWorld world;
  internal::Faults faults;
  internal::NodeStreams streams;
};

TEST(NodeStreams, ANodesLinesGoToItsLogFileAndHowItEndedIsKeptAndAFailedWorkerIsAFault) {
  StreamsWorld w;  // on_worker_exit: fail (the default)
  ASSERT_TRUE(w.Ready());
  w.world.fake().SetNode(1, FakeNode{milliseconds(200), 3, false, {"hello", "world"}});
  w.Start(1);
  w.streams.StreamLogs(w.node(1), /*report_exit=*/true);
  ASSERT_TRUE(w.Ended(1)) << w.world.recorder().AllMessages();

  const std::string name = w.world.plan().nodes[1].container.name;
  const std::vector<std::string> follows = w.Sent("h2", "docker logs -f --timestamps " + name);
  ASSERT_EQ(follows.size(), 1u);
  EXPECT_NE(follows[0].find("@@barge-exit-"), std::string::npos) << follows[0];
  EXPECT_TRUE(w.Sent("h1", "docker logs").empty());
  EXPECT_EQ(w.Kept(1), (std::vector<std::string>{"hello", "world"}));
  EXPECT_EQ(w.node(1).phase, internal::NodePhase::kExited);
  EXPECT_EQ(w.node(1).exit_code, 3);
  EXPECT_EQ(w.node(1).end_reason, "exit code 3");
  const auto& edges = w.world.recorder().edges;
  EXPECT_NE(std::find(edges.begin(), edges.end(), "running failed 1 on h2: exit code 3"), edges.end());
  const auto& events = w.world.recorder().events;
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events[0], "node_exited h2: rank 1 (worker) ended: exit code 3");
  ASSERT_TRUE(w.world.attempt().fault.has_value());
  EXPECT_EQ(w.world.attempt().fault->cause, RestartCause::kNodeFailed);
  EXPECT_EQ(w.world.attempt().fault->rank, 1);
  EXPECT_EQ(w.world.attempt().fault->exit_code, 3);
  EXPECT_EQ(w.world.attempt().fault->detail, "node 1 (worker) on h2 ended: exit code 3");
}

TEST(NodeStreams, AFailedWorkerIsOnlySaidWhenOnWorkerExitIsIgnore) {
  StreamsWorld w("on_worker_exit: ignore\n");
  ASSERT_TRUE(w.Ready());
  w.world.fake().SetNode(1, FakeNode{milliseconds(200), 3});
  w.Start(1);
  w.streams.StreamLogs(w.node(1), /*report_exit=*/true);
  ASSERT_TRUE(w.Ended(1));
  EXPECT_EQ(w.node(1).exit_code, 3);
  EXPECT_FALSE(w.world.attempt().fault.has_value());
  EXPECT_TRUE(w.world.recorder().Said("barge: node 1 (worker) on h2 ended: exit code 3"))
      << w.world.recorder().AllMessages();
}

TEST(NodeStreams, AHeadKilledForMemoryIsSaidSoAndIsAFaultOnlyWhereARestartCoversIt) {
  for (const bool restartable : {false, true}) {
    SCOPED_TRACE(restartable ? "restart on node_failed" : "no restart");
    StreamsWorld w(restartable ? "restart: {max_restarts: 1, on: [node_failed]}\n" : "");
    ASSERT_TRUE(w.Ready());
    FakeNode head{milliseconds(200), 137};
    head.oom_killed = true;
    w.world.fake().SetNode(0, head);
    w.Start(0);
    w.streams.StreamLogs(w.node(0), /*report_exit=*/true);
    ASSERT_TRUE(w.Ended(0));
    EXPECT_EQ(w.node(0).exit_code, 137);
    EXPECT_EQ(w.node(0).end_reason, "OOMKilled (exit code 137)");
    EXPECT_TRUE(w.world.recorder().Said("barge: head ended: OOMKilled (exit code 137)"))
        << w.world.recorder().AllMessages();
    ASSERT_EQ(w.world.attempt().fault.has_value(), restartable);
    if (restartable) {
      EXPECT_EQ(w.world.attempt().fault->rank, 0);
      EXPECT_EQ(w.world.attempt().fault->exit_code, 137);
      EXPECT_EQ(w.world.attempt().fault->detail, "node 0 (head) on h1 ended: OOMKilled (exit code 137)");
    }
  }
}

TEST(NodeStreams, LinesTheFollowMissedAtTheExitAreReadBackOnceAndInOrder) {
  StreamsWorld w;
  ASSERT_TRUE(w.Ready());
  // Lines 3, 4 and 5 share a stamp; the follow gives 0 to 4, not 5 to 8.
  FakeNode head{milliseconds(200), 0};
  for (int i = 0; i < 9; ++i) head.lines.push_back("line " + std::to_string(i));
  head.lines_per_stamp = 3;
  head.follow_drops_last = 4;
  w.world.fake().SetNode(0, head);
  w.Start(0);
  w.streams.StreamLogs(w.node(0), /*report_exit=*/true);
  ASSERT_TRUE(w.Ended(0));
  EXPECT_EQ(w.Kept(0), head.lines);
  // The catch-up: without -f, from the last stamp the follow gave.
  const std::string name = w.world.plan().nodes[0].container.name;
  EXPECT_EQ(w.Sent("h1", "docker logs --timestamps --since 2026-11-24T10:00:00.000000001Z " + name).size(), 1u);
  EXPECT_EQ(w.node(0).exit_code, 0);
  EXPECT_EQ(w.node(0).end_reason, "exit code 0");
}

TEST(NodeStreams, AnAttachedStreamKeepsOnlyTheLinesAfterThoseAlreadyKeptAndReportsNoExit) {
  StreamsWorld w;
  ASSERT_TRUE(w.Ready());
  FakeNode worker{milliseconds(200), 5, false, {"a", "b", "c", "d"}};
  w.world.fake().SetNode(1, worker);
  w.Start(1);
  // The kept file already holds a and b (stamps ...0 and ...1).
  Result<int64_t> b = container::ParseTimestamp("2026-11-24T10:00:00.000000001Z");
  ASSERT_TRUE(b.ok());
  w.node(1).skip_through_ns = *b;
  w.streams.StreamLogs(w.node(1), /*report_exit=*/false);
  ASSERT_TRUE(w.world.RunUntil([&] { return !w.node(1).logs_open; }));
  const std::string name = w.world.plan().nodes[1].container.name;
  const std::vector<std::string> follows =
      w.Sent("h2", "docker logs -f --timestamps --since 2026-11-24T10:00:00.000000001Z " + name);
  ASSERT_EQ(follows.size(), 1u);
  EXPECT_EQ(follows[0].find("@@barge-exit-"), std::string::npos) << follows[0];
  EXPECT_EQ(w.Kept(1), (std::vector<std::string>{"c", "d"}));
  // How it ended is not this stream's to say.
  EXPECT_EQ(w.node(1).phase, internal::NodePhase::kRunning);
  EXPECT_FALSE(w.node(1).exit_code.has_value());
  EXPECT_FALSE(w.world.attempt().fault.has_value());
  EXPECT_TRUE(w.world.recorder().events.empty());
}

TEST(NodeStreams, ASessionLostUnderAStreamMakesTheNodeLostNotExited) {
  StreamsWorld w;
  ASSERT_TRUE(w.Ready());
  w.world.fake().SetNode(1, FakeNode{std::chrono::hours(1), 0, false, {"started"}});
  w.Start(1);
  w.world.host("h2").When("docker logs -f", [&] { w.world.host("h2").Drop("link down"); });
  w.streams.StreamLogs(w.node(1), /*report_exit=*/true);
  ASSERT_TRUE(w.Ended(1));
  EXPECT_EQ(w.node(1).phase, internal::NodePhase::kLost);
  EXPECT_FALSE(w.node(1).exit_code.has_value());
  EXPECT_TRUE(w.world.recorder().Said("barge: h2: log stream of node 1 lost: h2: connection lost: link down"))
      << w.world.recorder().AllMessages();
  const auto& edges = w.world.recorder().edges;
  EXPECT_NE(std::find(edges.begin(), edges.end(), "running failed 1 on h2: its host was lost"), edges.end());
  // The host's loss is Faults' to note (its on_lost), not the stream's.
  EXPECT_FALSE(w.world.attempt().fault.has_value());
  EXPECT_TRUE(w.world.recorder().events.empty());
}

TEST(NodeStreams, AWorkerThatFailsWhileTheAttemptIsTornDownIsNoFaultAndNotSaid) {
  StreamsWorld w;
  ASSERT_TRUE(w.Ready());
  w.world.fake().SetNode(1, FakeNode{milliseconds(200), 143});
  w.Start(1);
  w.world.attempt().tearing_down = true;
  w.streams.StreamLogs(w.node(1), /*report_exit=*/true);
  ASSERT_TRUE(w.Ended(1));
  EXPECT_EQ(w.node(1).end_reason, "killed by SIGTERM (exit code 143)");
  EXPECT_FALSE(w.world.attempt().fault.has_value());
  EXPECT_FALSE(w.world.recorder().Said("node 1 (worker) on h2 ended")) << w.world.recorder().AllMessages();
  // Still recorded as an exit.
  ASSERT_FALSE(w.world.recorder().events.empty());
  EXPECT_EQ(w.world.recorder().events[0], "node_exited h2: rank 1 (worker) ended: killed by SIGTERM (exit code 143)");
}

}  // namespace node_streams_test
}  // namespace barge::runner
