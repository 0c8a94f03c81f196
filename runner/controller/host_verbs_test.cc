// HostVerbs on scripted fake hosts (tests/support/part_world.h): the verbs
// on a recorded job's hosts, apart from the Controller. The bed tests
// (tests/e2e/) drive the same verbs through the binary on real hosts.
#include "runner/console/exit_codes.h"
#include "runner/controller/host_verbs.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cluster/plan.h"
#include "runner/remote/watchdog.h"
#include "tests/support/part_world.h"

namespace barge::runner {
namespace host_verbs_test {

struct VerbsWorld {
  VerbsWorld() : world(PartWorld::Yaml()) {
    options.state_dir = world.state_dir().string();
    options.echo = false;
  }
  internal::HostVerbs Make() {
    return internal::HostVerbs(world.spec(), world.input(), options, &world.loop(), &world.fake(), &world.recorder());
  }
  PartWorld world;
  ControllerOptions options;
};

TEST(HostVerbs, ExecOnARankTheJobLacksSaysSoAndConnectsToNoHost) {
  VerbsWorld w;
  internal::HostVerbs verbs = w.Make();
  EXPECT_EQ(verbs.ExecInNode(7, {"ls"}), kExitBargeFailure);
  EXPECT_TRUE(w.world.recorder().Said("the job has no node 7 (ranks 0..1)")) << w.world.recorder().AllMessages();
  EXPECT_EQ(w.world.host("h1").connects(), 0);
  EXPECT_EQ(w.world.host("h2").connects(), 0);
}

TEST(HostVerbs, ExecConnectsOnlyToItsNodesHostAndRunsTheCommandInItsContainer) {
  VerbsWorld w;
  w.world.host("h2").On("exec", FakeReply{3, "", ""});
  internal::HostVerbs verbs = w.Make();
  EXPECT_EQ(verbs.ExecInNode(1, {"ls", "/data"}), 3);
  EXPECT_EQ(w.world.host("h1").connects(), 0);
  ASSERT_EQ(w.world.host("h2").lines().size(), 1u);
  const std::string& line = w.world.host("h2").lines()[0];
  EXPECT_NE(line.find(cluster::ContainerName("fake", "abcd1234", 1)), std::string::npos) << line;
  EXPECT_NE(line.find("/data"), std::string::npos) << line;
}

TEST(HostVerbs, DownOfAnOrphanRemovesTheJobsContainersOnEveryHostAndDisarmsItsWatchdogs) {
  VerbsWorld w;
  w.world.host("h1").On("rm -f", FakeReply{0, "c1\nc2\n"});
  internal::HostVerbs verbs = w.Make();
  EXPECT_EQ(verbs.TearDownOrphan(), 0) << w.world.recorder().AllMessages();
  EXPECT_TRUE(w.world.recorder().Said("h1: removed 2 container(s)")) << w.world.recorder().AllMessages();
  EXPECT_TRUE(w.world.recorder().Said("h2: removed 0 container(s)")) << w.world.recorder().AllMessages();
  for (const char* h : {"h1", "h2"}) {
    const std::vector<std::string>& lines = w.world.host(h).lines();
    ASSERT_FALSE(lines.empty()) << h;
    EXPECT_NE(lines.front().find("barge.job=abcd1234"), std::string::npos) << h << ": " << lines.front();
    // The controller that named the job's directories is gone: every one
    // of the job's is disarmed.
    EXPECT_EQ(lines.back(), DisarmJobWatchdogsCommand("abcd1234")) << h;
  }
}

TEST(HostVerbs, DownOfAnOrphanWhoseHostCannotRemoveFailsNamingIt) {
  VerbsWorld w;
  w.world.host("h2").On("rm -f", FakeReply{1, "", "Cannot connect to the Docker daemon\n"});
  internal::HostVerbs verbs = w.Make();
  EXPECT_EQ(verbs.TearDownOrphan(), kExitBargeFailure);
  EXPECT_TRUE(w.world.recorder().Said("h2: removing the job's containers failed: Cannot connect to the Docker daemon"))
      << w.world.recorder().AllMessages();
}

}  // namespace host_verbs_test
}  // namespace barge::runner
