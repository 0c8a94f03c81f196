// Preflight on the test bed: every host's problem (down, auth refused,
// docker missing, a non-POSIX login shell, a full disk, a missing image) is
// found before anything starts and reported in one table, exit 125, with
// nothing left on any host; the GPU health gate with a stand-in driver.
#include <gtest/gtest.h>

#include <pwd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "tests/support/bed_job.h"
#include "tests/support/gpu_standin.h"

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

// The GPU health gate on a bed host. The bed has no GPU: the host's
// nvidia-smi is the stand-in that replays the captured H100 outputs
// (tests/data/nvidia-smi/standin.sh, behind a wrapper that sets its knobs:
// three GPUs, GPU 0 with 2 uncorrectable ECC errors, GPU 1 lost (every field
// "[GPU is lost]"); or a hang), in the bed's directory, which every bed host
// sees. No docker shim: h1's real engine gets barge's --gpus and
// DeviceRequests as they are, through the engine-side GPU stand-in
// (tests/support/gpu_standin.h: a stand-in nvidia-container-runtime-hook
// on that dockerd's PATH, which records each GPU container's
// HostConfig.DeviceRequests as the engine stored it and lets it start
// without a GPU).
TEST_F(PreflightTest, TheGpuHealthGateTakesAnUnhealthyGpuOutHostsGpusShowsItAndAHungDriverStopsTheJob) {
  const auto& bed = GetBed();
  const std::filesystem::path base = std::filesystem::path(bed.dir) / "gpu-health";
  std::filesystem::remove_all(base);
  std::filesystem::create_directories(base);
  int code = -1;
  RunShell("cp -r " + std::string(BARGE_SOURCE_DIR) + "/tests/data/nvidia-smi " + (base / "nvidia-smi").string(), &code);
  ASSERT_EQ(code, 0);
  auto script = [&](const std::string& name, const std::string& body) {
    const std::filesystem::path p = base / name;
    std::ofstream(p) << "#!/bin/sh\n" << body;
    std::filesystem::permissions(p, std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
                                        std::filesystem::perms::group_exec | std::filesystem::perms::others_read |
                                        std::filesystem::perms::others_exec);
    return p.string();
  };
  const std::string standin = (base / "nvidia-smi" / "standin.sh").string();
  const std::string sick =
      script("smi-gpu0-ecc-gpu1-lost", "STANDIN_GPUS=3 STANDIN_ECC=2 STANDIN_LOST=1 exec " + standin + " \"$@\"\n");
  const std::string hung = script("smi-hung", "STANDIN_HANG=1 exec " + standin + " \"$@\"\n");
  const double before_on = barge::testing::WallSeconds();
  barge::testing::GpuStandin engine(bed.hosts[0], 3);
  ASSERT_EQ(engine.error(), "");
  std::printf("GPU stand-in on h1 in %.1f s\n", barge::testing::WallSeconds() - before_on);
  // The engine's record of the job's container (not a probe's, named by
  // Docker): "" = none.
  auto job_request = [&](const std::string& job_id) {
    std::string out;
    if (job_id.empty()) return out;
    for (const barge::testing::GpuRequest& r : engine.Requests()) {
      if (r.container.find(job_id) != std::string::npos) out += r.device_requests + " " + r.visible_devices + "\n";
    }
    return out;
  };
  auto job_yaml = [&](const std::string& smi, int gpus) {
    return "name: gpuhealth\nimage: " + bed.image + "\ncommand: [\"sh\", \"-c\", \"echo started\"]\nstop_grace: 1s\n" +
           "hosts:\n  - {address: " + bed.hosts[0].address + ", gpus: " + std::to_string(gpus) + "}\n" +
           "ssh: {user: " + bed.user + ", identity_file: " + bed.key + ", known_hosts: " + bed.known_hosts +
           ", connect_timeout: 10s, engine_timeout: 5s}\n" + "container: {gpus: 1}\nhealth: {nvidia_smi: " + smi + "}\n";
  };
  // The request the engine stored for a node given GPU `index` alone.
  auto device = [](int index) {
    return "[{\"Driver\":\"\",\"Count\":0,\"DeviceIDs\":[\"" + std::to_string(index) +
           "\"],\"Capabilities\":[[\"gpu\"]],\"Options\":{}}] " + std::to_string(index) + "\n";
  };
  JobDir job("preflight-gpu-health");
  job.Write(job_yaml(sick, 3));
  CliOutcome o = job.Barge("run job.yaml");
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.err.find(bed.hosts[0].address + ": GPU(s) 0,1 taken out (2 uncorrectable ECC error(s) since the driver "
                                              "loaded (reset the GPU); the driver answers [GPU is lost] for every "
                                              "field it was asked (index, uuid, "),
            std::string::npos)
      << o.err;
  EXPECT_NE(o.out.find("started"), std::string::npos) << o.out;
  EXPECT_EQ(job_request(barge::testing::JobIdIn(o.err)), device(2)) << "the node was not given GPU 2 alone";
  std::printf("taken out:\n%s\n", o.err.c_str());
  // `barge hosts --gpus` asks the same driver, in one round trip per host.
  CliOutcome gpus = job.Barge("hosts --gpus job.yaml");
  EXPECT_EQ(gpus.code, 0) << gpus.err;
  auto gpu_row = [&](const std::string& row) {
    return std::regex_search(gpus.out, std::regex("\n" + std::regex_replace(bed.hosts[0].address, std::regex("[.]"),
                                                                             "\\.") + " +" + row + "\n"));
  };
  EXPECT_TRUE(gpu_row("0 +NVIDIA H100 80GB HBM3 +81559 MiB +580\\.159\\.04 +unhealthy")) << gpus.out;
  EXPECT_TRUE(gpu_row("1 +\\[GPU is lost\\] +\\? +\\[GPU is lost\\] +unhealthy")) << gpus.out;
  EXPECT_TRUE(gpu_row("2 +NVIDIA H100 80GB HBM3 +81559 MiB +580\\.159\\.04 +ok")) << gpus.out;
  EXPECT_NE(gpus.out.find("2 uncorrectable ECC error(s)"), std::string::npos) << gpus.out;
  EXPECT_NE(gpus.out.find("GPU0\t X \t0-15"), std::string::npos) << "no topology:\n" << gpus.out;
  std::printf("hosts --gpus:\n%s\n", gpus.out.c_str());
  CliOutcome json = job.Barge("hosts --gpus --json job.yaml");
  EXPECT_NE(json.out.find("\"healthy\": false"), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"uuid\": \"GPU-32f94187-cb0a-290d-513a-256680d526a2\""), std::string::npos) << json.out;
  // health: {gpus: dcgm}: DCGM's quick diagnostic (the stand-in of
  // tests/data/dcgmi-documented-format) on the GPU the job holds, whose test fails: it is
  // taken out, and the node gets the other.
  // (Copied into the bed's directory: a host's /tmp, where a checkout may
  // be, is its own.)
  RunShell("cp -r " + std::string(BARGE_SOURCE_DIR) + "/tests/data/dcgmi-documented-format " + (base / "dcgmi").string(),
           &code);
  ASSERT_EQ(code, 0);
  const std::string dcgmi = script("dcgmi-gpu0-fails", "STANDIN_DCGM_FAIL=0 exec " + (base / "dcgmi").string() +
                                                         "/standin.sh \"$@\"\n");
  const std::string two = script("smi-two", "STANDIN_GPUS=2 exec " + standin + " \"$@\"\n");
  std::string with_dcgm = job_yaml(two, 2);
  with_dcgm.replace(with_dcgm.find("health: {"), 9, "health: {gpus: dcgm, dcgmi: " + dcgmi + ", ");
  job.Write(with_dcgm);
  CliOutcome dcgm = job.Barge("run job.yaml");
  EXPECT_EQ(dcgm.code, 0) << dcgm.err;
  EXPECT_NE(dcgm.err.find(bed.hosts[0].address + ": DCGM diagnostic (level 1) on GPU(s) 0\n"), std::string::npos)
      << dcgm.err;
  EXPECT_NE(dcgm.err.find(bed.hosts[0].address + ": GPU(s) 0 taken out (DCGM diagnostic: Page Retirement/Row Remap "
                                                 "failed: GPU 0 had uncorrectable memory errors"),
            std::string::npos)
      << dcgm.err;
  EXPECT_EQ(job_request(barge::testing::JobIdIn(dcgm.err)), device(1)) << "the node was not given GPU 1 alone";
  std::printf("dcgm:\n%s\n", dcgm.err.c_str());
  // A driver that hangs: each call is killed at its timeout (engine_timeout,
  // at least 5 s), the host is out, nothing starts.
  job.Write(job_yaml(hung, 2));
  // (Its GPU probe container, Docker-named, may still start: only the
  // job's own containers, barge-gpuhealth-JOB-RANK, count.)
  auto job_containers_started = [&] {
    size_t n = 0;
    for (const barge::testing::GpuRequest& r : engine.Requests()) n += r.container.rfind("barge-gpuhealth-", 0) == 0;
    return n;
  };
  const size_t started_before_hang = job_containers_started();
  CliOutcome h = job.Barge("run job.yaml");
  EXPECT_EQ(h.code, 125) << h.err;
  EXPECT_NE(h.err.find("GPU health: 1 of 1 host(s) cannot run the job's nodes; nothing was started:"), std::string::npos)
      << h.err;
  EXPECT_NE(h.err.find("HOST"), std::string::npos) << h.err;
  EXPECT_NE(Row(h.err, bed.hosts[0].address).find("nvidia-smi did not answer in time (killed by its timeout)"),
            std::string::npos)
      << h.err;
  EXPECT_EQ(h.out.find("started"), std::string::npos) << h.out;
  EXPECT_EQ(job_containers_started(), started_before_hang) << "a node's container was started";
  std::printf("hung:\n%s\n", h.err.c_str());
  for (const barge::testing::GpuRequest& r : engine.Requests()) {
    std::printf("engine got: %s %s %s\n", r.container.c_str(), r.visible_devices.c_str(), r.device_requests.c_str());
  }
  const double before_off = barge::testing::WallSeconds();
  EXPECT_EQ(engine.Off(), "");
  std::printf("GPU stand-in off on h1 in %.1f s\n", barge::testing::WallSeconds() - before_off);
  std::filesystem::remove_all(base);
}

