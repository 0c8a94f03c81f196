#include "runner/remote/teardown_hooks.h"

#include <gtest/gtest.h>

namespace barge::runner {
namespace {

cluster::Host MakeHost() {
  cluster::Host h;
  h.address = "203.0.113.10";
  h.internal_address = "10.0.0.10";
  h.vars = {{"instance_id", "i-0abc"}, {"evil", "x'; touch /tmp/pwned; '"}};
  return h;
}

TEST(TeardownHooks, PlaceholdersAreReplacedByShellQuotedValues) {
  Result<std::string> line = SubstituteHook(
      "aws ec2 terminate-instances --instance-ids {host.vars.instance_id} # {host.address} "
      "{host.internal_address} {job.id}",
      MakeHost(), "a1b2c3d4");
  ASSERT_TRUE(line.ok()) << line.status().message();
  EXPECT_EQ(*line,
            "aws ec2 terminate-instances --instance-ids i-0abc # 203.0.113.10 10.0.0.10 a1b2c3d4");
}

TEST(TeardownHooks, AValueCannotBecomeShellSyntax) {
  Result<std::string> line = SubstituteHook("echo {host.vars.evil}", MakeHost(), "j");
  ASSERT_TRUE(line.ok());
  EXPECT_EQ(*line, "echo 'x'\\''; touch /tmp/pwned; '\\'''");
}

TEST(TeardownHooks, UnknownPlaceholdersAndMissingVarsAreErrors) {
  EXPECT_FALSE(SubstituteHook("echo {host.vars.nope}", MakeHost(), "j").ok());
  EXPECT_FALSE(SubstituteHook("echo {host.name}", MakeHost(), "j").ok());
}

TEST(TeardownHooks, ShellBraceGroupsAreLeftAlone) {
  Result<std::string> line = SubstituteHook("{ echo a; echo b; } > /dev/null", MakeHost(), "j");
  ASSERT_TRUE(line.ok());
  EXPECT_EQ(*line, "{ echo a; echo b; } > /dev/null");
}

}  // namespace
}  // namespace barge::runner
