// Forwarding on its own (forwarding.h): given the job's context, its hosts
// and the plan, on scripted fake hosts (tests/support/part_world.h).
#include "runner/controller/forwarding.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "runner/controller/job_state.h"
#include "tests/support/part_world.h"

namespace barge::runner {
namespace forwarding_test {

struct ForwardingWorld {
  ForwardingWorld() : world(PartWorld::Yaml()), forwarding(&world.ctx(), &world.hosts(), &world.plan()) {}
  PartWorld world;
  internal::Forwarding forwarding;
};

// A TCP port of 127.0.0.1 held by this process (closed with the object).
struct HeldPort {
  HeldPort() {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    listen(fd, 1);
    socklen_t len = sizeof a;
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~HeldPort() { close(fd); }
  int fd = -1;
  int port = 0;
};

TEST(Forwarding, ARankThePlanLacksIsRefusedNamingTheEntryAndTheRanks) {
  ForwardingWorld w;  // two nodes: ranks 0..1
  const std::vector<ForwardSpec> forwards = {{0, 6006, 0, ""}, {0, 8265, 5, ""}};
  Status s = w.forwarding.Bind(forwards, "forward");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "forward[1].node: the job has no node 5 (ranks 0..1)");
}

TEST(Forwarding, ABusyLocalPortFailsTheBindNamingThePortAndNothingIsServed) {
  ForwardingWorld w;
  ASSERT_TRUE(w.world.Connect());
  HeldPort busy;
  ASSERT_GT(busy.port, 0);
  Status s = w.forwarding.Bind({{busy.port, 6006, 0, ""}}, "forward");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(std::to_string(busy.port)), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("forward[0]"), std::string::npos) << s.message();
  // Nothing bound: serving does nothing, on no host.
  CommandGroup group(&w.world.loop());
  w.forwarding.Serve(group, [](const Status&) {});
  EXPECT_TRUE(group.idle());
  EXPECT_TRUE(w.world.host("h1").lines().empty());
}

TEST(Forwarding, AForwardToANodeOnItsOwnNetworkAsksItsHostForTheContainersAddress) {
  ForwardingWorld w;
  ASSERT_TRUE(w.world.Connect());
  Status s = w.forwarding.Bind({{0, 6006, 1, ""}}, "forward");  // port 0: any free one
  ASSERT_TRUE(s.ok()) << s.message();
  CommandGroup group(&w.world.loop());
  std::vector<std::string> fatal;
  w.world.host("h2").On("inspect", FakeReply{0, " \n"});  // no address: not on a network barge can reach
  w.forwarding.Serve(group, [&](const Status& why) { fatal.push_back(why.message()); });
  ASSERT_TRUE(w.world.RunUntil([&] { return group.idle(); }));
  ASSERT_EQ(w.world.host("h2").lines().size(), 1u);
  EXPECT_NE(w.world.host("h2").lines()[0].find(w.world.plan().nodes[1].container.name), std::string::npos)
      << w.world.host("h2").lines()[0];
  EXPECT_TRUE(w.world.host("h1").lines().empty()) << "rank 1 is on h2";
  ASSERT_EQ(fatal.size(), 1u);
  EXPECT_NE(fatal[0].find("cannot forward to rank 1 port 6006"), std::string::npos) << fatal[0];
  w.forwarding.Close();
}

}  // namespace forwarding_test
}  // namespace barge::runner