// Host 2 of a 3-host GPU job reports a fatal Xid (79, "GPU has fallen off
// the bus") in its kernel log: a stand-in dmesg bound over /usr/bin/dmesg in
// h2's mount namespace only (the hosts share one kernel and one log). The
// job asks for both GPUs of each host, so h2 cannot run its node: with a
// spare host (the loopback host) the job starts on h1, h3 and the spare and
// says why; without one it starts nothing, exit 125, one table names h2;
// an array over the three sets h2 aside at once and runs every member.
// The stand-in's lines are the driver's two forms: the older one without
// "name=" (the 79 on GPU 1) and the newer one with it, here with the pid of
// no process (a warning Xid 94 on GPU 0, shown in h2's row).
// Stand-ins: every host's docker_command is a shim that answers the GPU
// probe itself and STRIPS --gpus (logging its value), because the spare is
// the loopback host, whose engine is the machine's own and cannot take the
// engine-side GPU stand-in; the test above shows on h1's engine's own
// record that the --gpus barge sends reaches the engine.
TEST_F(PreflightTest, AHostReportingAFatalXidIsReplacedByASpareAndWithoutOneTheJobStopsWithTheTable) {
  const auto& bed = GetBed();
  ASSERT_GE(bed.hosts.size(), 3u);
  const std::filesystem::path base = std::filesystem::path(bed.dir) / "gpu-xid";
  std::filesystem::remove_all(base);
  std::filesystem::create_directories(base);
  int code = -1;
  RunShell("cp -r " + std::string(BARGE_SOURCE_DIR) + "/tests/data/nvidia-smi " + (base / "nvidia-smi").string(), &code);
  ASSERT_EQ(code, 0);
  auto script = [&](const std::string& name, const std::string& body) {
    const std::filesystem::path p = base / name;
    std::ofstream(p) << "#!/bin/sh\n" << body;
    std::filesystem::permissions(p, std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
                                        std::filesystem::perms::group_exec | std::filesystem::perms::others_read |
                                        std::filesystem::perms::others_exec);
    return p.string();
  };
  const std::string smi =
      script("smi-two", "STANDIN_GPUS=2 exec " + (base / "nvidia-smi" / "standin.sh").string() + " \"$@\"\n");
  // The driver's lines for GPU 1 (PCI 00:07 with STANDIN_GPUS=2) and GPU
  // 0 (00:06), a minute ago on this boot's clock (the gate's window is the
  // last 24 h).
  const std::string dmesg = script(
      "dmesg", "awk '{ printf \"[%12.6f] NVRM: Xid (PCI:0000:00:07): 79, pid=1896, GPU has fallen off the bus.\\n\", "
               "$1 - 61; printf \"[%12.6f] NVRM: Xid (PCI:0000:00:06): 94, pid=\\047<unknown>\\047, name=<unknown>, "
               "Contained: SM (0x1). RST: No, D-RST: No\\n\", $1 - 60 }' /proc/uptime\n");
  const std::string log = (base / "gpus.log").string();
  const std::string shim = script(
      "docker", "case \" $* \" in *' nvidia-smi '*) echo 'GPU 0: shim'; echo 'GPU 1: shim'; exit 0;; esac\n"
                "skip=0\nfor a do\n  shift\n  if [ $skip = 1 ]; then skip=0; echo \"$a\" >> " + log +
                    "; continue; fi\n  case \"$a\" in --gpus) skip=1; continue;; esac\n  set -- \"$@\" \"$a\"\ndone\n"
                    "exec docker \"$@\"\n");
  const BedHost& h2 = bed.hosts[1];
  ASSERT_EQ(InHost(h2, "mount --bind " + dmesg + " /usr/bin/dmesg && echo bound"), "bound\n");
  struct Unbind {
    const BedHost& h;
    ~Unbind() { InHost(h, "umount /usr/bin/dmesg"); }
  } unbind{h2};
  ASSERT_NE(OnHost(h2, "dmesg").find("NVRM: Xid"), std::string::npos) << "the stand-in is not h2's dmesg";
  ASSERT_EQ(OnHost(bed.hosts[0], "dmesg | grep -c 'NVRM: Xid'; true"), "0\n") << "the stand-in leaked to h1";
  auto job_yaml = [&](bool spare) {
    std::string y = "name: gpuxid\nimage: " + bed.image +
                    "\ncommand: [\"sh\", \"-c\", \"echo started\"]\nstop_grace: 1s\nhosts:\n";
    for (size_t i = 0; i < 3; ++i) {
      y += "  - {address: " + bed.hosts[i].address + ", gpus: 2, docker_command: " + shim + "}\n";
    }
    if (spare) {
      y += "spare_hosts:\n  - {address: " + bed.loopback.address + ", port: " + std::to_string(bed.loopback.port) +
           ", gpus: 2, docker_command: " + shim + "}\n";
    }
    return y + "ssh: {user: " + bed.user + ", identity_file: " + bed.key + ", known_hosts: " + bed.known_hosts +
           ", connect_timeout: 10s, engine_timeout: 5s}\ncontainer: {gpus: 2}\nhealth: {nvidia_smi: " + smi + "}\n";
  };
  JobDir job("preflight-gpu-xid");
  job.Write(job_yaml(/*spare=*/false));
  CliOutcome none = job.Barge("run job.yaml");
  EXPECT_EQ(none.code, 125) << none.err;
  EXPECT_NE(none.err.find("GPU health: 1 of 3 host(s) cannot run the job's nodes; nothing was started:"),
            std::string::npos)
      << none.err;
  EXPECT_NE(Row(none.err, h2.address).find("1    Xid 79: GPU has fallen off the bus (reboot the host)"),
            std::string::npos)
      << none.err;
  EXPECT_NE(Row(none.err, h2.address).find("0    warning: Xid 94: contained ECC error"), std::string::npos)
      << "the newer form (name=, pid='<unknown>') was not read:\n" << none.err;
  EXPECT_NE(Row(none.err, h2.address).find("too few healthy GPUs for the job's nodes there: they ask for 2, 1 of 2 "
                                           "GPU(s) healthy"),
            std::string::npos)
      << none.err;
  EXPECT_EQ(Row(none.err, bed.hosts[0].address), "") << none.err;
  EXPECT_EQ(none.out.find("started"), std::string::npos) << none.out;
  EXPECT_FALSE(std::filesystem::exists(log)) << "a container was started";
  std::printf("without a spare:\n%s\n", none.err.c_str());

  job.Write(job_yaml(/*spare=*/true));
  CliOutcome with = job.Barge("run job.yaml");
  EXPECT_EQ(with.code, 0) << with.err;
  EXPECT_NE(with.err.find("replacing " + h2.address + " with spare host " + bed.loopback.address +
                          ": GPU health: GPU 1: Xid 79"),
            std::string::npos)
      << with.err;
  EXPECT_NE(with.out.find("[0 head " + bed.hosts[0].address + "] started"), std::string::npos) << with.out;
  EXPECT_NE(with.out.find("[1 worker " + bed.loopback.address + "] started"), std::string::npos) << with.out;
  EXPECT_NE(with.out.find("[2 worker " + bed.hosts[2].address + "] started"), std::string::npos) << with.out;
  EXPECT_EQ(with.out.find(h2.address + "]"), std::string::npos) << with.out;
  EXPECT_EQ(barge::testing::ReadWholeFile(log), "\"device=0,1\"\n\"device=0,1\"\n\"device=0,1\"\n")
      << "not three nodes with both GPUs";
  EXPECT_EQ(JobContainers(h2), "") << "something of the job is left on h2";
  std::printf("with a spare:\n%s\n%s\n", with.err.c_str(), with.out.c_str());

  // An array over the three hosts, one each, all at once, no retries: the
  // member given h2 stops at the gate; h2 is unavailable, not busy: set
  // aside at once, and the member runs on a host another member frees,
  // without spending a retry.
  std::filesystem::remove(log);
  std::string array = job_yaml(/*spare=*/false);
  array.replace(array.find("name: gpuxid"), 12, "name: gpuxidarr");
  job.Write(array + "array: {matrix: {x: [1, 2, 3]}}\nparallel: 3\n");
  CliOutcome arr = job.Barge("run job.yaml");
  EXPECT_EQ(arr.code, 0) << arr.err;
  EXPECT_NE(arr.err.find("barge: " + h2.address + " is set aside for the rest of the array: it is unavailable, not "
                         "busy (gpu_unhealthy: the host is out); no member waits for it"),
            std::string::npos)
      << arr.err;
  EXPECT_NE(arr.err.find("this attempt does not count against array_retries"), std::string::npos) << arr.err;
  EXPECT_NE(arr.out.find("set aside: " + h2.address + ": gpu_unhealthy: the host is out"), std::string::npos)
      << arr.out;
  EXPECT_EQ(arr.err.find("member 1 failed"), std::string::npos) << arr.err;
  EXPECT_EQ(barge::testing::ReadWholeFile(log), "\"device=0,1\"\n\"device=0,1\"\n\"device=0,1\"\n")
      << "not three members with both GPUs";
  std::printf("array:\n%s\n%s\n", arr.err.c_str(), arr.out.c_str());
  std::filesystem::remove_all(base);
}

