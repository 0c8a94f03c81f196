#include "runner/fleet/array_member.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace barge::runner::fleet {
namespace {

ArrayParams Params() {
  ArrayParams p;
  p.source = "params.csv";
  p.columns = {"lr", "tag", "evil"};
  p.rows = {{"0.1", "v1", "a b; rm -rf /"}, {"0.01", "v2", "it's $(id)"}};
  return p;
}

std::string EnvOf(const JobSpec& s, const std::string& name) {
  for (const auto& [k, v] : *s.container.env) {
    if (k == name) return v;
  }
  return "<unset>";
}

cluster::Host HostAt(const std::string& a) {
  cluster::Host h;
  h.address = a;
  return h;
}

TEST(ArrayMember, SubstitutionQuotesForTheShellOnlyWhenTheShellReadsIt) {
  ArrayParams p = Params();
  Result<std::string> raw = SubstituteArray("--x={array.evil} {other}", p, 0, false, "command");
  ASSERT_TRUE(raw.ok());
  EXPECT_EQ(*raw, "--x=a b; rm -rf / {other}");
  Result<std::string> quoted = SubstituteArray("echo {array.evil} {array.lr}", p, 1, true, "command");
  ASSERT_TRUE(quoted.ok());
  EXPECT_EQ(*quoted, "echo 'it'\\''s $(id)' 0.01");
  Result<std::string> unknown = SubstituteArray("{array.lrr}", p, 0, false, "command");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message(),
            "command: {array.lrr} names no column of params.csv (its columns: lr, tag, evil)");
}

TEST(ArrayMember, AMemberGetsItsHostsEnvAndSubstitutedCommandImageAndEnv) {
  JobSpec base;
  base.name = "sweep";
  base.image = "barge/test:{array.tag}";
  base.command = std::vector<std::string>{"sh", "-c", "echo {array.evil}"};
  base.container.env = container::KeyValues{{"LR_COPY", "lr={array.lr}"}};
  base.hosts = {HostAt("h1"), HostAt("h2"), HostAt("h3")};
  Result<JobSpec> m = MemberSpec(base, Params(), 0, "arr1", {HostAt("h2")});
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->name, "sweep-0");
  EXPECT_EQ(m->image, "barge/test:v1");
  EXPECT_EQ((*m->command)[2], "echo 'a b; rm -rf /'");
  ASSERT_EQ(m->hosts.size(), 1u);
  EXPECT_EQ(m->hosts[0].address, "h2");
  EXPECT_EQ(EnvOf(*m, "LR_COPY"), "lr=0.1");
  EXPECT_EQ(EnvOf(*m, "BARGE_ARRAY_JOB_ID"), "arr1");
  EXPECT_EQ(EnvOf(*m, "BARGE_ARRAY_INDEX"), "0");
  EXPECT_EQ(EnvOf(*m, "BARGE_ARRAY_SIZE"), "2");
  EXPECT_EQ(EnvOf(*m, "AWS_BATCH_JOB_ARRAY_INDEX"), "0");
  EXPECT_EQ(EnvOf(*m, "evil"), "a b; rm -rf /");
  EXPECT_FALSE(m->array.has_value());
}

TEST(ArrayMember, AListCommandNotReadByAShellGetsTheValueAsOneArgument) {
  JobSpec base;
  base.name = "sweep";
  base.image = "img";
  base.command = std::vector<std::string>{"python3", "train.py", "--note={array.evil}"};
  Result<JobSpec> m = MemberSpec(base, Params(), 0, "a", {});
  ASSERT_TRUE(m.ok());
  EXPECT_EQ((*m->command)[2], "--note=a b; rm -rf /");
}

TEST(ArrayMember, AnImageThatIsNotAReferenceAfterSubstitutionIsAnError) {
  JobSpec base;
  base.name = "sweep";
  base.image = "img:{array.evil}";
  Status s = CheckArray(base, Params());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("image of member 0"), std::string::npos) << s.message();
}

TEST(ArrayMember, HostsPerMemberFollowTheWorkerCountAndParallelIsCappedByThePool) {
  JobSpec s;
  s.hosts = {HostAt("h1"), HostAt("h2"), HostAt("h3"), HostAt("h4"), HostAt("h5")};
  EXPECT_EQ(HostsPerMember(s), 1u);  // workers: rest
  EXPECT_EQ(MembersAtOnce(s), 5u);
  s.roles[cluster::kWorkerRole].count = 1;
  EXPECT_EQ(HostsPerMember(s), 2u);
  EXPECT_EQ(MembersAtOnce(s), 2u);
  s.parallel = 1;
  EXPECT_EQ(MembersAtOnce(s), 1u);
  s.parallel = 10;
  EXPECT_EQ(MembersAtOnce(s), 2u);
  s.hosts_per_member = 3;
  EXPECT_EQ(HostsPerMember(s), 3u);
  s.hosts_per_member = 6;
  ArrayParams p = Params();
  s.name = "x";
  s.image = "img";
  EXPECT_FALSE(CheckArray(s, p).ok());
}

}  // namespace
}  // namespace barge::runner::fleet
