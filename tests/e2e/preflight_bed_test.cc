// Preflight on the test bed: every host's problem (down, auth refused,
// docker missing, a non-POSIX login shell, a full disk, a missing image) is
// found before anything starts and reported in one table, exit 125, with
// nothing left on any host.
#include <gtest/gtest.h>

#include <pwd.h>

#include <algorithm>

#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "tests/support/bed_job.h"

using barge::testing::BedHost;
using barge::testing::CliOutcome;
using barge::testing::GetBed;
using barge::testing::InHost;
using barge::testing::JobContainers;
using barge::testing::JobDir;
using barge::testing::OnHost;
using barge::testing::RunShell;

namespace {

constexpr char kTcshUser[] = "barge-tcsh";


// The table rows of `host` in barge's message, joined by newlines ("" = none).
std::string Row(const std::string& err, const std::string& host) {
  std::string rows;
  std::regex row("\n  " + std::regex_replace(host, std::regex("[.]"), "\\.") + " +([^\n]*)");
  for (auto it = std::sregex_iterator(err.begin(), err.end(), row); it != std::sregex_iterator(); ++it) {
    rows += (*it)[1].str() + "\n";
  }
  return rows;
}

// The per-host job directories on `h` (other jobs' may come and go: the
// bed is shared, and a killed controller's watchdog removes its own late).
std::set<std::string> JobDirsOn(const barge::testing::BedHost& h) {
  std::set<std::string> dirs;
  std::istringstream in(OnHost(h, "ls -d /tmp/barge-* 2>/dev/null | grep -v barge-bed; true"));
  for (std::string d; std::getline(in, d);) dirs.insert(d);
  return dirs;
}

class PreflightTest : public ::testing::Test {
 protected:
  std::string tmp_size_;  // h3's /tmp size before the test shrank it
  std::map<std::string, std::set<std::string>> dirs_before_;  // by host name

  void SetUp() override {
    for (const auto& h : GetBed().hosts) dirs_before_[h.name] = JobDirsOn(h);
  }

  void TearDown() override {
    const auto& bed = GetBed();
    InHost(bed.hosts[2], "rm -f /tmp/fill");
    if (!tmp_size_.empty()) InHost(bed.hosts[2], "mount -o remount,size=" + tmp_size_ + " /tmp");
    RunShell(std::string("userdel ") + kTcshUser + " 2>/dev/null");
    for (const auto& h : bed.hosts) {
      EXPECT_EQ(JobContainers(h), "") << "a container was started on " << h.name;
      for (const std::string& d : JobDirsOn(h)) {
        EXPECT_EQ(dirs_before_[h.name].count(d), 1u) << "a job directory " << d << " was left on " << h.name;
      }
    }
  }
};

TEST_F(PreflightTest, EveryHostsProblemIsReportedInOneTableAndNothingStarts) {
  const auto& bed = GetBed();
  JobDir job("preflight-table");
  // h1: a user whose login shell is tcsh (the bed's sshds accept the bed key
  // for every user).
  ASSERT_EQ(getpwnam(kTcshUser), nullptr) << kTcshUser << " exists already";
  int code = -1;
  // ('*': no password, but not a locked account, which sshd would refuse.)
  RunShell(std::string("useradd -M -d /tmp -p '*' -s /usr/bin/tcsh ") + kTcshUser, &code);
  ASSERT_EQ(code, 0) << "useradd failed (is tcsh installed? scripts/install-deps.sh installs it)";
  // h3: a full /tmp (its tmpfs, in h3's mount namespace only, shrunk to 2 MiB
  // and filled).
  tmp_size_ = InHost(bed.hosts[2], "df -Pk /tmp | awk 'NR==2 {print $2}'");
  while (!tmp_size_.empty() && tmp_size_.back() == '\n') tmp_size_.pop_back();
  ASSERT_FALSE(tmp_size_.empty());
  tmp_size_ += "k";
  InHost(bed.hosts[2], "mount -o remount,size=2m /tmp && dd if=/dev/zero of=/tmp/fill bs=64k 2>/dev/null; true");
  // The loopback sshd with a key it does not know: auth refused.
  RunShell("ssh-keygen -q -t ed25519 -N '' -f " + (job.path() / "stranger").string());
  job.Write("name: table\nimage: " + bed.image + "\n" +
            "hosts:\n"
            "  - {address: " + bed.hosts[0].address + ", user: " + kTcshUser + "}\n"
            "  - {address: " + bed.hosts[1].address + ", docker_command: /nonexistent/docker}\n"
            "  - " + bed.hosts[2].address + "\n"
            "  - {address: " + bed.loopback.address + ", port: " + std::to_string(bed.loopback.port) +
            ", identity_file: stranger}\n"
            "  - {address: " + bed.loopback.address + ", port: 1}\n"
            "ssh: {user: " + bed.user + ", identity_file: " + bed.key + ", known_hosts: " +
            bed.known_hosts + ", connect_timeout: 10s}\n"
            "command: [\"true\"]\n");
  CliOutcome o = job.Barge("run job.yaml");
  EXPECT_EQ(o.code, 125) << o.err;
  EXPECT_NE(o.err.find("preflight failed on 5 of 5 host(s); nothing was started:\n  HOST"),
            std::string::npos)
      << o.err;
  // Only the cause: the other checks' failures on that host follow from it.
  EXPECT_EQ(Row(o.err, bed.hosts[0].address).find("the login shell is not a POSIX shell"), 0u)
      << o.err;
  EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n') > 0 &&
                Row(o.err, bed.hosts[0].address).find('\n') + 1 == Row(o.err, bed.hosts[0].address).size(),
            true)
      << "one row for the host with the wrong shell:\n" << o.err;
  EXPECT_NE(Row(o.err, bed.hosts[1].address).find("docker is not reachable"), std::string::npos)
      << o.err;
  EXPECT_NE(Row(o.err, bed.hosts[2].address).find("disk full: 0 MiB free on /tmp"), std::string::npos)
      << o.err;
  // Both loopback rows: one refused authentication, one refused the connection.
  EXPECT_NE(o.err.find("  " + bed.loopback.address), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("permission denied: the host refused the key"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("Connection refused"), std::string::npos) << o.err;
  EXPECT_EQ(o.out, "");
}

TEST_F(PreflightTest, AMissingImageWithImagePullNeverIsReportedPerHost) {
  const auto& bed = GetBed();
  JobDir job("preflight-image");
  job.Write("name: noimage\nimage: barge/not-here:1\nimage_pull: never\n" +
            barge::testing::BedHostsYaml(0, 2) + "command: [\"true\"]\n");
  CliOutcome o = job.Barge("run job.yaml");
  EXPECT_EQ(o.code, 125) << o.err;
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_NE(Row(o.err, bed.hosts[i].address)
                  .find("image barge/not-here:1 is not present (image_pull: never)"),
              std::string::npos)
        << o.err;
  }
}

}  // namespace
