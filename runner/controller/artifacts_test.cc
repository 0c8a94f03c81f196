// Artifacts on its own (artifacts.h): given the job's context, the attempt
// and the plan, on scripted fake hosts (tests/support/part_world.h); the
// local tar that unpacks each copy runs on the fake connector's local host.
#include "runner/controller/artifacts.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>

#include "runner/controller/job_state.h"
#include "runner/store/state_dir.h"
#include "tests/support/part_world.h"

namespace barge::runner {
namespace artifacts_test {

using std::chrono::milliseconds;
using std::chrono::seconds;

struct ArtifactsWorld {
  explicit ArtifactsWorld(const std::string& extra)
      : world(PartWorld::Yaml(extra)), artifacts(&world.ctx(), &world.attempt(), &world.plan()) {}
  // Hosts connected and the attempt's nodes made, each started (its
  // container made, running).
  bool Ready() {
    if (!world.Connect()) return false;
    world.MakeNodes();
    for (auto& n : world.attempt().nodes) {
      n->run_attempted = true;
      n->container_id = "id-" + n->plan->container.name;
      n->phase = internal::NodePhase::kRunning;
    }
    return true;
  }
  internal::NodeState& node(int rank) { return *world.attempt().nodes.at(rank); }
  const std::string& name(int rank) { return world.plan().nodes.at(rank).container.name; }
  std::string ArtifactsDir() { return RunDir(world.state_dir().string(), "abcd1234") + "/artifacts"; }
  // How many lines sent to `host` contain `part`.
  int Count(FakeHost& host, const std::string& part) {
    const auto& lines = host.lines();
    return static_cast<int>(std::count_if(lines.begin(), lines.end(), [&](const std::string& l) {
      return l.find(part) != std::string::npos;
    }));
  }
  int Count(const std::string& host, const std::string& part) { return Count(world.host(host), part); }
  int Untars(int rank) {
    return Count(world.fake().local(), "tar -x --no-same-owner -C " + ArtifactsDir() + "/" + std::to_string(rank));
  }

