#include "runner/remote/teardown_hooks.h"

#include <gtest/gtest.h>

#include <cstdio>

#include "ssh/quote.h"

namespace barge::runner {
namespace {

cluster::Host MakeHost() {
  cluster::Host h;
  h.address = "203.0.113.10";
  h.internal_address = "10.0.0.10";
  h.vars = {{"instance_id", "i-0abc"}, {"evil", "x'; touch /tmp/pwned; '"}};
  return h;
}

TEST(TeardownHooks, PlaceholdersAreReplacedByShellQuotedValuesAfterTheHooksVariables) {
  Result<std::string> line = SubstituteHook(
      "aws ec2 terminate-instances --instance-ids \"$BARGE_VAR_instance_id\" # {host.address} "
      "{host.internal_address} {job.id}",
      MakeHost(), "a1b2c3d4");
  ASSERT_TRUE(line.ok()) << line.status().message();
  EXPECT_EQ(*line,
            "export BARGE_JOB_ID=a1b2c3d4 BARGE_HOST_ADDRESS=203.0.113.10 BARGE_HOST_INTERNAL_ADDRESS=10.0.0.10 "
            "BARGE_VAR_evil='x'\\''; touch /tmp/pwned; '\\''' BARGE_VAR_instance_id=i-0abc; "
            "aws ec2 terminate-instances --instance-ids \"$BARGE_VAR_instance_id\" # 203.0.113.10 10.0.0.10 a1b2c3d4");
}

TEST(TeardownHooks, AHostVarsValueReachesTheHookAsDataInsideTheUsersOwnQuotes) {
  // The value of `evil` is shell syntax; read from its variable inside
  // double quotes it stays one word of data, and nothing it names runs.
  Result<std::string> line = SubstituteHook("printf '%s' \"$BARGE_VAR_evil\"", MakeHost(), "j");
  ASSERT_TRUE(line.ok());
  std::string out;
  FILE* p = popen(("sh -c " + ssh::ShellQuote(*line)).c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[256];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  EXPECT_EQ(pclose(p), 0);
  EXPECT_EQ(out, "x'; touch /tmp/pwned; '");
}

TEST(TeardownHooks, HostVarPlaceholdersAndUnknownPlaceholdersAreErrors) {
  Result<std::string> pasted = SubstituteHook("echo \"{host.vars.instance_id}\"", MakeHost(), "j");
  ASSERT_FALSE(pasted.ok());
  EXPECT_EQ(pasted.status().message(),
            "{host.vars.instance_id} is not allowed in a teardown hook: write \"$BARGE_VAR_instance_id\" "
            "(barge sets it for the hook)");
  EXPECT_FALSE(SubstituteHook("echo {host.name}", MakeHost(), "j").ok());
}

TEST(TeardownHooks, ShellBraceGroupsAreLeftAlone) {
  Result<std::string> line = SubstituteHook("{ echo a; echo b; } > /dev/null", MakeHost(), "j");
  ASSERT_TRUE(line.ok());
  const std::string text = "{ echo a; echo b; } > /dev/null";
  ASSERT_GE(line->size(), text.size());
  EXPECT_EQ(line->substr(line->size() - text.size()), text);
  EXPECT_EQ(line->substr(0, 7), "export ");
}

}  // namespace
}  // namespace barge::runner
