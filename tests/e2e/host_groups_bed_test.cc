// Host groups on the test bed, through the real CLI: a job array whose rows
// name one of two host groups, `a` (bed hosts h1 and h2, reached directly)
// and `b` (the bed's jump target, an sshd in h3 that only h2 can reach, so
// only the group's own ssh.proxy_jump gets there). Each member must run on a
// host of its row's group — seen from inside its container (hostname,
// MASTER_ADDR, BARGE_HOST_GROUP) — and leave nothing on any host. A member
// of group b whose controller is gone is reached the same way by `exec`,
// `attach` and `down`.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>

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
  const std::string on_h3 = "DOCKER_HOST=" + bed.jump_target.docker_host + " docker ";
  EXPECT_EQ(OnHost(BedHostNamed("h3"), on_h3 + "ps -aq --filter name=^/" + orphan + "$"), "")
      << "the orphan is still on group b's host";
  OnHost(BedHostNamed("h3"), on_h3 + "rm -f " + orphan + " >/dev/null 2>&1");
}

// Containers (hold containers included) of job `id` on the jump target's
// dockerd (h3's), asked over plain OpenSSH with that dockerd named: not
// through barge.
std::string ContainersOnJumpTarget(const std::string& id) {
  return OnHost(BedHostNamed("h3"),
                "DOCKER_HOST=" + GetBed().jump_target.docker_host + " docker ps -aq --filter label=barge.job=" + id);
}

// The pid `barge show` (text or --json) gives for a job's or an array's
// controller; 0 when none.
int ControllerPid(const JobDir& job, const std::string& id) {
  CliOutcome show = job.Barge("show " + id + " --json");
  std::smatch m;
  if (std::regex_search(show.out, m, std::regex(R"("controller_pid": (\d+))"))) return std::stoi(m[1]);
  return 0;
}