  PartWorld world;
  internal::Artifacts artifacts;
};

TEST(Artifacts, TheLastCopyTakesEachArtifactOutOfEveryStartedNodeIntoItsRanksDirectory) {
  ArtifactsWorld w("artifacts: [{node: all, path: /out}, {path: /ckpt}]\n");  // /ckpt: the head's
  ASSERT_TRUE(w.Ready());
  w.artifacts.FinalArtifacts();
  EXPECT_EQ(w.Count("h1", "docker cp " + w.name(0) + ":/out -"), 1);
  EXPECT_EQ(w.Count("h1", "docker cp " + w.name(0) + ":/ckpt -"), 1);
  EXPECT_EQ(w.Count("h2", "docker cp " + w.name(1) + ":/out -"), 1);
  EXPECT_EQ(w.Count("h2", "docker cp"), 1);
  EXPECT_EQ(w.Untars(0), 2);
  EXPECT_EQ(w.Untars(1), 1);
  EXPECT_TRUE(std::filesystem::is_directory(w.ArtifactsDir() + "/0"));
  EXPECT_TRUE(std::filesystem::is_directory(w.ArtifactsDir() + "/1"));
  EXPECT_TRUE(w.world.recorder().Said("barge: artifacts copied to " + w.ArtifactsDir()))
      << w.world.recorder().AllMessages();
}

TEST(Artifacts, NodesNeverStartedOrOnALostHostAreNotCopied) {
  ArtifactsWorld w("artifacts: [{node: all, path: /out}]\n");
  ASSERT_TRUE(w.Ready());
  w.world.host_state(0).lost = true;
  w.node(1).run_attempted = false;
  w.node(1).container_id.clear();
  w.artifacts.FinalArtifacts();
  EXPECT_EQ(w.Count("h1", "docker cp"), 0);
  EXPECT_EQ(w.Count("h2", "docker cp"), 0);
  EXPECT_TRUE(w.world.fake().local().lines().empty());
  EXPECT_FALSE(std::filesystem::exists(w.ArtifactsDir()));
}

TEST(Artifacts, ALastCopyThatNeverEndsIsGivenUpAfter600SecondsAndSaid) {
  ArtifactsWorld w("artifacts: [{path: /out}]\n");
  ASSERT_TRUE(w.Ready());
  w.world.host("h1").On("docker cp", FakeReply{.hang = true});
  const auto began = w.world.loop().Now();
  w.artifacts.FinalArtifacts();
  EXPECT_GE(w.world.loop().Now() - began, seconds(600));
  EXPECT_LT(w.world.loop().Now() - began, seconds(610));
  EXPECT_TRUE(w.world.recorder().Said("barge: copying artifacts did not finish within 600 s"))
      << w.world.recorder().AllMessages();
  EXPECT_FALSE(w.world.recorder().Said("artifacts copied")) << w.world.recorder().AllMessages();
}

TEST(Artifacts, ALocalTarThatFailsIsSaidWithItsNode) {
  ArtifactsWorld w("artifacts: [{path: /out}]\n");
  ASSERT_TRUE(w.Ready());
  w.world.fake().local().On("tar -x", FakeReply{2, "", "tar: short read\n"});
  w.artifacts.FinalArtifacts();
  EXPECT_TRUE(w.world.recorder().Said("barge: artifacts of node 0: tar: ")) << w.world.recorder().AllMessages();
  EXPECT_TRUE(w.world.recorder().Said("short read")) << w.world.recorder().AllMessages();
}

TEST(Artifacts, PeriodicCopiesRunEveryIntervalFromRunningNodesOnlyAndStopAtTeardown) {
  ArtifactsWorld w("artifacts: [{node: all, path: /ckpt, every: 10s}]\n");
  ASSERT_TRUE(w.Ready());
  w.node(1).phase = internal::NodePhase::kExited;
  w.artifacts.ScheduleArtifacts();
  EXPECT_EQ(w.world.attempt().monitors.size(), 1u);
  w.world.RunUntil([] { return false; }, milliseconds(35000));
  EXPECT_EQ(w.Count("h1", "docker cp " + w.name(0) + ":/ckpt -"), 3);  // at 10, 20 and 30 s
  EXPECT_EQ(w.Count("h2", "docker cp"), 0);
  EXPECT_EQ(w.Untars(0), 3);
  w.world.attempt().tearing_down = true;
  w.world.RunUntil([] { return false; }, milliseconds(30000));
  EXPECT_EQ(w.Count("h1", "docker cp"), 3);
}

TEST(Artifacts, APeriodicCopyStillInFlightIsNotStartedAgain) {
  ArtifactsWorld w("artifacts: [{path: /ckpt, every: 10s}]\n");
  ASSERT_TRUE(w.Ready());
  w.world.host("h1").On("docker cp", FakeReply{0, "", "", seconds(25)});
  w.world.fake().local().On("tar -x", FakeReply{0, "", "", seconds(25)});  // it reads the copy to its end
  w.artifacts.ScheduleArtifacts();
  // Copies start at 10 s (ends at 35 s) and at 40 s; the ticks at 20 and
  // 30 s find the first still in flight.
  w.world.RunUntil([] { return false; }, milliseconds(45000));
  EXPECT_EQ(w.Count("h1", "docker cp"), 2);
  EXPECT_EQ(w.Untars(0), 2);
}

// The local tar ends (here: fails) long before its copy's stream does, and
// other commands of the attempt start meanwhile (the other artifact's
// copies), which frees the tar's finished command: the copy's end must not
// touch it. Before the fix it crashed (use after free) at 35 s.
TEST(Artifacts, ALocalTarThatEndsBeforeItsCopyLeavesNothingDanglingAndTheCopyStillEnds) {
  ArtifactsWorld w("artifacts: [{path: /a, every: 10s}, {path: /b, every: 10s}]\n");
  ASSERT_TRUE(w.Ready());
  w.world.host("h1").On(":/a -", FakeReply{0, "", "", seconds(25)});
  w.world.fake().local().On("tar -x", FakeReply{2, "", "tar: no space left on device\n"});
  w.artifacts.ScheduleArtifacts();
  w.world.RunUntil([] { return false; }, milliseconds(45000));
  // /a: at 10 s (ends at 35 s) and 40 s; /b: every 10 s.
  EXPECT_EQ(w.Count("h1", ":/a -"), 2);
  EXPECT_EQ(w.Count("h1", ":/b -"), 4);
  EXPECT_TRUE(w.world.recorder().Said("artifacts of node 0: tar: tar: no space left on device"))
      << w.world.recorder().AllMessages();
}

}  // namespace artifacts_test
}  // namespace barge::runner
