// GpuWatch on its own (gpu_watch.h): given the job's context, the host set,
// the attempt, the planner, Holds and Faults, on the virtual clock with
// scripted fake hosts (tests/support/part_world.h) whose driver answers
// change while the job runs. The answers are nvidia-smi's own lines
// (csv,noheader,nounits) and the kernel log's Xid lines in the driver's
// format, as in the recorded outputs (tests/data/nvidia-smi).
#include "runner/controller/gpu_watch.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "runner/controller/gpu_gate.h"
#include "runner/controller/host_records.h"
#include "runner/controller/job_state.h"
#include "tests/support/part_world.h"

namespace barge::runner {
namespace gpu_watch_test {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Two hosts of four GPUs, one node each asking for two (GPUs 0 and 1).
constexpr const char* kHosts = "[{address: h1, gpus: 4}, {address: h2, gpus: 4}]";

struct WatchWorld {
  explicit WatchWorld(const std::string& extra)
      : world(PartWorld::Yaml("container: {gpus: 2}\n" + extra, kHosts)),
        holds(&world.ctx(), &world.hosts(), &world.planner()),
        faults(&world.ctx(), &world.hosts(), &world.attempt(), &world.plan()),
        watch(&world.ctx(), &world.hosts(), &world.attempt(), &world.planner(), &holds, &faults) {
    EXPECT_TRUE(world.Connect());
    world.MakeNodes();
    for (const char* h : {"h1", "h2"}) {
      world.host(h).Section("gpuq", FourGpus());
      world.host(h).Section("gpuxid", "uptime 1000.000000\nsource dmesg");
    }
  }
  // nvidia-smi's full query for four H100s, GPU i on PCI 0000:0i:00.
  static std::string FourGpus() {
    std::string out = "fields full\n";
    for (int i = 0; i < 4; ++i) {
      out += std::to_string(i) + ", GPU-fake-" + std::to_string(i) + ", NVIDIA H100 80GB HBM3, 580.159.04, 81559, 0, " +
             "[N/A], Disabled, 00000000:0" + std::to_string(i) + ":00.0\n";
    }
    return out;
  }
  // The kernel log at `uptime` with one Xid line (the driver's format) of
  // `code` on GPU `gpu`, logged at `at`.
  static std::string XidLog(double uptime, double at, int gpu, int code, const std::string& words) {
    char line[256];
    std::snprintf(line, sizeof line, "uptime %.6f\nsource dmesg\n[%12.6f] NVRM: Xid (PCI:0000:0%d:00): %d, %s", uptime,
                  at, gpu, code, words.c_str());
    return line;
  }
  // `fn` runs `at` after now.
  void At(milliseconds at, std::function<void()> fn) {
    world.loop().AddTimer(world.loop().Now() + at, std::move(fn));
  }
  milliseconds RunToFault(milliseconds limit = std::chrono::minutes(10)) {
    const auto began = world.loop().Now();
    world.RunUntil([this] { return world.attempt().fault.has_value(); }, limit);
    return std::chrono::duration_cast<milliseconds>(world.loop().Now() - began);
  }
  int Samples(const std::string& host) {
    const auto& lines = world.host(host).lines();
    return static_cast<int>(std::count_if(lines.begin(), lines.end(), [](const std::string& l) {
      return l.find("echo barge-gpuwatch") != std::string::npos;
    }));
  }
  PartWorld world;
  internal::Holds holds;
  internal::Faults faults;
  internal::GpuWatch watch;
};

constexpr const char* kFellOff = "pid=1896, name=python3, GPU has fallen off the bus.";

TEST(GpuWatch, AFatalXidOnAJobsGpuMidJobEndsTheAttemptAsGpuUnhealthyAndTheGpuIsOutAtTheRestart) {
  WatchWorld w("health: {every: 10s}\n");
  w.watch.Start();
  // Healthy for the first samples; GPU 1 of h2 falls off the bus at 25 s.
  w.At(seconds(25), [&] { w.world.host("h2").Section("gpuxid", WatchWorld::XidLog(1025, 1024.5, 1, 79, kFellOff)); });
  const milliseconds took = w.RunToFault();
  ASSERT_TRUE(w.world.attempt().fault.has_value());
  const internal::Fault& f = *w.world.attempt().fault;
  EXPECT_EQ(f.cause, RestartCause::kGpuUnhealthy);
  EXPECT_EQ(f.host, "h2");
  EXPECT_GE(took, seconds(30)) << "seen at the first sample after it";
  EXPECT_LT(took, seconds(31));
  EXPECT_NE(f.detail.find("h2: GPU health while running (health.every): GPU 1: Xid 79: GPU has fallen off the bus "
                          "(reboot the host)"),
            std::string::npos)
      << f.detail;
  EXPECT_NE(f.detail.find("(GPU(s) 1 out at a restart)"), std::string::npos) << f.detail;
  EXPECT_EQ(w.world.recorder().events.size(), 1u);
  EXPECT_EQ(w.world.recorder().events[0].rfind("gpu_unhealthy h2", 0), 0u) << w.world.recorder().events[0];
  EXPECT_FALSE(w.world.host_state(1).health.replace) << "one GPU, not the host";
  EXPECT_EQ(w.Samples("h1"), 3);
  // At the restart: GPU 1 is out of what h2 offers; its node gets 0 and 2
  // (the attempt's nodes point into the plan: it stays).
  w.world.planner().InUse();
  ASSERT_TRUE(w.watch.TakeOut().ok());
  ASSERT_TRUE(w.world.planner().Update().ok());
  EXPECT_EQ(w.world.plan().nodes[1].gpu_devices, (std::vector<int>{0, 2}));
  EXPECT_EQ(w.world.plan().nodes[0].gpu_devices, (std::vector<int>{0, 1})) << "h1 keeps its GPUs";
  EXPECT_TRUE(w.world.recorder().Said("h2: GPU(s) 1 taken out for the restart")) << w.world.recorder().AllMessages();
}

TEST(GpuWatch, XidsFromBeforeTheJobBeganAnIgnoredXidAndOneOnAnotherJobsGpuEndNothing) {
  WatchWorld w("health: {every: 10s, xids: {ignore: [79]}}\n");
  // Before the job began (the first sample reads uptime 1000): a 48 on GPU 0.
  w.world.host("h1").Section("gpuxid", WatchWorld::XidLog(1000, 990, 0, 48, "pid=1, DBE (0x1,0x2)"));
  w.watch.Start();
  // While it runs: an ignored 79 on h2's GPU 1, a fatal 48 on h1's GPU 3
  // (not the job's: its node has 0 and 1).
  w.At(seconds(15), [&] {
    w.world.host("h2").Section("gpuxid", WatchWorld::XidLog(1015, 1014, 1, 79, kFellOff));
    w.world.host("h1").Section("gpuxid", WatchWorld::XidLog(1015, 1014, 3, 48, "pid=1, DBE (0x1,0x2)"));
  });
  w.RunToFault(seconds(60));
  EXPECT_FALSE(w.world.attempt().fault.has_value()) << w.world.attempt().fault->detail;
  EXPECT_GE(w.Samples("h2"), 5);
  const std::string said = w.world.recorder().AllMessages();
  EXPECT_EQ(said.find("Xid 79"), std::string::npos) << said;
  // Said once, not at every sample.
  const auto& m = w.world.recorder().messages;
  EXPECT_EQ(std::count_if(m.begin(), m.end(),
                          [](const std::string& s) {
                            return s.find("h1: GPU health while running: not the job's GPU: GPU 3: Xid 48") !=
                                   std::string::npos;
                          }),
            1)
      << said;
}

TEST(GpuWatch, AWarningXidIsSaidOnceAndAHungNvidiaSmiPutsTheWholeHostOut) {
  WatchWorld w("health: {every: 10s}\n");
  w.watch.Start();
  // The first sample (10 s) reads uptime 1000: the 94 comes after it.
  w.At(seconds(15), [&] {
    w.world.host("h1").Section("gpuxid", WatchWorld::XidLog(1015, 1014, 0, 94, "pid=3003, name=train.py, Contained: SM (0x1)"));
  });
  w.At(seconds(45), [&] { w.world.host("h1").Section("gpuq", "fields full\n", 137); });
  const milliseconds took = w.RunToFault();
  ASSERT_TRUE(w.world.attempt().fault.has_value());
  EXPECT_GE(took, seconds(50));
  EXPECT_LT(took, seconds(51));
  const internal::Fault& f = *w.world.attempt().fault;
  EXPECT_EQ(f.cause, RestartCause::kGpuUnhealthy);
  EXPECT_NE(f.detail.find("h1: GPU health while running (health.every): nvidia-smi did not answer in time (killed by "
                          "its timeout) (the host is out)"),
            std::string::npos)
      << f.detail;
  EXPECT_TRUE(w.world.host_state(0).health.replace) << "a spare takes its place at a restart";
  EXPECT_FALSE(w.world.host_state(0).gpus.out_while_running.empty());
  const auto& m = w.world.recorder().messages;
  EXPECT_EQ(std::count_if(m.begin(), m.end(),
                          [](const std::string& s) {
                            return s.find("h1: GPU health while running: warning: GPU 0: Xid 94") != std::string::npos;
                          }),
            1)
      << w.world.recorder().AllMessages();
}

TEST(GpuWatch, EveryGpuOfANodeIdlePastTheBoundIsAHangNamingTheNodeAndItsGpus) {
  WatchWorld w("progress: {gpu_util: {below: 5, for: 1m}, every: 10s}\n");
  w.world.host("h1").Section("gpuutil", "0, 97\n1, 95\n2, 0\n3, 0");
  w.world.host("h2").Section("gpuutil", "0, 88\n1, 91\n2, 0\n3, 0");
  w.watch.Start();
  // h2's node goes idle at 25 s (its GPUs 0 and 1); h1's keeps working.
  w.At(seconds(25), [&] { w.world.host("h2").Section("gpuutil", "0, 0\n1, 3\n2, 0\n3, 0"); });
  const milliseconds took = w.RunToFault();
  ASSERT_TRUE(w.world.attempt().fault.has_value());
  const internal::Fault& f = *w.world.attempt().fault;
  EXPECT_EQ(f.cause, RestartCause::kHang);
  // Idle from the sample at 30 s; past the minute at the sample of 90 s.
  EXPECT_GE(took, seconds(90));
  EXPECT_LT(took, seconds(91));
  EXPECT_NE(f.detail.find("the job made no progress: every GPU of rank 1 (h2) below 5% utilisation for 1m00s "
                          "(progress.gpu_util)"),
            std::string::npos)
      << f.detail;
  EXPECT_NE(f.detail.find("  rank 0 (h1): GPU 0 97%, GPU 1 95%\n  rank 1 (h2): GPU 0 0%, GPU 1 3% (below 5% for 1m00s)"),
            std::string::npos)
      << f.detail;
  EXPECT_EQ(w.Samples("h1"), 9);
}

TEST(GpuWatch, OneBusyGpuOfANodeIsNoHangAndWithoutEitherCheckNothingIsSampled) {
  WatchWorld w("progress: {gpu_util: {below: 5, for: 30s}, every: 10s}\n");
  w.world.host("h1").Section("gpuutil", "0, 0\n1, 40\n2, 0\n3, 0");
  w.world.host("h2").Section("gpuutil", "0, 99\n1, 0\n2, 0\n3, 0");
  w.watch.Start();
  w.RunToFault(seconds(600));
  EXPECT_FALSE(w.world.attempt().fault.has_value()) << w.world.attempt().fault->detail;
  EXPECT_GE(w.Samples("h1"), 59);
  EXPECT_LE(w.Samples("h1"), 60);

  WatchWorld quiet("");
  quiet.watch.Start();
  quiet.RunToFault(std::chrono::hours(1));
  EXPECT_EQ(quiet.Samples("h1") + quiet.Samples("h2"), 0);
}

// GpuWatch's own command, run by sh on this machine against the stand-in
// driver (tests/data/nvidia-smi/standin.sh: the real outputs of an H100,
// driver 580.159.04, replayed; STANDIN_GPUS=N repeats its line for N GPUs
// on PCI 00:06 + i) and a stand-in dmesg first on PATH that prints the
// captured kernel log (dmesg-xid.txt: the driver's lines, no Xid) and,
// with `xid79_on`, one line in the driver's Xid format (the edit: Xid 79 on
// that PCI device, logged 0.05 s before the call, on this machine's clock
// as /proc/uptime reads it). Its output is what the fake host answers.
struct StandinDriver {
  StandinDriver() : dir("/tmp/barge-gpu-watch-standin-" + std::to_string(getpid())) {
    std::filesystem::create_directories(dir);
  }
  ~StandinDriver() { std::filesystem::remove_all(dir); }
  static std::string Smi() { return std::string(BARGE_SOURCE_DIR) + "/tests/data/nvidia-smi/standin.sh"; }
  std::string Answer(const std::string& command, int gpus, const std::string& xid79_on = "") const {
    std::string dmesg = "#!/bin/sh\ncat " + std::string(BARGE_SOURCE_DIR) +
                        "/tests/data/nvidia-smi/driver-580.159.04-h100-80gb-hbm3/dmesg-xid.txt\n";
    if (!xid79_on.empty()) {
      dmesg += "awk '{ printf \"[%12.6f] NVRM: Xid (PCI:" + xid79_on +
               "): 79, pid=1896, name=python3, GPU has fallen off the bus.\\n\", $1 - 0.05 }' /proc/uptime\n";
    }
    std::ofstream(dir + "/dmesg") << dmesg;
    std::filesystem::permissions(dir + "/dmesg", std::filesystem::perms::owner_all);
    std::ofstream(dir + "/watch.sh") << command;
    const std::string line = "STANDIN_GPUS=" + std::to_string(gpus) + " PATH=" + dir + ":$PATH sh " + dir + "/watch.sh";
    std::string out;
    FILE* p = popen(line.c_str(), "r");
    char buf[4096];
    for (size_t n; p && (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    if (p) pclose(p);
    return out;
  }
  std::string dir;
};

TEST(GpuWatch, AGpuThatFellOffTheBusMidJobIsAHardwareFaultOfTheHostThatItsRecordKeeps) {
  WatchWorld w("health: {every: 10s, nvidia_smi: " + StandinDriver::Smi() + "}\n");
  internal::HostRecords records(&w.world.ctx(), &w.world.hosts());
  w.world.ctx().observer.Add(&records);
  StandinDriver driver;
  // The command GpuWatch sends (health only), answered as the stand-in does.
  const std::string command = gpu::GpuWatchCommand(StandinDriver::Smi(), internal::GpuCallLimit(w.world.spec()),
                                                   /*health=*/true, /*util=*/false);
  const std::string healthy = driver.Answer(command, 4);
  ASSERT_NE(healthy.find("00000000:00:09.0"), std::string::npos) << "the stand-in did not list 4 GPUs:\n" << healthy;
  for (const char* h : {"h1", "h2"}) w.world.host(h).On("echo barge-gpuwatch", {0, healthy});
  w.watch.Start();
  // At 25 s h2's GPU 3 (PCI 00:09) falls off the bus: the driver lists 3
  // GPUs, the kernel log has its Xid 79. (A real pause first: the Xid must
  // come after the kernel log's clock of the first sample, this machine's.)
  w.At(seconds(25), [&] {
    std::this_thread::sleep_for(milliseconds(200));
    w.world.host("h2").On("echo barge-gpuwatch", {0, driver.Answer(command, 3, "0000:00:09")});
  });
  w.RunToFault();
  ASSERT_TRUE(w.world.attempt().fault.has_value());
  const internal::Fault& f = *w.world.attempt().fault;
  EXPECT_EQ(f.cause, RestartCause::kGpuUnhealthy);
  EXPECT_EQ(f.host, "h2");
  ASSERT_NE(std::find(w.world.host("h2").lines().begin(), w.world.host("h2").lines().end(), command),
            w.world.host("h2").lines().end())
      << "GpuWatch sent another command than the one the stand-in answered";
  // Set by GpuWatch itself: the host is out (its driver sees 3 of 4 GPUs),
  // and for its hardware (the Xid of no GPU the driver lists).
  const internal::HostState& h2 = w.world.host_state(1);
  EXPECT_NE(h2.gpus.out_while_running.find("the driver sees 3 GPU(s), the inventory says 4"), std::string::npos)
      << h2.gpus.out_while_running;
  EXPECT_EQ(h2.gpus.hardware_fault_while_running.rfind(
                "GPU health while running: Xid 79: GPU has fallen off the bus (reboot the host) on PCI 0000:00:09", 0),
            0u)
      << h2.gpus.hardware_fault_while_running;
  EXPECT_TRUE(w.world.host_state(0).gpus.hardware_fault_while_running.empty());
  // Which the host's failure record keeps, as a failure of the whole host.
  records.WriteRecords();
  std::vector<std::string> writes;
  for (const std::string& l : w.world.host("h2").lines()) {
    if (l.find("barge-fault-") != std::string::npos) writes.push_back(l);
  }
  ASSERT_EQ(writes.size(), 1u) << w.world.recorder().AllMessages();
  EXPECT_NE(writes[0].find("barge.fault=gpu_health"), std::string::npos) << writes[0];
  EXPECT_NE(writes[0].find("Xid 79: GPU has fallen off the bus (reboot the host) on PCI 0000:00:09"), std::string::npos)
      << writes[0];
  EXPECT_NE(writes[0].find("--label barge.hold.gpus= --label"), std::string::npos) << "a GPU-level entry:\n" << writes[0];
  for (const std::string& l : w.world.host("h1").lines()) EXPECT_EQ(l.find("barge-fault-"), std::string::npos) << l;
}

}  // namespace gpu_watch_test
}  // namespace barge::runner
