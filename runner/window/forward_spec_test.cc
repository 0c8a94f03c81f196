// Tests of "[LOCAL:]REMOTE" parsing, and of where a forward reaches a node.
#include "runner/window/forward_spec.h"

#include <gtest/gtest.h>

#include "runner/window/forwards.h"

namespace barge::runner::window {
namespace {

TEST(ForwardPorts, ARemotePortAloneIsAlsoTheLocalOne) {
  Result<ForwardPorts> p = ParseForwardPorts("8265");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->local_port, 8265);
  EXPECT_EQ(p->remote_port, 8265);
}

TEST(ForwardPorts, LocalColonRemoteSplits) {
  Result<ForwardPorts> p = ParseForwardPorts("16006:6006");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->local_port, 16006);
  EXPECT_EQ(p->remote_port, 6006);
}

TEST(ForwardPorts, BadTextIsAnErrorThatQuotesItAndShowsTheForm) {
  for (const char* bad : {"", "0", "65536", "a:80", "80:", ":80", "1:2:3", "-5", "80 "}) {
    Result<ForwardPorts> p = ParseForwardPorts(bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_NE(p.status().message().find("[LOCAL:]REMOTE"), std::string::npos);
    EXPECT_NE(p.status().message().find(std::string("'") + bad + "'"), std::string::npos);
  }
}

TEST(ForwardTarget, HostNetworkIsTheHostsLoopbackOtherwiseTheContainersAddress) {
  EXPECT_EQ(*ForwardTarget(std::string("host"), ""), "127.0.0.1");
  EXPECT_EQ(*ForwardTarget(std::nullopt, "172.17.0.3 \n"), "172.17.0.3");
  Result<std::string> none = ForwardTarget(std::nullopt, " \n");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("network: host"), std::string::npos);
}

TEST(ForwardingLine, NamesTheLocalUrlTheRankAndThePort) {
  EXPECT_EQ(ForwardingLine({16006, 6006, 0}), "forwarding http://127.0.0.1:16006 -> rank 0 port 6006");
}

}  // namespace
}  // namespace barge::runner::window
