// `hosts_command:` and `ssh.proxy_jump` on the test bed, through the real
// CLI: a script printing bed host addresses is the inventory, run once; the
// verbs that act on the job later (exec, down, rerun) use the recorded
// hosts and never run it again; a host reachable only through a jump host
// is reached through the job file's proxy_jump.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/support/bed_env.h"
#include "tests/support/bed_job.h"

namespace fs = std::filesystem;
using barge::testing::CliOutcome;
using barge::testing::GetBed;
using barge::testing::JobContainers;
using barge::testing::JobDir;
using barge::testing::JobIdIn;
using barge::testing::RunShell;

namespace {

const barge::testing::BedHost& BedHostNamed(const std::string& name) {
  for (const auto& h : GetBed().hosts) {
    if (h.name == name) return h;
  }
  ADD_FAILURE() << "the bed has no host " << name;
  static barge::testing::BedHost none;
  return none;
}

// The containers of job `id` on `h` ("" = none), by its label only: other
// jobs on the shared bed do not count.
std::string ContainersOf(const barge::testing::BedHost& h, const std::string& id) {
  if (id.empty()) return "";
  return RunShell("DOCKER_HOST=" + h.docker_host + " docker ps -aq --filter label=barge.job=" + id);
}

void RemoveContainersOf(const std::string& id) {
  if (id.empty()) return;
  for (const auto& h : GetBed().hosts) {
    RunShell("DOCKER_HOST=" + h.docker_host + " docker ps -aq --filter label=barge.job=" + id +
             " | DOCKER_HOST=" + h.docker_host + " xargs -r docker rm -f >/dev/null 2>&1");
  }
}

std::string SshBlock(const std::string& extra = "", const std::string& connect_timeout = "10s") {
  const auto& bed = GetBed();
  return "ssh:\n  user: " + bed.user + "\n  identity_file: " + bed.key + "\n  known_hosts: " +
         bed.known_hosts + "\n  connect_timeout: " + connect_timeout + "\n" + extra;
}

class HostsCommandBedTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const std::string& id : ids_) RemoveContainersOf(id);
  }
  JobDir dir_{"hostscmd"};
  std::vector<std::string> ids_;
};

