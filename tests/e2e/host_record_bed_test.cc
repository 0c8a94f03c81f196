// A host's failure record on the test bed (runner/remote/host_record.h): a
// host fails two jobs of one store (its engine frozen once, a fatal Xid from
// the stand-in driver once), each failure is written on the host's own
// engine, and a job of a second store (another user's) does not get the
// host and says why; `barge hosts` shows the record and `--forgive` puts the
// host back.
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

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

// The record's entries on `h`: "KIND GPU JOBNAME" lines, sorted.
std::string RecordOn(const BedHost& h) {
  return RunShell("DOCKER_HOST=" + h.docker_host +
                  " timeout 20 docker ps -a --filter label=barge.fault --format "
                  "'{{.Label \"barge.fault\"}} {{.Label \"barge.hold.gpus\"}} {{.Label \"barge.hold.name\"}}' | sort");
}

void ClearRecordOn(const BedHost& h) {
  RunShell("DOCKER_HOST=" + h.docker_host + " timeout 20 sh -c 'ids=$(docker ps -aq --filter label=barge.fault); "
           "[ -z \"$ids\" ] || docker rm -f $ids >/dev/null'");
}

// Polls until `h`'s record holds `text` (the writer works in the background
// and retries every 10 s while the engine does not answer).
bool RecordShows(const BedHost& h, const std::string& text, std::chrono::seconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (RecordOn(h).find(text) == std::string::npos) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  return true;
}

int DockerdPidOf(const BedHost& h) {
  const std::string file = GetBed().raw.at("BED_HOST_" + h.name + "_DOCKERD_PIDFILE");
  std::ifstream in(file);
  int pid = 0;
  in >> pid;
  return pid;
}

class HostRecordTest : public ::testing::Test {
 protected:
  void SetUp() override { ClearRecordOn(GetBed().hosts[1]); }
  void TearDown() override {
    const BedHost& h2 = GetBed().hosts[1];
    if (bound_) InHost(h2, "umount /usr/bin/dmesg");
    ClearRecordOn(h2);
    EXPECT_EQ(JobContainers(h2), "") << "a container was left on h2";
  }
  bool bound_ = false;
};

