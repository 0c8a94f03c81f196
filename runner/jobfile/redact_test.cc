#include "runner/jobfile/redact.h"

#include <gtest/gtest.h>

namespace barge::runner {
namespace {

JobSpec SpecWithSecrets() {
  JobSpec spec;
  spec.secrets.push_back({"HF_TOKEN", "file ~/.hf_token", true, "hf_abcdef123456\n"});
  spec.secrets.push_back({"WANDB_API_KEY", "env WANDB_API_KEY", true, "wandb-0123456789"});
  spec.registry = RegistrySpec{"registry.example.com", "ci", "env REGISTRY_PASSWORD", "hunter2-pass"};
  return spec;
}

TEST(Redactor, ReplacesEverySecretValueAndTheRegistryPasswordWhereverTheyAppear) {
  Redactor redact(SpecWithSecrets());
  EXPECT_EQ(redact("token hf_abcdef123456 and wandb-0123456789, again hf_abcdef123456; "
                   "login with hunter2-pass"),
            "token [redacted] and [redacted], again [redacted]; login with [redacted]");
}

TEST(Redactor, LeavesTextWithoutSecretsAsItIs) {
  Redactor redact(SpecWithSecrets());
  EXPECT_EQ(redact("node 0 (head) on h1 ended: exit code 3"), "node 0 (head) on h1 ended: exit code 3");
  EXPECT_EQ(redact(""), "");
  EXPECT_EQ(Redactor()("anything hf_abcdef123456"), "anything hf_abcdef123456");
}

TEST(Redactor, MasksAValueWithOrWithoutItsTrailingLineBreakAndEachOfItsLines) {
  Redactor redact;
  redact.Add("-----BEGIN KEY-----\nAAAABBBBCCCC\r\n-----END KEY-----\n");
  EXPECT_EQ(redact("bad key: AAAABBBBCCCC at line 2"), "bad key: [redacted] at line 2");
  EXPECT_EQ(redact("x-----BEGIN KEY-----\nAAAABBBBCCCC\r\n-----END KEY-----\ny"), "x[redacted]y");
  EXPECT_EQ(redact("-----BEGIN KEY-----"), "[redacted]");
}

TEST(Redactor, PrefersTheLongestValueWhenValuesOverlap) {
  Redactor redact;
  redact.Add("secret");
  redact.Add("secret-and-more");
  EXPECT_EQ(redact("a secret-and-more b secret c"), "a [redacted] b [redacted] c");
}

TEST(Redactor, DoesNotMaskValuesShorterThanFourBytes) {
  Redactor redact;
  redact.Add("abc");
  redact.Add("");
  EXPECT_TRUE(redact.empty());
  EXPECT_EQ(redact("abc abc"), "abc abc");
  redact.Add("abcd");
  EXPECT_EQ(redact("abc abcd"), "abc [redacted]");
}

TEST(Redactor, MasksValuesHoldingQuotesAndNonAsciiBytes) {
  Redactor redact;
  redact.Add("it's \"é\" $(x)");
  EXPECT_EQ(redact("value: it's \"é\" $(x)."), "value: [redacted].");
}

}  // namespace
}  // namespace barge::runner
