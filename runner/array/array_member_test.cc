#include "runner/array/array_member.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

namespace barge::runner::array {
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

// host_groups (JobSpec::host_groups) and the reserved host_group column.
JobSpec GroupedJob() {
  JobSpec base;
  base.name = "sweep";
  base.file = "job.yaml";
  base.image = "img";
  base.hosts = {HostAt("h1")};
  base.ssh.user = "alice";
  HostGroup a;
  a.name = "a";
  a.hosts = {HostAt("a1"), HostAt("a2")};
  a.ssh = base.ssh;
  HostGroup b;
  b.name = "b";
  b.hosts = {HostAt("b1")};
  b.hosts_file = "b.yaml";
  b.ssh = base.ssh;
  b.ssh.proxy_jump = {"root@jump"};
  base.host_groups = {a, b};
  return base;
}

ArrayParams GroupRows(std::vector<std::string> groups) {
  ArrayParams p;
  p.source = "params.csv";
  p.columns = {"seed", "host_group"};
  for (size_t i = 0; i < groups.size(); ++i) p.rows.push_back({std::to_string(i), groups[i]});
  return p;
}

TEST(ArrayMember, ARowsHostGroupPicksItsPoolAndAnEmptyValueOrNoColumnIsTheJobsOwn) {
  const JobSpec base = GroupedJob();
  const ArrayParams p = GroupRows({"b", "", "a"});
  EXPECT_EQ(*MemberGroup(base, p, 0), std::optional<size_t>(1));
  EXPECT_EQ(*MemberGroup(base, p, 1), std::nullopt);
  EXPECT_EQ(*MemberGroup(base, p, 2), std::optional<size_t>(0));
  EXPECT_EQ(*MemberGroup(base, Params(), 0), std::nullopt);  // no host_group column
}

TEST(ArrayMember, AMatrixOrJsonLinesHostGroupColumnPicksPoolsAsACsvOneDoes) {
  const JobSpec base = GroupedJob();
  Result<ArrayParams> m = ExpandMatrix({{"host_group", {"b", "a"}}, {"seed", {"1", "2"}}});
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(*MemberGroup(base, *m, 1), std::optional<size_t>(1));  // (b, 2)
  EXPECT_EQ(*MemberGroup(base, *m, 2), std::optional<size_t>(0));  // (a, 1)
  Result<ArrayParams> j = ParseJsonl("{\"host_group\": \"a\"}\n{\"host_group\": \"\"}\n", "p.jsonl");
  ASSERT_TRUE(j.ok()) << j.status().message();
  EXPECT_EQ(*MemberGroup(base, *j, 0), std::optional<size_t>(0));
  EXPECT_EQ(*MemberGroup(base, *j, 1), std::nullopt);
  EXPECT_TRUE(CheckArray(base, *m).ok());
}

TEST(ArrayMember, ARowNamingAnUnknownGroupIsAnErrorNamingTheRowAndTheGroup) {
  const JobSpec base = GroupedJob();
  const ArrayParams p = GroupRows({"a", "b", "c"});
  Result<std::optional<size_t>> g = MemberGroup(base, p, 2);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().message(),
            "params.csv, row 2 (member 2): host_group 'c' is not a group of job.yaml's host_groups (a, b)");
  Status checked = CheckArray(base, p);
  ASSERT_FALSE(checked.ok());
  EXPECT_EQ(checked.message(), g.status().message());
  JobSpec no_groups = GroupedJob();
  no_groups.host_groups.clear();
  Status none = CheckArray(no_groups, GroupRows({"a"}));
  EXPECT_EQ(none.message(),
            "params.csv, row 0 (member 0): host_group 'a' is not a group of job.yaml (it has no host_groups)");
}

