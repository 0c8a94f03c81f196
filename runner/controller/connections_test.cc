// Connections on its own (connections.h, connections.cc, addresses.cc):
// given the job's context, its hosts, the plan, the facts it is made from
// and the faults, on scripted fake hosts (tests/support/part_world.h).
#include "runner/controller/connections.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "runner/controller/faults.h"
#include "runner/controller/job_state.h"
#include "tests/support/part_world.h"

namespace barge::runner {
namespace connections_test {

using std::chrono::milliseconds;

struct ConnectionsWorld {
  explicit ConnectionsWorld(const std::string& extra = "", const std::string& hosts = "[h1, h2]")
      : ConnectionsWorld(PartWorld::Yaml(extra, hosts), 0) {}
  ConnectionsWorld(const std::string& yaml, int)
      : world(yaml),
        faults(&world.ctx(), &world.hosts(), &world.attempt(), &world.plan()),
        connections(&world.ctx(), &world.hosts(), &world.planner(), &faults) {}
  PartWorld world;
  internal::Faults faults;
  internal::Connections connections;
};

// Lines of `host` containing `part`.
int Count(PartWorld& world, const std::string& host, const std::string& part) {
  const auto& lines = world.host(host).lines();
  return static_cast<int>(std::count_if(lines.begin(), lines.end(), [&](const std::string& l) {
    return l.find(part) != std::string::npos;
  }));
}

TEST(Connections, EveryHostGetsANewStateWithItsOwnIdAndAReconnectRetiresThePreviousOne) {
  ConnectionsWorld w;
  ASSERT_TRUE(w.connections.Connect().ok()) << w.world.recorder().AllMessages();
  internal::HostSet& hosts = w.world.hosts();
  ASSERT_EQ(hosts.by_index.size(), 2u);
  internal::HostState* h1 = &w.world.host_state(0);
  internal::HostState* h2 = &w.world.host_state(1);
  EXPECT_EQ(h1->id, 1);
  EXPECT_EQ(h2->id, 2);
  EXPECT_EQ(h1->name, "h1");
  EXPECT_EQ(h2->index, 1u);
  EXPECT_TRUE(h1->exec && h2->exec);
  EXPECT_FALSE(h1->job_dir.empty());
  EXPECT_NE(h1->job_dir, h2->job_dir);
  EXPECT_EQ(w.world.input().host_paths.at(0), h1->job_dir);
  EXPECT_EQ(w.world.recorder().edges,
            (std::vector<std::string>{"connect began h1", "connect began h2", "connect ok h1", "connect ok h2"}));

  // h2 again: a new state and id; the old one is kept, still valid.
  const std::string old_dir = h2->job_dir;
  ASSERT_TRUE(w.connections.Connect({1}).ok());
  EXPECT_EQ(&w.world.host_state(0), h1);
  EXPECT_NE(&w.world.host_state(1), h2);
  EXPECT_EQ(w.world.host_state(1).id, 3);
  EXPECT_NE(w.world.host_state(1).job_dir, old_dir);
  ASSERT_EQ(hosts.retired.size(), 1u);
  EXPECT_EQ(hosts.retired[0].get(), h2);
  EXPECT_EQ(h2->id, 2);
  EXPECT_EQ(w.world.host("h2").connects(), 2);
  EXPECT_EQ(w.world.host("h1").connects(), 1);
}

TEST(Connections, AHostThatRefusesIsNamedInTheErrorAndKeptInConnectErrors) {
  ConnectionsWorld w;
  w.world.host("h2").RefuseConnect("connection refused");
  Status s = w.connections.Connect();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "cannot connect:\n  h2: connection refused");
  ASSERT_EQ(w.world.hosts().connect_errors.size(), 1u);
  EXPECT_EQ(w.world.hosts().connect_errors.at(1), "h2: connection refused");
  EXPECT_TRUE(w.world.host_state(0).exec);
  EXPECT_FALSE(w.world.host_state(1).exec);
  const auto& edges = w.world.recorder().edges;
  EXPECT_NE(std::find(edges.begin(), edges.end(), "connect ok h1"), edges.end());
  EXPECT_NE(std::find(edges.begin(), edges.end(), "connect failed h2: h2: connection refused"), edges.end());
}

TEST(Connections, AReconnectForgetsTheHostsEarlierConnectErrorAndAddress) {
  ConnectionsWorld w;
  w.world.host("h1").set_reached_address("10.1.0.1");
  w.world.host("h2").set_reached_address("");  // and no answer to its probe
  ASSERT_FALSE(w.connections.Connect().ok());
  ASSERT_EQ(w.world.hosts().connect_errors.count(1), 1u);
  EXPECT_EQ(w.world.input().reached_addresses.count(1), 0u);
  // Now it says where it was reached.
  w.world.host("h2").On("SSH_CONNECTION", FakeReply{0, "ssh 10.1.0.1 50000 10.1.0.2 22\n"});
  ASSERT_TRUE(w.connections.Connect({1}).ok()) << w.world.recorder().AllMessages();
  EXPECT_TRUE(w.world.hosts().connect_errors.empty());
  EXPECT_EQ(w.world.input().reached_addresses.at(1), "10.1.0.2");
  // h1's settled address stays: only the reconnected host is settled again.
  EXPECT_EQ(w.world.input().reached_addresses.at(0), "10.1.0.1");
  EXPECT_EQ(Count(w.world, "h1", "SSH_CONNECTION"), 0);
}

TEST(Connections, ALostConnectionIsAFaultThatMarksTheHostLost) {
  ConnectionsWorld w;
  ASSERT_TRUE(w.connections.Connect().ok());
  w.world.host("h2").Drop("reset by peer");
  EXPECT_TRUE(w.world.host_state(1).lost);
  EXPECT_FALSE(w.world.host_state(0).lost);
  ASSERT_TRUE(w.world.attempt().fault.has_value());
  EXPECT_EQ(w.world.attempt().fault->cause, RestartCause::kHostLost);
  EXPECT_EQ(w.world.attempt().fault->detail, "h2 is lost: h2: connection lost: reset by peer");
}

TEST(Connections, HostsNamedByANameGetTheAddressTheirConnectionReachedWithoutAnyCommand) {
  ConnectionsWorld w("", "[h1, h2, {address: h3, internal_address: 10.9.0.3}, 10.1.0.4]");
  w.world.host("h1").set_reached_address("10.1.0.1");
  w.world.host("h2").set_reached_address("10.1.0.2");
  w.world.host("h3").set_reached_address("");
  w.world.host("10.1.0.4").set_reached_address("");
  ASSERT_TRUE(w.connections.Connect().ok()) << w.world.recorder().AllMessages();
  const auto& reached = w.world.input().reached_addresses;
  EXPECT_EQ(reached.at(0), "10.1.0.1");
  EXPECT_EQ(reached.at(1), "10.1.0.2");
  // Given an internal address or by IP: used as given, never settled.
  EXPECT_EQ(reached.count(2), 0u);
  EXPECT_EQ(reached.count(3), 0u);
  EXPECT_EQ(w.world.host_state(1).inventory.internal_address, "10.1.0.2");
  EXPECT_EQ(w.world.plan().hosts[1].internal_address, "10.1.0.2");
  EXPECT_EQ(w.world.plan().hosts[2].internal_address, "10.9.0.3");
  EXPECT_TRUE(w.world.recorder().Said("internal address: h1 is 10.1.0.1 (the address its SSH connection "
                                      "reached); h2 is 10.1.0.2 (the address its SSH connection reached)"))
      << w.world.recorder().AllMessages();
  for (const char* h : {"h1", "h2", "h3", "10.1.0.4"}) EXPECT_TRUE(w.world.host(h).lines().empty()) << h;
}

TEST(Connections, AHostBehindAJumpHostIsAskedWhereItWasReached) {
  ConnectionsWorld w;
  w.world.host("h1").set_reached_address("10.1.0.1");
  w.world.host("h2").set_reached_address("");
  w.world.host("h2").On("SSH_CONNECTION", FakeReply{0, "ssh 10.1.0.1 50000 10.1.0.9 22\n"});
  ASSERT_TRUE(w.connections.Connect().ok()) << w.world.recorder().AllMessages();
  EXPECT_EQ(Count(w.world, "h2", "SSH_CONNECTION"), 1);
  EXPECT_EQ(Count(w.world, "h1", "SSH_CONNECTION"), 0);
  EXPECT_EQ(w.world.input().reached_addresses.at(1), "10.1.0.9");
  EXPECT_EQ(w.world.host_state(1).inventory.internal_address, "10.1.0.9");
  EXPECT_TRUE(w.world.recorder().Said(
      "h2 is 10.1.0.9 (the address it was reached at through its jump host ($SSH_CONNECTION on it))"))
      << w.world.recorder().AllMessages();
}

TEST(Connections, AHostThatCannotSayItsAddressFailsTheConnectWithItsReason) {
  ConnectionsWorld w;
  w.world.host("h1").set_reached_address("10.1.0.1");
  w.world.host("h2").set_reached_address("");
  w.world.host("h2").On("SSH_CONNECTION", FakeReply{1, "", "sh: ip: not found\n"});
  Status s = w.connections.Connect();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cannot settle the internal address of:\n  h2: cannot tell this host's address"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("set internal_address for it"), std::string::npos) << s.message();
  ASSERT_EQ(w.world.hosts().connect_errors.count(1), 1u);
  EXPECT_EQ(w.world.hosts().connect_errors.at(1).rfind("cannot tell this host's address", 0), 0u)
      << w.world.hosts().connect_errors.at(1);
  EXPECT_EQ(w.world.input().reached_addresses.count(1), 0u);
  EXPECT_EQ(w.world.input().reached_addresses.at(0), "10.1.0.1");  // the other host is settled
  EXPECT_EQ(w.world.hosts().connect_errors.count(0), 0u);
}

TEST(Connections, AHostReachedAtALoopbackAddressGetsItsSourceAddressTowardTheHead) {
  ConnectionsWorld w;
  w.world.host("h1").set_reached_address("10.1.0.1");
  w.world.host("h2").set_reached_address("127.0.0.1");
  w.world.host("h2").On("route get", FakeReply{0, "ssh 127.0.0.1 5 127.0.0.1 22\n"
                                                  "10.1.0.1 dev eth0 src 10.1.0.7 uid 0 \n    cache \n"});
  ASSERT_TRUE(w.connections.Connect().ok()) << w.world.recorder().AllMessages();
  EXPECT_EQ(Count(w.world, "h2", "ip -o route get 10.1.0.1"), 1);
  EXPECT_EQ(w.world.input().reached_addresses.at(1), "10.1.0.7");
  EXPECT_EQ(w.world.plan().hosts[1].internal_address, "10.1.0.7");
  EXPECT_TRUE(w.world.recorder().Said("h2 is 10.1.0.7 (its source address toward 10.1.0.1 (`ip route get` on "
                                      "it; it was reached at 127.0.0.1, a loopback address))"))
      << w.world.recorder().AllMessages();
}

TEST(Connections, TheHeadReachedAtALoopbackAddressIsAskedTowardTheFirstOtherHost) {
  ConnectionsWorld w;
  w.world.host("h1").set_reached_address("127.0.0.1");
  w.world.host("h2").set_reached_address("10.1.0.2");
  w.world.host("h1").On("route get", FakeReply{0, "10.1.0.2 dev eth0 src 10.1.0.5 uid 0 \n"});
  ASSERT_TRUE(w.connections.Connect().ok()) << w.world.recorder().AllMessages();
  EXPECT_EQ(Count(w.world, "h1", "ip -o route get 10.1.0.2"), 1);
  EXPECT_EQ(w.world.input().reached_addresses.at(0), "10.1.0.5");
}

TEST(Connections, ALoopbackAddressWithNoRouteTowardTheOthersFailsTheConnect) {
  ConnectionsWorld w;
  w.world.host("h1").set_reached_address("10.1.0.1");
  w.world.host("h2").set_reached_address("127.0.0.1");
  w.world.host("h2").On("route get", FakeReply{0, "ssh 127.0.0.1 5 127.0.0.1 22\n"});
  Status s = w.connections.Connect();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("h2: it was reached at 127.0.0.1, a loopback address the other hosts cannot use, "
                             "and `ip route get 10.1.0.1` on it did not say its address toward them"),
            std::string::npos)
      << s.message();
  EXPECT_EQ(w.world.input().reached_addresses.count(1), 0u);
  EXPECT_EQ(w.world.hosts().connect_errors.count(1), 1u);
}

TEST(Connections, HostKeyCheckingOffIsWarnedAbout) {
  ConnectionsWorld off(
      "name: fake\nimage: img\ncommand: [train]\nhosts: [h1, h2]\nssh: {host_key_checking: 'off'}\n", 0);
  ASSERT_TRUE(off.connections.Connect().ok());
  EXPECT_TRUE(off.world.recorder().Said("warning: host_key_checking is off")) << off.world.recorder().AllMessages();
  ConnectionsWorld strict;
  ASSERT_TRUE(strict.connections.Connect().ok());
  EXPECT_FALSE(strict.world.recorder().Said("host_key_checking")) << strict.world.recorder().AllMessages();
}

}  // namespace connections_test
}  // namespace barge::runner
