// Tests of "[LOCAL:]REMOTE" parsing.
#include "runner/jobfile/forward_spec.h"

#include <gtest/gtest.h>

namespace barge::runner {
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

}  // namespace
}  // namespace barge::runner