TEST(ArrayMember, AGroupsMemberHasTheGroupsSshAndBargeHostGroupButNoHostGroupVariable) {
  const JobSpec base = GroupedJob();
  const ArrayParams p = GroupRows({"b", ""});
  Result<JobSpec> m = MemberSpec(base, p, 0, "arr", {HostAt("b1")});
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->ssh.proxy_jump, std::vector<std::string>{"root@jump"});
  EXPECT_EQ(m->ssh.user, "alice");
  EXPECT_EQ(m->hosts_file, "b.yaml");
  EXPECT_TRUE(m->host_groups.empty());
  EXPECT_EQ(EnvOf(*m, "BARGE_HOST_GROUP"), "b");
  EXPECT_EQ(EnvOf(*m, "host_group"), "<unset>");
  EXPECT_EQ(EnvOf(*m, "seed"), "0");
  // A row without a group: the job's own ssh, no BARGE_HOST_GROUP.
  Result<JobSpec> own = MemberSpec(base, p, 1, "arr", {HostAt("h1")});
  ASSERT_TRUE(own.ok()) << own.status().message();
  EXPECT_TRUE(own->ssh.proxy_jump.empty());
  EXPECT_EQ(EnvOf(*own, "BARGE_HOST_GROUP"), "<unset>");
  // {array.host_group} still substitutes.
  Result<std::string> text = SubstituteArray("on {array.host_group}", p, 0, false, "command");
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "on b");
}

TEST(ArrayMember, MembersAtOnceAddsWhatEachPoolTheRowsUseFitsAndParallelStillCapsThem) {
  JobSpec base = GroupedJob();
  EXPECT_EQ(MembersAtOnce(base, GroupRows({"a", "a", "a"})), 2u);       // a's 2 hosts
  EXPECT_EQ(MembersAtOnce(base, GroupRows({"a", "b", "a", "b"})), 3u);  // 2 + 1
  EXPECT_EQ(MembersAtOnce(base, GroupRows({"a", "b", ""})), 4u);        // 2 + 1 + the job's 1
  base.parallel = 2;
  EXPECT_EQ(MembersAtOnce(base, GroupRows({"a", "b", ""})), 2u);
}

TEST(ArrayMember, APoolTooSmallForAMemberIsAnErrorOnlyWhenARowUsesIt) {
  JobSpec base = GroupedJob();
  base.hosts_per_member = 2;
  // Group a has 2 hosts; the job's own pool (1 host) is used by no row.
  EXPECT_TRUE(CheckArray(base, GroupRows({"a", "a"})).ok());
  Status b = CheckArray(base, GroupRows({"a", "b"}));
  EXPECT_EQ(b.message(), "each member of the array needs 2 host(s), but host group 'b' has 1");
  Status own = CheckArray(base, GroupRows({"a", ""}));
  EXPECT_EQ(own.message(), "each member of the array needs 2 host(s), but the inventory has 1");
}

// Runs `argv` (no shell of ours in between) and returns what it printed.
std::string RunArgv(const std::vector<std::string>& argv) {
  int out[2];
  if (pipe(out) != 0) return "<pipe failed>";
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  close(out[1]);
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = read(out[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
  close(out[0]);
  waitpid(pid, nullptr, 0);
  return text;
}

// Row values with $(...), backticks, quotes, ; and newlines reach the
// program as data through both command forms a job file may use with them
// (a whole exec-form argument; a positional argument after a shell's
// script), run here for real.
TEST(ArrayMember, RowValuesArriveAsDataThroughEveryAllowedCommandForm) {
  ArrayParams p;
  p.source = "params.csv";
  p.columns = {"v"};
  p.rows = {{"$(touch /tmp/barge-array-pwned)"}, {"`id`"}, {"it's \"quoted\""}, {"a; exit 3"}, {"two\nlines"}};
  for (const std::vector<std::string>& command :
       {std::vector<std::string>{"printf", "%s", "{array.v}"},
        std::vector<std::string>{"sh", "-c", "printf %s \"$1\"", "sh", "{array.v}"}}) {
    for (size_t row = 0; row < p.rows.size(); ++row) {
      JobSpec base;
      base.name = "sweep";
      base.image = "img";
      base.command = command;
      Result<JobSpec> m = MemberSpec(base, p, row, "a", {});
      ASSERT_TRUE(m.ok()) << m.status().message();
      EXPECT_EQ(RunArgv(*m->command), p.rows[row][0]) << command[0] << " row " << row;
    }
  }
  EXPECT_NE(access("/tmp/barge-array-pwned", F_OK), 0) << "a row value ran as code";
}

}  // namespace
}  // namespace barge::runner::array
