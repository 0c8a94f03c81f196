// Host groups on the test bed, through the real CLI: a job array whose rows
// name one of two host groups, `a` (bed hosts h1 and h2, reached directly)
// and `b` (the bed's jump target, an sshd in h3 that only h2 can reach, so
// only the group's own ssh.proxy_jump gets there). Each member must run on a
// host of its row's group — seen from inside its container (hostname,
// MASTER_ADDR, BARGE_HOST_GROUP) — and leave nothing on any host.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "tests/support/bed_job.h"

namespace fs = std::filesystem;
using barge::testing::BedHost;
using barge::testing::CliOutcome;
using barge::testing::GetBed;
using barge::testing::JobDir;
using barge::testing::OnHost;

namespace {

const BedHost& BedHostNamed(const std::string& name) {
  for (const BedHost& h : GetBed().hosts) {
    if (h.name == name) return h;
  }
  ADD_FAILURE() << "the bed has no host " << name;
  static BedHost none;
  return none;
}

// The member job ids `barge ls ARRAY` lists (JOB column).
std::vector<std::string> MemberJobs(const JobDir& job, const std::string& array) {
  CliOutcome ls = job.Barge("ls " + array);
  std::vector<std::string> ids;
  std::istringstream in(ls.out);
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_search(line, m, std::regex(R"(^\d+\s+\|\s+([0-9a-f]+)\s+\|)"))) ids.push_back(m[1]);
  }
  return ids;
}

// Containers (hold containers included) of job `id` on any bed host, by its
// label only: other jobs on the shared bed do not count.
std::string ContainersOf(const std::string& id) {
  std::string all;
  for (const BedHost& h : GetBed().hosts) all += OnHost(h, "docker ps -aq --filter label=barge.job=" + id);
  return all;
}