TEST_F(HostsCommandBedTest, AScriptPrintingBedAddressesIsTheInventoryRunOnceAndRecordedForExecDownAndRerun) {
  ASSERT_GE(GetBed().hosts.size(), 2u);
  const auto& h1 = BedHostNamed("h1");
  const auto& h2 = BedHostNamed("h2");
  // The script deletes its marker: a second run fails, loudly.
  std::ofstream(dir_.path() / "hosts.sh")
      << "#!/bin/sh\n"
         "rm marker 2>/dev/null || { echo 'marker gone: hosts.sh ran twice' >&2; exit 7; }\n"
         "echo '# the bed'\n"
         "echo " << h1.address << "\necho " << h2.address << "\n";
  chmod((dir_.path() / "hosts.sh").c_str(), 0755);
  std::ofstream(dir_.path() / "marker") << "";
  dir_.Write("name: hostscmd\nimage: " + GetBed().image +
             "\nhosts_command: ./hosts.sh\n" + SshBlock() +
             "timeout: 50s\nstop_grace: 1s\ncontainer: {network: host}\n"
             "command: [\"sh\", \"-c\", \"echo node $BARGE_NODE_RANK on $(hostname) of $BARGE_NODE_IPS; "
             "sleep 45\"]\n");

  CliOutcome run = dir_.Barge("run -d job.yaml");
  std::string id = JobIdIn(run.err);
  if (id.empty() && run.out.size() >= 8) id = run.out.substr(0, run.out.find('\n'));
  ids_.push_back(id);
  ASSERT_EQ(run.code, 0) << run.err << run.out;
  ASSERT_FALSE(id.empty()) << run.err << run.out;
  EXPECT_FALSE(fs::exists(dir_.path() / "marker")) << "the command ran";

  // exec parses the recorded job: the hosts come from the recorded output.
  CliOutcome exec = dir_.Barge("exec " + id + " --node 1 -- hostname");
  EXPECT_EQ(exec.code, 0) << exec.err << exec.out;
  EXPECT_EQ(exec.out, "h2\n") << exec.err;
  CliOutcome show = dir_.Barge("show " + id);
  EXPECT_NE(show.out.find("what hosts_command `./hosts.sh` printed then"), std::string::npos) << show.out;
  CliOutcome down = dir_.Barge("down " + id);
  EXPECT_EQ(down.code, 0) << down.err << down.out;
  EXPECT_EQ(ContainersOf(h1, id), "");
  EXPECT_EQ(ContainersOf(h2, id), "");

  // rerun: the same hosts, the command not run (it would exit 7).
  CliOutcome rerun = dir_.Barge("rerun -d " + id);
  std::string id2 = JobIdIn(rerun.err);
  if (id2.empty() && rerun.out.size() >= 8) id2 = rerun.out.substr(0, rerun.out.find('\n'));
  ids_.push_back(id2);
  ASSERT_EQ(rerun.code, 0) << rerun.err << rerun.out;
  ASSERT_NE(id2, id);
  CliOutcome exec2 = dir_.Barge("exec " + id2 + " --node 0 -- hostname");
  EXPECT_EQ(exec2.out, "h1\n") << exec2.err;
  CliOutcome down2 = dir_.Barge("down " + id2);
  EXPECT_EQ(down2.code, 0) << down2.err << down2.out;
  EXPECT_EQ(ContainersOf(h1, id2), "");
  EXPECT_EQ(ContainersOf(h2, id2), "");
  std::string logs = dir_.Barge("logs " + id).out;
  EXPECT_NE(logs.find("node 0 on h1 of " + h1.address + "," + h2.address), std::string::npos) << logs;
  EXPECT_NE(logs.find("node 1 on h2 of " + h1.address + "," + h2.address), std::string::npos) << logs;

  // A new run of the file runs the command again, which now fails: exit
  // 125, naming the command, its exit code and its stderr.
  CliOutcome plan = dir_.Barge("plan job.yaml");
  EXPECT_EQ(plan.code, 125) << plan.err << plan.out;
  EXPECT_NE(plan.err.find("job.yaml:3:16: hosts_command: hosts_command `./hosts.sh` failed with exit "
                          "code 7; its stderr ends: marker gone: hosts.sh ran twice"),
            std::string::npos)
      << plan.err;
}

TEST_F(HostsCommandBedTest, AHostReachableOnlyThroughAJumpHostIsReachedThroughSshProxyJump) {
  const auto& bed = GetBed();
  ASSERT_FALSE(bed.jump_target.address.empty()) << "the bed has no jump target";
  ASSERT_EQ(bed.jump_via, "h2");
  const auto& via = BedHostNamed("h2");
  const std::string hosts = "hosts:\n  - {address: " + bed.jump_target.address +
                            ", port: " + std::to_string(bed.jump_target.port) + "}\n";
  const std::string job = "name: jumped\nimage: " + bed.image + "\n" + hosts +
                          "timeout: 40s\nstop_grace: 1s\ncontainer: {network: host}\n"
                          "command: [\"sh\", \"-c\", \"echo on $(hostname)\"]\n";
  // Without it, the target cannot be reached at all.
  dir_.Write(job + SshBlock("", "3s"));
  CliOutcome direct = dir_.Barge("run job.yaml");
  ids_.push_back(JobIdIn(direct.err));
  EXPECT_EQ(direct.code, 125) << direct.err << direct.out;

  dir_.Write(job + SshBlock("  proxy_jump: " + bed.user + "@" + via.address + ":" +
                            std::to_string(via.port) + "\n"));
  CliOutcome plan = dir_.Barge("plan job.yaml");
  EXPECT_EQ(plan.code, 0) << plan.err;
  EXPECT_NE(plan.out.find(" through ProxyJump " + bed.user + "@" + via.address + ":" +
                          std::to_string(via.port) + " (one session"),
            std::string::npos)
      << plan.out;
  CliOutcome o = dir_.Barge("run job.yaml");
  ids_.push_back(JobIdIn(o.err));
  ASSERT_EQ(o.code, 0) << o.err << o.out;
  EXPECT_NE(o.out.find("] on h3\n"), std::string::npos) << o.out;
  EXPECT_EQ(ContainersOf(bed.jump_target, ids_.back()), "");
}

}  // namespace