// Without the member's record (array_runner.cc's RecordMemberRun taken
// out) this fails on the bed: exec, attach and down act on the job's own
// host h1 with the job's ssh ("No such container" there; down "removed 0
// container(s)"), and the member's containers and watchdog stay on h3.
TEST(HostGroupsBed, ExecAttachAndDownOfAMemberWhoseControllerIsGoneUseItsGroupsProxyJump) {
  const auto& bed = GetBed();
  ASSERT_FALSE(bed.jump_target.address.empty()) << "the bed has no jump target";
  const BedHost& h1 = BedHostNamed("h1");
  const BedHost& via = BedHostNamed(bed.jump_via);
  JobDir job("hostgroups-orphan");
  std::ofstream(job.path() / "params.csv") << "seed,host_group\n1,b\n";
  // The job's own ssh has no proxy_jump (a connection with it to the jump
  // target fails in 3 s), and its own hosts are h1's: what `down` of the
  // member acted on before members recorded what they resolved.
  job.Write("name: grouped-orphan\n"
            "image: " + bed.image + "\n"
            "ssh:\n"
            "  user: " + bed.user + "\n"
            "  identity_file: " + bed.key + "\n"
            "  known_hosts: " + bed.known_hosts + "\n"
            "  connect_timeout: 3s\n"
            "hosts: [" + h1.address + "]\n"
            "host_groups:\n"
            "  b:\n"
            "    hosts:\n"
            "      - {address: " + bed.jump_target.address + ", port: " + std::to_string(bed.jump_target.port) + "}\n"
            "    ssh:\n"
            "      proxy_jump: " + bed.user + "@" + via.address + ":" + std::to_string(via.port) + "\n"
            "      connect_timeout: 10s\n"
            "stop_grace: 1s\n"
            "timeout: 600s\n"
            "container: {network: host}\n"
            "command: [\"sh\", \"-c\", \"i=0; while [ $i -lt 300 ]; do i=$((i+1)); echo tick $i; sleep 1; done\"]\n");
  CliOutcome run = job.Barge("run job.yaml --array params.csv -d");
  ASSERT_EQ(run.code, 0) << run.out << run.err;
  const std::string array = run.out.substr(0, run.out.find('\n'));
  ASSERT_TRUE(std::regex_match(array, std::regex("[0-9a-f]{8}"))) << run.out;
  // Whatever fails below, nothing of the member stays on h3.
  std::string member;
  struct Cleanup {
    const JobDir& job;
    const std::string& array;
    const std::string& member;
    ~Cleanup() {
      job.Barge("down " + array);
      if (!member.empty()) {
        OnHost(BedHostNamed("h3"), "DOCKER_HOST=" + GetBed().jump_target.docker_host +
                                       " docker rm -f $(docker ps -aq --filter label=barge.job=" + member +
                                       ") >/dev/null 2>&1");
      }
    }
  } cleanup{job, array, member};

  // The member runs on the jump target: its container is there.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  while (std::chrono::steady_clock::now() < deadline) {
    const std::vector<std::string> members = MemberJobs(job, array);
    if (members.size() == 1 && ContainersOnJumpTarget(members[0]) != "" &&
        job.Barge("show " + members[0]).out.find("status:     running") != std::string::npos) {
      member = members[0];
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  ASSERT_FALSE(member.empty()) << job.Barge("ls " + array).out;

  // Both controllers go at once, with no time to act: the array's, then the
  // member's. The container stays, with no controller.
  const int array_pid = ControllerPid(job, array);
  const int member_pid = ControllerPid(job, member);
  ASSERT_GT(array_pid, 0);
  ASSERT_GT(member_pid, 0);
  // Both stopped first, so that neither acts on the other's death between
  // the two kills.
  kill(array_pid, SIGSTOP);
  kill(member_pid, SIGSTOP);
  kill(array_pid, SIGKILL);
  kill(member_pid, SIGKILL);
  std::this_thread::sleep_for(std::chrono::seconds(3));  // ticks the member's log file does not have
  ASSERT_NE(ContainersOnJumpTarget(member), "");

  // exec reaches the container on h3 through group b's jump host.
  CliOutcome exec = job.Barge("exec " + member + " --node 0 -- hostname");
  EXPECT_EQ(exec.code, 0) << exec.err;
  EXPECT_EQ(exec.out, "h3\n") << exec.err;

  // attach prints what the file kept, then streams from h3 the ticks printed
  // since the controller died.
  int kept = 0;
  const std::regex tick(R"(tick (\d+))");
  for (const auto& f : fs::directory_iterator(job.path() / "home" / "runs" / member)) {
    if (f.path().extension() != ".log") continue;
    const std::string log = barge::testing::ReadWholeFile(f.path());
    for (std::sregex_iterator it(log.begin(), log.end(), tick), end; it != end; ++it) {
      kept = std::max(kept, std::stoi((*it)[1]));
    }
  }
  ASSERT_GT(kept, 0);
  const pid_t attach = job.Start("attach " + member);
  EXPECT_TRUE(job.WaitFor("out.txt", "tick " + std::to_string(kept + 2) + "\n", std::chrono::seconds(30)))
      << barge::testing::ReadWholeFile(job.path() / "err.txt");
  kill(attach, SIGINT);
  CliOutcome attached = job.Wait(attach, std::chrono::seconds(20));
  EXPECT_NE(attached.err.find("its controller is gone; streaming from the hosts"), std::string::npos)
      << attached.err;

  // down removes the container (and its hold) on h3, and the watchdog.
  CliOutcome down = job.Barge("down " + member);
  EXPECT_EQ(down.code, 0) << down.out << down.err;
  EXPECT_NE(down.out.find("job " + member + ": its controller is gone; removing its containers"), std::string::npos)
      << down.out;
  EXPECT_EQ(ContainersOnJumpTarget(member), "") << down.out << down.err;
  EXPECT_TRUE(barge::testing::WaitForNoWatchdog(member, std::chrono::seconds(30)));
  EXPECT_NE(job.Barge("show " + member).out.find("status:     cancelled"), std::string::npos);
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
