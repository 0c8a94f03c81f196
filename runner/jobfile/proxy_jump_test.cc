#include "runner/jobfile/proxy_jump.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runner/jobfile/job_file.h"

namespace barge::runner {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ProxyJump, HopsAreKeptAsWrittenFirstFirst) {
  auto hops = ParseProxyJump("alice@bastion.example:2222, 10.0.0.1,[fe80::1]:22,bob@[2001:db8::2]");
  ASSERT_TRUE(hops.ok()) << hops.status().message();
  EXPECT_EQ(*hops, (std::vector<std::string>{"alice@bastion.example:2222", "10.0.0.1",
                                             "[fe80::1]:22", "bob@[2001:db8::2]"}));
}

TEST(ProxyJump, BadHopsAreRefusedNamingTheHop) {
  EXPECT_EQ(ParseProxyJump("a,,b").status().message(),
            "empty jump host (expected [user@]host[:port],...)");
  EXPECT_EQ(ParseProxyJump("bastion:0").status().message(),
            "jump host 'bastion:0': port must be from 1 to 65535, got 0");
  EXPECT_EQ(ParseProxyJump("bastion:99999").status().message(),
            "jump host 'bastion:99999': port must be from 1 to 65535, got 99999");
  EXPECT_EQ(ParseProxyJump("bastion:22x").status().message(),
            "jump host 'bastion:22x': invalid port '22x'");
  EXPECT_EQ(ParseProxyJump("fe80::1").status().message(),
            "jump host 'fe80::1': write an IPv6 address in brackets ([fe80::1]:22)");
  EXPECT_EQ(ParseProxyJump("[fe80::1").status().message(), "jump host '[fe80::1': '[' without ']'");
  EXPECT_EQ(ParseProxyJump("local").status().message(), "jump host 'local': 'local' is not a jump host");
  EXPECT_THAT(ParseProxyJump("a b").status().message(), HasSubstr("jump host 'a b': invalid host address"));
  EXPECT_THAT(ParseProxyJump("-x@h").status().message(), HasSubstr("jump host '-x@h': "));
  EXPECT_EQ(ParseProxyJump("a,b,c,d,e,f,g,h,i").status().message(), "more than 8 jump hosts");
}

TEST(ProxyJump, TheJobFileTakesItPerJobAndPerHost) {
  LoadedJob job = ParseJobText(
      "name: x\nimage: i\nssh: {proxy_jump: 'ops@gw:2200,10.0.0.1'}\n"
      "hosts:\n  - a\n  - {address: b, proxy_jump: other-gw}\n",
      "job.yaml", "/tmp");
  ASSERT_TRUE(job.errors.empty()) << job.errors[0].ToString();
  EXPECT_EQ(job.spec->ssh.proxy_jump, (std::vector<std::string>{"ops@gw:2200", "10.0.0.1"}));
  EXPECT_FALSE(job.spec->hosts[0].proxy_jump.has_value());
  EXPECT_EQ(job.spec->hosts[1].proxy_jump, std::vector<std::string>{"other-gw"});
}

TEST(ProxyJump, AnInvalidValueIsAnErrorAtItsLineAndKey) {
  LoadedJob job = ParseJobText("name: x\nimage: i\nssh:\n  proxy_jump: 'gw:0'\n", "job.yaml", "/tmp");
  std::vector<std::string> errors;
  for (const auto& e : job.errors) errors.push_back(e.ToString());
  EXPECT_THAT(errors, ElementsAre("job.yaml:4:15: ssh.proxy_jump: jump host 'gw:0': port must be "
                                  "from 1 to 65535, got 0"));
  job = ParseJobText("name: x\nimage: i\nhosts:\n  - {address: local, proxy_jump: gw}\n", "job.yaml", "/tmp");
  ASSERT_EQ(job.errors.size(), 1u);
  EXPECT_THAT(job.errors[0].ToString(), HasSubstr("hosts[0].proxy_jump: not used with address 'local'"));
}

}  // namespace
}  // namespace barge::runner