TEST(HostGroupsBed, FourMembersOverTwoGroupsEachRunOnAHostOfItsRowsGroupWithThatGroupsSsh) {
  const auto& bed = GetBed();
  ASSERT_GE(bed.hosts.size(), 3u);
  ASSERT_FALSE(bed.jump_target.address.empty()) << "the bed has no jump target";
  const BedHost& h1 = BedHostNamed("h1");
  const BedHost& h2 = BedHostNamed("h2");
  const BedHost& via = BedHostNamed(bed.jump_via);
  JobDir job("hostgroups");
  std::ofstream(job.path() / "params.csv") << "seed,host_group\n1,a\n2,b\n3,a\n4,b\n";
  // The job's own ssh: has no proxy_jump, and a short connect_timeout: a
  // member of group b that did not get its group's ssh fails in 3 s.
  job.Write("name: grouped\n"
            "image: " + bed.image + "\n"
            "ssh:\n"
            "  user: " + bed.user + "\n"
            "  identity_file: " + bed.key + "\n"
            "  known_hosts: " + bed.known_hosts + "\n"
            "  connect_timeout: 3s\n"
            "host_groups:\n"
            "  a:\n"
            "    hosts: [" + h1.address + ", " + h2.address + "]\n"
            "  b:\n"
            "    hosts:\n"
            "      - {address: " + bed.jump_target.address + ", port: " + std::to_string(bed.jump_target.port) + "}\n"
            "    ssh:\n"
            "      proxy_jump: " + bed.user + "@" + via.address + ":" + std::to_string(via.port) + "\n"
            "      connect_timeout: 10s\n"
            "parallel: 3\n"
            "stop_grace: 1s\n"
            "timeout: 40s\n"
            "container: {network: host}\n"
            "command: [\"sh\", \"-c\", \"echo MEMBER $BARGE_ARRAY_INDEX seed=$seed group=$BARGE_HOST_GROUP "
            "column=${host_group-unset} on $(hostname) at $MASTER_ADDR; sleep 1\"]\n");

  // The plan names each member's group, and group b's jump host.
  CliOutcome plan = job.Barge("plan job.yaml --array params.csv");
  EXPECT_EQ(plan.code, 0) << plan.err;
  EXPECT_NE(plan.out.find("# member 1: seed=2 host_group=b; host group b\n"), std::string::npos) << plan.out;
  EXPECT_NE(plan.out.find("# member 2: seed=3 host_group=a; host group a\n"), std::string::npos) << plan.out;
  EXPECT_NE(plan.out.find(" through ProxyJump " + bed.user + "@" + via.address), std::string::npos) << plan.out;

  CliOutcome run = job.Barge("run job.yaml --array params.csv");
  SCOPED_TRACE(run.out + run.err);
  EXPECT_EQ(run.code, 0);
  std::smatch id;
  ASSERT_TRUE(std::regex_search(run.err, id, std::regex(R"(array ([0-9a-f]+) \(grouped\))")));

  // From inside each container: the host it ran on belongs to its row's
  // group (group b's only host is the jump target, in h3).
  const std::set<std::string> group_a = {"h1 at " + h1.address, "h2 at " + h2.address};
  const std::string group_b = "h3 at " + bed.jump_target.address;
  for (int i = 0; i < 4; ++i) {
    const std::string group = i % 2 == 0 ? "a" : "b";
    std::smatch m;
    const std::regex line("\\] MEMBER " + std::to_string(i) + " seed=" + std::to_string(i + 1) + " group=" + group +
                          " column=unset on (\\S+ at \\S+)\n");
    ASSERT_TRUE(std::regex_search(run.out, m, line)) << "member " << i;
    if (group == "a") {
      EXPECT_TRUE(group_a.contains(m[1].str())) << "member " << i << " ran on " << m[1];
    } else {
      EXPECT_EQ(m[1].str(), group_b) << "member " << i;
    }
  }
  EXPECT_NE(run.err.find(bed.jump_target.address + " (group b)"), std::string::npos);

  // Nothing left on any host: no container, no hold.
  const std::vector<std::string> members = MemberJobs(job, id[1]);
  EXPECT_EQ(members.size(), 4u);
  for (const std::string& member : members) EXPECT_EQ(ContainersOf(member), "") << member;

  // `barge hosts` and `barge reap` know the groups: each group's hosts,
  // group b's reached through its ProxyJump (the job has no hosts of its
  // own). A leftover container on group b's host is reaped there.
  CliOutcome hosts = job.Barge("hosts job.yaml");
  EXPECT_EQ(hosts.code, 0) << hosts.err;
  for (const std::string& want : {h1.address + " (group a)", h2.address + " (group a)",
                                  bed.jump_target.address + " (group b)"}) {
    EXPECT_NE(hosts.out.find(want), std::string::npos) << want << "\n" << hosts.out;
  }
  const std::string orphan = "barge-grouptest-orphan-" + std::to_string(getpid());
  OnHost(BedHostNamed("h3"), "DOCKER_HOST=" + bed.jump_target.docker_host + " docker run -d --name " + orphan +
                                 " --label barge.job=0rphan0b " + bed.image + " sleep 60 >/dev/null");
  CliOutcome reap = job.Barge("reap job.yaml");
  EXPECT_EQ(reap.code, 0) << reap.err;
  EXPECT_NE(reap.out.find("group b:\n"), std::string::npos) << reap.out;
  EXPECT_NE(reap.out.find(bed.jump_target.address + ": removing " + orphan + " (job 0rphan0b"), std::string::npos)
      << reap.out << reap.err;
}

TEST(HostGroupsBed, ARowNamingAnUnknownGroupStopsTheArrayBeforeAnythingStarts) {
  const auto& bed = GetBed();
  JobDir job("hostgroups-bad");
  std::ofstream(job.path() / "params.csv") << "seed,host_group\n1,a\n2,c\n";
  job.Write("name: grouped\nimage: " + bed.image + "\ntimeout: 20s\n"
            "host_groups:\n  a: {hosts: [" + bed.hosts[0].address + "]}\n"
            "command: [\"true\"]\n");
  CliOutcome run = job.Barge("run job.yaml --array params.csv");
  EXPECT_EQ(run.code, 125) << run.err;
  EXPECT_NE(run.err.find("barge: params.csv, row 1 (member 1): host_group 'c' is not a group of job.yaml's "
                         "host_groups (a); nothing was started"),
            std::string::npos)
      << run.err;
  EXPECT_EQ(job.Barge("ls").out.find("grouped"), std::string::npos);
}

}  // namespace
