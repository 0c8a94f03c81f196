// Where a forward connects and what barge says of it (forwards.h).
#include "runner/controller/forwards.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>

namespace barge::runner {
namespace {

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
}  // namespace barge::runner