TEST_F(HostRecordTest, AHostThatFailedTwoJobsIsAvoidedByAnotherStoresJobThatSaysWhyAndForgiveGivesItBack) {
  const auto& bed = GetBed();
  ASSERT_GE(bed.hosts.size(), 2u);
  const BedHost& h2 = bed.hosts[1];
  const std::filesystem::path base = std::filesystem::path(bed.dir) / "host-record";
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
  // The stand-in driver with two GPUs, a kernel log with Xid 79 on GPU 1
  // (PCI 00:07) a minute ago, and a docker that drops --gpus (the bed has
  // no GPU) and logs each value.
  const std::string smi =
      script("smi-two", "STANDIN_GPUS=2 exec " + (base / "nvidia-smi" / "standin.sh").string() + " \"$@\"\n");
  const std::string dmesg = script(
      "dmesg", "awk '{ printf \"[%12.6f] NVRM: Xid (PCI:0000:00:07): 79, pid=1896, GPU has fallen off the bus.\\n\", "
               "$1 - 61 }' /proc/uptime\n");
  const std::string log = (base / "gpus.log").string();
  const std::string shim = script(
      "docker", "case \" $* \" in *' nvidia-smi '*) echo 'GPU 0: shim'; echo 'GPU 1: shim'; exit 0;; esac\n"
                "skip=0\nfor a do\n  shift\n  if [ $skip = 1 ]; then skip=0; echo \"$a\" >> " + log +
                    "; continue; fi\n  case \"$a\" in --gpus) skip=1; continue;; esac\n  set -- \"$@\" \"$a\"\ndone\n"
                    "exec docker \"$@\"\n");
  // One-host jobs on h2, counting the record's last hour (the bed's
  // config.yaml counts only its last second: tests/support/xdg/barge/config.yaml).
  auto job = [&](const std::string& name, bool gpus, const std::string& health) {
    std::string y = "name: " + name + "\nimage: " + bed.image +
                    "\ncommand: [\"sh\", \"-c\", \"echo started\"]\nstop_grace: 1s\nhosts:\n  - {address: " +
                    h2.address + (gpus ? ", gpus: 2, docker_command: " + shim : std::string()) + "}\n";
    y += "ssh: {user: " + bed.user + ", identity_file: " + bed.key + ", known_hosts: " + bed.known_hosts +
         ", connect_timeout: 10s, engine_timeout: 2s, engine_misses: 1}\n";
    if (gpus) y += "container: {gpus: 2}\n";
    return y + "health: {host_window: 1h" + (gpus ? ", nvidia_smi: " + smi : std::string()) + health + "}\n";
  };
  JobDir alice("record-alice");
  JobDir bob("record-bob");  // a second store: another user's jobs

  // 1. h2's engine frozen: preflight fails there, and the record is
  // written once the engine answers again.
  alice.Write(job("recfrozen", false, ""));
  const int dockerd = DockerdPidOf(h2);
  ASSERT_GT(dockerd, 0);
  ASSERT_EQ(kill(dockerd, SIGSTOP), 0);
  CliOutcome frozen = alice.Barge("run job.yaml");
  kill(dockerd, SIGCONT);
  EXPECT_EQ(frozen.code, 125) << frozen.err;
  EXPECT_NE(frozen.err.find(h2.address + ": recorded on the host: 1 host-caused failure(s) (engine)"),
            std::string::npos)
      << frozen.err;
  EXPECT_TRUE(RecordShows(h2, "engine  recfrozen", std::chrono::seconds(60))) << RecordOn(h2);
  std::printf("frozen engine:\n%s\n", frozen.err.c_str());

  // 2. A fatal Xid on GPU 1: the job stops at the GPU gate; GPU 1 is
  // recorded by index (and UUID).
  ASSERT_EQ(InHost(h2, "mount --bind " + dmesg + " /usr/bin/dmesg && echo bound"), "bound\n");
  bound_ = true;
  alice.Write(job("recxid", true, ""));
  CliOutcome xid = alice.Barge("run job.yaml");
  InHost(h2, "umount /usr/bin/dmesg");
  bound_ = false;
  EXPECT_EQ(xid.code, 125) << xid.err;
  EXPECT_NE(xid.err.find("Xid 79"), std::string::npos) << xid.err;
  EXPECT_TRUE(RecordShows(h2, "gpu_health 1 recxid", std::chrono::seconds(30))) << RecordOn(h2);
  EXPECT_EQ(RecordOn(h2), "engine  recfrozen\ngpu_health 1 recxid\n");

  // 3. Another store's job asking for both GPUs: the driver looks healthy
  // now, but the record keeps GPU 1 out: the host cannot run it, and the
  // message names the record.
  bob.Write(job("recgpus", true, ""));
  CliOutcome gpus = bob.Barge("run job.yaml");
  EXPECT_EQ(gpus.code, 125) << gpus.err;
  EXPECT_NE(gpus.err.find("recorded on the host: gpu_health"), std::string::npos) << gpus.err;
  EXPECT_NE(gpus.err.find(" recxid ("), std::string::npos) << "the entry's job is not named:\n" << gpus.err;
  EXPECT_EQ(gpus.out.find("started"), std::string::npos) << gpus.out;
  EXPECT_FALSE(std::filesystem::exists(log)) << "a container was started";
  std::printf("GPU out by the record:\n%s\n", gpus.err.c_str());

  // 4. Its job without GPUs, allowing no host-level failure: h2 is out by
  // the frozen engine's entry.
  bob.Write(job("recplain", false, ", host_failures: 0"));
  CliOutcome plain = bob.Barge("run job.yaml");
  EXPECT_EQ(plain.code, 125) << plain.err;
  EXPECT_NE(plain.err.find("1 of 1 host(s) are out by their failure record; nothing was started:"), std::string::npos)
      << plain.err;
  EXPECT_NE(plain.err.find("more than the 0 allowed (health.host_failures): engine "), std::string::npos) << plain.err;
  EXPECT_NE(plain.err.find(" recfrozen ("), std::string::npos) << plain.err;
  EXPECT_NE(plain.err.find("`barge hosts --forgive " + h2.address + "` clears it"), std::string::npos) << plain.err;
  EXPECT_EQ(plain.out.find("started"), std::string::npos) << plain.out;
  std::printf("host out by the record:\n%s\n", plain.err.c_str());

  // 5. `barge hosts` shows the record and that it puts h2 out; --forgive
  // clears it (an entry with who and when), and the job runs.
  CliOutcome hosts = bob.Barge("hosts job.yaml");
  EXPECT_EQ(hosts.code, 0) << hosts.err;
  EXPECT_NE(hosts.out.find("failure engine"), std::string::npos) << hosts.out;
  EXPECT_NE(hosts.out.find("failure gpu_health"), std::string::npos) << hosts.out;
  EXPECT_NE(hosts.out.find("record: OUT"), std::string::npos) << hosts.out;
  std::printf("barge hosts:\n%s\n", hosts.out.c_str());
  CliOutcome forgive = bob.Barge("hosts job.yaml --forgive " + h2.address);
  EXPECT_EQ(forgive.code, 0) << forgive.err;
  EXPECT_NE(forgive.err.find("its failure record is forgiven"), std::string::npos) << forgive.err;
  EXPECT_NE(forgive.out.find("forgiven"), std::string::npos) << forgive.out;
  EXPECT_NE(forgive.out.find("record: usable"), std::string::npos) << forgive.out;
  EXPECT_EQ(bob.Barge("hosts job.yaml --forgive 10.77.0.254").code, 125) << "an unknown host was forgiven";
  CliOutcome again = bob.Barge("run job.yaml");
  EXPECT_EQ(again.code, 0) << again.err;
  EXPECT_NE(again.out.find("started"), std::string::npos) << again.out;
  bob.Write(job("recgpus", true, ""));
  CliOutcome gpus_again = bob.Barge("run job.yaml");
  EXPECT_EQ(gpus_again.code, 0) << gpus_again.err;
  EXPECT_EQ(barge::testing::ReadWholeFile(log), "\"device=0,1\"\n") << "not one node with both GPUs";
  std::filesystem::remove_all(base);
}

}  // namespace