// network: {rdma: auto|required} with a stand-in HCA on h1 alone, made in
// h1's mount namespace (the bed hosts share /dev and /sys): a tmpfs on
// /dev/infiniband holding uverbs0 (the real node numbers, c 231:192) and a
// tmpfs on /sys/class whose infiniband/ has mlx5_0 and mlx5_1 ACTIVE and
// mlx5_2 DOWN. A docker shim logs each `docker run` and drops
// `--ulimit memlock=-1`, which this machine cannot grant (TESTBED.md).
TEST_F(PreflightTest, RdmaAutoGivesAHostWithAnActiveHcaItsDevicesAndExactHcasAndRequiredRefusesAHostWithout) {
  const auto& bed = GetBed();
  ASSERT_GE(bed.hosts.size(), 2u);
  const BedHost& h1 = bed.hosts[0];
  const BedHost& h2 = bed.hosts[1];
  const std::filesystem::path base = std::filesystem::path(bed.dir) / "rdma";
  std::filesystem::remove_all(base);
  std::filesystem::create_directories(base);
  const std::string log = (base / "runs.log").string();
  const std::filesystem::path shim = base / "docker";
  // One line per run (SkyPilot's node list holds newlines).
  std::ofstream(shim) << "#!/bin/sh\ncase \" $* \" in *' run '*) echo \"$(hostname) $*\" | tr '\\n' ' ' >> " << log
                      << "; echo >> " << log << ";; esac\nskip=0\nfor a do\n  shift\n  if [ $skip = 1 ]; then skip=0; "
                         "[ \"$a\" = memlock=-1 ] && continue; set -- \"$@\" --ulimit \"$a\"; continue; fi\n"
                         "  case \"$a\" in --ulimit) skip=1; continue;; esac\n  set -- \"$@\" \"$a\"\ndone\n"
                         "exec docker \"$@\"\n";
  std::filesystem::permissions(shim, std::filesystem::perms::owner_all | std::filesystem::perms::others_read |
                                         std::filesystem::perms::others_exec);
  const bool made_dev_dir = std::filesystem::create_directory("/dev/infiniband");
  ASSERT_EQ(InHost(h1, "mount -t tmpfs -o size=1m,mode=755 barge-bed-ib /dev/infiniband && "
                       "mknod /dev/infiniband/uverbs0 c 231 192 && "
                       "mount -t tmpfs -o size=1m,mode=755 barge-bed-ibsys /sys/class && "
                       "for h in mlx5_0 mlx5_1 mlx5_2; do mkdir -p /sys/class/infiniband/$h/ports/1; done && "
                       "echo '4: ACTIVE' > /sys/class/infiniband/mlx5_0/ports/1/state && "
                       "echo '4: ACTIVE' > /sys/class/infiniband/mlx5_1/ports/1/state && "
                       "echo '1: DOWN' > /sys/class/infiniband/mlx5_2/ports/1/state && echo made"),
            "made\n");
  struct Unmake {
    const BedHost& h;
    bool rmdir;
    ~Unmake() {
      InHost(h, "umount /sys/class; umount /dev/infiniband");
      if (rmdir) std::filesystem::remove("/dev/infiniband");
    }
  } unmake{h1, made_dev_dir};
  ASSERT_EQ(OnHost(h2, "ls -A /dev/infiniband 2>/dev/null; ls -A /sys/class/infiniband 2>/dev/null; true"), "") << "the stand-in leaked to h2";

  auto job_yaml = [&](const std::string& rdma) {
    std::string y = "name: rdma\nimage: " + bed.image +
                    "\ncommand: [\"sh\", \"-c\", \"echo hca=$NCCL_IB_HCA; ls /dev/infiniband 2>&1\"]\n"
                    "stop_grace: 1s\nhosts:\n";
    for (size_t i = 0; i < 2; ++i) y += "  - {address: " + bed.hosts[i].address + ", docker_command: " + shim.string() + "}\n";
    return y + "ssh: {user: " + bed.user + ", identity_file: " + bed.key + ", known_hosts: " + bed.known_hosts +
           ", connect_timeout: 10s}\nnetwork: {rdma: " + rdma + "}\n";
  };
  JobDir job("preflight-rdma");
  job.Write(job_yaml("auto"));
  CliOutcome plan = job.Barge("plan job.yaml");
  EXPECT_EQ(plan.code, 0) << plan.err;
  EXPECT_NE(plan.out.find("NCCL_IB_HCA==<active HCAs of " + h1.address + ">"), std::string::npos) << plan.out;
  EXPECT_NE(plan.out.find("--device /dev/infiniband"), std::string::npos) << plan.out;
  EXPECT_NE(plan.out.find("# RDMA (network.rdma: auto)"), std::string::npos) << plan.out;

  CliOutcome o = job.Barge("run job.yaml");
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.err.find(h2.address + ": no RDMA (no InfiniBand device (/dev/infiniband/uverbs*, "
                                    "/sys/class/infiniband)): its nodes use sockets"),
            std::string::npos)
      << o.err;
  EXPECT_NE(o.out.find("[0 head " + h1.address + "] hca==mlx5_0,mlx5_1"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("[0 head " + h1.address + "] uverbs0"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("[1 worker " + h2.address + "] hca=\n"), std::string::npos) << o.out;
  const std::string runs = barge::testing::ReadWholeFile(log);
  std::string on_h1, on_h2;
  std::istringstream lines(runs);
  for (std::string line; std::getline(lines, line);) (line.rfind("h1 ", 0) == 0 ? on_h1 : on_h2) += line + "\n";
  for (const char* flag : {"--device /dev/infiniband", "--ulimit memlock=-1", "--cap-add IPC_LOCK",
                           "-e NCCL_IB_HCA==mlx5_0,mlx5_1"}) {
    EXPECT_NE(on_h1.find(flag), std::string::npos) << flag << " not in h1's run:\n" << runs;
    EXPECT_EQ(on_h2.find(flag), std::string::npos) << flag << " in h2's run:\n" << runs;
  }
  EXPECT_EQ(on_h2.find("IPC_LOCK"), std::string::npos) << runs;
  std::printf("rdma: auto:\n%s\n%s\n%s\n", o.err.c_str(), o.out.c_str(), runs.c_str());

  job.Write(job_yaml("required"));
  CliOutcome req = job.Barge("run job.yaml");
  EXPECT_EQ(req.code, 125) << req.err;
  EXPECT_NE(Row(req.err, h2.address).find("RDMA is required (network.rdma: required) but the host has no "
                                          "InfiniBand device"),
            std::string::npos)
      << req.err;
  EXPECT_EQ(Row(req.err, h1.address), "") << req.err;
  std::printf("rdma: required:\n%s\n", req.err.c_str());
  std::filesystem::remove_all(base);
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
