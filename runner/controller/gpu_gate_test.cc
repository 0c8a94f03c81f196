// GpuGate on its own (gpu_gate.h): given the job's context, the plan, the
// facts it is made from and the Holds part it takes GPU holds again with,
// on scripted fake hosts (tests/support/part_world.h). The driver's answers
// are nvidia-smi's own (csv, noheader, nounits), as preflight's sections.
#include "runner/controller/gpu_gate.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <string>
#include <vector>

#include "runner/controller/holds.h"
#include "runner/controller/job_state.h"
#include "runner/remote/preflight_script.h"
#include "runner/remote/reservation.h"
#include "tests/support/part_world.h"

namespace barge::runner {
namespace gpu_gate_test {

using std::chrono::milliseconds;
using std::chrono::seconds;

struct GateWorld {
  explicit GateWorld(const std::string& extra, const std::string& hosts = "[{address: h1, gpus: 4}]")
      : world(PartWorld::Yaml(extra, hosts)),
        holds(&world.ctx(), &world.hosts(), &world.planner()),
        gate(&world.ctx(), &world.planner(), &holds) {}
  PartWorld world;
  internal::Holds holds;
  internal::GpuGate gate;
};

// nvidia-smi's full query (csv,noheader,nounits) for four H100s, with
// `ecc_on_gpu0` uncorrectable ECC errors on GPU 0.
std::string FourGpus(int ecc_on_gpu0) {
  std::string out = "fields full\n";
  for (int i = 0; i < 4; ++i) {
    out += std::to_string(i) + ", GPU-fake-" + std::to_string(i) + ", NVIDIA H100 80GB HBM3, 580.159.04, 81559, " +
           std::to_string(i == 0 ? ecc_on_gpu0 : 0) + ", [N/A], Disabled, 00000000:0" + std::to_string(i) + ":00.0\n";
  }
  return out;
}

struct Section {
  std::string name;
  std::string text;
  int exit = 0;
};

// A preflight reply (preflight_script.h's markers) with `sections`.
PreflightReply Reply(const std::vector<Section>& sections) {
  std::string out = std::string(kPosixShellAnswer) + "\n";
  for (const Section& s : sections) {
    out += "@@barge{ " + s.name + "\n" + s.text + "\n@@barge} " + s.name + " " + std::to_string(s.exit) + "\n";
  }
  return ParsePreflightReply(out);
}

// The driver's answers: the query `query`, the kernel log readable and
// without Xids.
PreflightReply DriverSays(const std::string& query, int exit = 0) {
  return Reply({{"gpuq", query, exit}, {"gpuxid", "uptime 100.0\nsource dmesg"}});
}

std::string HoldLine(const std::string& id, const std::string& name, const std::string& job,
                     const std::string& gpus) {
  return "hold\t" + id + "\t" + name + "\t" + job + "\tfake\tme\tbox\t" + gpus + "\t1000\t1600\t600\t2\n";
}

// The job took GPUs 0 and 1 on the host.
std::string TookGpus01() {
  return "now 1000\ntook barge-hold-gpu-0\ntook barge-hold-gpu-1\n" +
         HoldLine("id1", "barge-lease-abcd1234.1000", "abcd1234", "") +
         HoldLine("id2", "barge-hold-gpu-0", "abcd1234", "0") + HoldLine("id3", "barge-hold-gpu-1", "abcd1234", "1");
}

int Count(const std::vector<std::string>& lines, const std::string& part) {
  return static_cast<int>(std::count_if(lines.begin(), lines.end(),
                                        [&](const std::string& l) { return l.find(part) != std::string::npos; }));
}

const char kEccOnGpu0[] = "2 uncorrectable ECC error(s) since the driver loaded (reset the GPU)";

TEST(GpuGate, TheDriverIsAskedOnlyWhereTheJobAsksForGpusAndNeverWithHealthOff) {
  GateWorld gpus("container: {gpus: 1}\n");
  ASSERT_TRUE(gpus.world.Connect());
  const std::string lines = gpus.gate.LinesFor(gpus.world.host_state(0));
  EXPECT_NE(lines.find("--query-gpu=" + std::string(gpu::kFullQuery)), std::string::npos) << lines;
  EXPECT_NE(lines.find("bs gpuxid;"), std::string::npos) << lines;
  // Each call bounded by the engine timeout (1 s here), at least 5 s.
  EXPECT_NE(lines.find("H_T='timeout -s KILL 5'"), std::string::npos) << lines;
  GateWorld none("");
  ASSERT_TRUE(none.world.Connect());
  EXPECT_EQ(none.gate.LinesFor(none.world.host_state(0)), "");
  GateWorld off("container: {gpus: 1}\nhealth: {gpus: off}\n");
  ASSERT_TRUE(off.world.Connect());
  EXPECT_EQ(off.gate.LinesFor(off.world.host_state(0)), "");
}

TEST(GpusGiven, CountsTheDevicesChosenTheValueNamesOrForAllWhatTheDriverListed) {
  cluster::NodePlan node;
  internal::HostGpus unasked;
  EXPECT_EQ(internal::GpusGiven(node, unasked), 0) << "no --gpus: no GPU";
  node.container.options.gpus = "2";
  EXPECT_EQ(internal::GpusGiven(node, unasked), 2);
  node.container.options.gpus = "\"device=0,3\"";
  EXPECT_EQ(internal::GpusGiven(node, unasked), 2);
  node.container.options.gpus = "device=GPU-a,GPU-b,GPU-c";
  EXPECT_EQ(internal::GpusGiven(node, unasked), 3);
  node.container.options.gpus = "all";
  EXPECT_EQ(internal::GpusGiven(node, unasked), std::nullopt) << "all, and the driver was not asked";
  GateWorld w("container: {gpus: all}\n");
  ASSERT_TRUE(w.world.Connect());
  internal::HostState& h1 = w.world.host_state(0);
  w.gate.Note(h1, DriverSays(FourGpus(0)));
  EXPECT_EQ(internal::GpusGiven(node, h1.gpus), 4);
  node.container.options.gpus = "2";
  node.gpu_devices = {1, 2, 3};  // the slices barge chose win
  EXPECT_EQ(internal::GpusGiven(node, h1.gpus), 3);
}

TEST(GpuGate, AnUnhealthyGpuIsTakenOutOfWhatItsHostOffersAndTheNodeGetsOthers) {
  GateWorld w("container: {gpus: 2}\n");
  ASSERT_TRUE(w.world.Connect());
  internal::HostState& h1 = w.world.host_state(0);
  w.gate.Note(h1, DriverSays(FourGpus(2)));
  ASSERT_TRUE(h1.gpus.report.has_value());
  std::vector<internal::HostState*> out;
  const Status s = w.gate.Apply({&h1}, &out);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(h1.gpus.out, std::vector<int>{0});
  EXPECT_EQ(w.world.input().held_gpus.at(0), std::set<int>{0});
  Result<cluster::Plan> plan = cluster::MakePlan(w.world.input());
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->nodes[0].gpu_devices, (std::vector<int>{1, 2}));
  EXPECT_TRUE(w.world.recorder().Said(std::string("barge: h1: GPU(s) 0 taken out (") + kEccOnGpu0 + ")"))
      << w.world.recorder().AllMessages();
  EXPECT_EQ(w.world.recorder().events,
            std::vector<std::string>{std::string("gpu_unhealthy h1: GPU(s) 0 taken out: ") + kEccOnGpu0});
  EXPECT_TRUE(w.world.host("h1").lines().empty()) << "the job held no GPU there yet";
}

TEST(GpuGate, AnUnhealthyGpuTheJobAlreadyHeldIsLetGoAndTheHoldsAreTakenAgainWithoutIt) {
  GateWorld w("container: {gpus: 2}\n");
  ASSERT_TRUE(w.world.Connect());
  internal::HostState& h1 = w.world.host_state(0);
  w.holds.NoteHolds(h1, TookGpus01(), 0);
  w.gate.Note(h1, DriverSays(FourGpus(2)));
  // The host script chooses 1 and 2 this time.
  w.world.host("h1").Section("hold", "now 1001\ntook barge-hold-gpu-1\ntook barge-hold-gpu-2\n" +
                                         HoldLine("id1", "barge-lease-abcd1234.1000", "abcd1234", "") +
                                         HoldLine("id3", "barge-hold-gpu-1", "abcd1234", "1") +
                                         HoldLine("id4", "barge-hold-gpu-2", "abcd1234", "2"));
  std::vector<internal::HostState*> out;
  const Status s = w.gate.Apply({&h1}, &out);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_TRUE(out.empty());
  const std::vector<std::string>& lines = w.world.host("h1").lines();
  ASSERT_EQ(lines.size(), 1u);
  // Its GPU holds go (its lease stays), then it chooses among 1, 2 and 3.
  EXPECT_NE(lines[0].find(ReleaseHoldsKeepingPlaceCommand(*h1.docker, "abcd1234")), std::string::npos)
      << lines[0];
  EXPECT_NE(lines[0].find("for h_i in 1 2 3;"), std::string::npos) << lines[0];
  EXPECT_EQ(HeldGpus(*h1.holds.reply, "abcd1234"), (std::vector<int>{1, 2}));
}

TEST(GpuGate, GpuHoldsThatCannotBeTakenAgainFailTheGateAndTheHoldsOnOtherHostsGo) {
  GateWorld w("container: {gpus: 2}\n", "[{address: h1, gpus: 4}, {address: h2, gpus: 4}]");
  ASSERT_TRUE(w.world.Connect());
  internal::HostState& h1 = w.world.host_state(0);
  internal::HostState& h2 = w.world.host_state(1);
  w.holds.NoteHolds(h1, TookGpus01(), 0);
  w.holds.NoteHolds(h2, TookGpus01(), 0);
  w.gate.Note(h1, DriverSays(FourGpus(2)));
  w.gate.Note(h2, DriverSays(FourGpus(0)));
  w.world.host("h1").Section("hold", "now 1001\nerror: Cannot connect to the Docker daemon", 1);
  std::vector<internal::HostState*> out;
  const Status s = w.gate.Apply({&h1, &h2}, &out);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "cannot reserve the hosts again without their unhealthy GPUs:\n  h1: cannot reserve the host (a hold "
            "container on its engine): error: Cannot connect to the Docker daemon");
  EXPECT_EQ(Count(w.world.host("h1").lines(), "bs hold;"), 1);
  // h2's GPUs were healthy: not taken again, but released with the rest.
  EXPECT_EQ(w.world.host("h2").lines(), std::vector<std::string>{ReleaseHoldsCommand(*h2.docker, "abcd1234")});
  EXPECT_FALSE(h2.holds.holding);
}

TEST(GpuGate, AJobThatAsksForAllGpusPutsTheHostOutWhenOneIsUnhealthy) {
  GateWorld w("container: {gpus: all}\n");
  ASSERT_TRUE(w.world.Connect());
  internal::HostState& h1 = w.world.host_state(0);
  w.gate.Note(h1, DriverSays(FourGpus(2)));
  std::vector<internal::HostState*> out;
  ASSERT_TRUE(w.gate.Apply({&h1}, &out).ok());
  EXPECT_EQ(out, std::vector<internal::HostState*>{&h1});
  EXPECT_TRUE(h1.gpus.out.empty());
  EXPECT_EQ(w.world.input().held_gpus.count(0), 0u);
  EXPECT_EQ(w.world.recorder().events, std::vector<std::string>{"gpu_unhealthy h1: the host is out"});
  EXPECT_EQ(w.gate.OutReason(h1), std::string("GPU health: GPU 0: ") + kEccOnGpu0 +
                                      "; the job's nodes there ask for GPUs all: no other GPU can be given");
}

TEST(GpuGate, TooFewHealthyGpusPutTheHostOutAndLeaveThePlansFactsAsTheyWere) {
  GateWorld w("container: {gpus: 4}\n");
  ASSERT_TRUE(w.world.Connect());
  internal::HostState& h1 = w.world.host_state(0);
  w.gate.Note(h1, DriverSays(FourGpus(2)));
  std::vector<internal::HostState*> out;
  ASSERT_TRUE(w.gate.Apply({&h1}, &out).ok());
  EXPECT_EQ(out, std::vector<internal::HostState*>{&h1});
  EXPECT_EQ(w.world.input().held_gpus.count(0), 0u) << "the unhealthy GPU stayed in the plan's facts";
  EXPECT_TRUE(h1.gpus.out.empty());
  const std::vector<std::string> problems = w.gate.Problems(h1);
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_EQ(problems[1], "GPU health: too few healthy GPUs for the job's nodes there: they ask for 4, 3 of 4 GPU(s) healthy");
  EXPECT_FALSE(w.world.recorder().Said("taken out")) << w.world.recorder().AllMessages();
}

TEST(GpuGate, AHungDriverPutsTheWholeHostOutAndTheTableSaysAWaitingJobDoesNotWaitForIt) {
  GateWorld w("container: {gpus: all}\nwait: 10m\n", "[h1, h2]");
  ASSERT_TRUE(w.world.Connect());
  internal::HostState& h1 = w.world.host_state(0);
  internal::HostState& h2 = w.world.host_state(1);
  w.gate.Note(h1, DriverSays(FourGpus(0)));
  w.gate.Note(h2, DriverSays("fields full", 137));
  std::vector<internal::HostState*> out;
  ASSERT_TRUE(w.gate.Apply({&h1, &h2}, &out).ok());
  EXPECT_EQ(out, std::vector<internal::HostState*>{&h2});
  const Status s = w.gate.OutError(out, 2);
  ASSERT_FALSE(s.ok());
  const std::string& m = s.message();
  EXPECT_EQ(m.rfind("GPU health: 1 of 2 host(s) cannot run the job's nodes; nothing was started:\n  HOST  GPU  PROBLEM", 0),
            0u)
      << m;
  EXPECT_NE(m.find("\n  h2    -    nvidia-smi did not answer in time (killed by its timeout)  now\n"), std::string::npos)
      << m;
  EXPECT_EQ(m.find("\n  h1 "), std::string::npos) << m;
  EXPECT_TRUE(m.ends_with("  (unavailable, not busy: a job does not wait for an unhealthy host)\n")) << m;
}

TEST(GpuGate, WarningsAndUnknownsAreSaidAndChangeNothing) {
  GateWorld w("container: {gpus: 2}\n");
  ASSERT_TRUE(w.world.Connect());
  internal::HostState& h1 = w.world.host_state(0);
  w.gate.Note(h1, Reply({{"gpuq", FourGpus(0)},
                         {"gpuxid", "uptime 100.0\nunreadable: dmesg: read kernel buffer failed: Operation not permitted", 1}}));
  std::vector<internal::HostState*> out;
  ASSERT_TRUE(w.gate.Apply({&h1}, &out).ok());
  EXPECT_TRUE(out.empty());
  EXPECT_TRUE(h1.gpus.out.empty());
  EXPECT_TRUE(w.world.input().held_gpus.empty());
  EXPECT_TRUE(w.world.recorder().events.empty()) << ::testing::PrintToString(w.world.recorder().events);
  EXPECT_TRUE(w.world.recorder().Said("barge: h1: GPU health: unknown: Xid events unknown: the kernel log cannot be read "
                                      "(dmesg: read kernel buffer failed: Operation not permitted)"))
      << w.world.recorder().AllMessages();
  EXPECT_TRUE(w.gate.Problems(h1).empty());
}

TEST(GpuGate, TheDcgmDiagnosticRunsOnlyOnTheGpusTheJobHoldsAndItsFailuresJoinTheHostsFindings) {
  GateWorld w("container: {gpus: 2}\nhealth: {gpus: dcgm}\n");
  ASSERT_TRUE(w.world.Connect());
  internal::HostState& h1 = w.world.host_state(0);
  w.holds.NoteHolds(h1, TookGpus01(), 0);
  w.gate.Note(h1, DriverSays(FourGpus(0)));
  // DCGM 3's documented JSON form (tests/data/dcgmi-documented-format/README.md).
  w.world.host("h1").On("diag -r 1 -j",
                        FakeReply{226, R"({"DCGM GPU Diagnostic": {"test_categories": [{"category": "Deployment",
                        "tests": [{"name": "Page Retirement/Row Remap", "results": [{"gpu_ids": "0", "status": "Fail",
                        "warnings": [{"warning": "GPU 0 had uncorrectable memory errors and row remapping failed.",
                        "error_id": 84}]}, {"gpu_ids": "1", "status": "Pass"}]}]}]}})"});
  w.gate.Diagnose({&h1});
  const std::vector<std::string>& lines = w.world.host("h1").lines();
  ASSERT_EQ(lines.size(), 1u);
  // Only the two it holds, not GPUs 2 and 3 that it may not touch.
  EXPECT_EQ(lines[0], gpu::DcgmDiagCommand("dcgmi", {0, 1}, seconds(120)));
  EXPECT_EQ(w.world.recorder().messages,
            std::vector<std::string>{"barge: h1: DCGM diagnostic (level 1) on GPU(s) 0,1"});
  EXPECT_EQ(w.gate.Problems(h1),
            std::vector<std::string>{"GPU health: GPU 0: DCGM diagnostic: Page Retirement/Row Remap failed: GPU 0 had "
                                     "uncorrectable memory errors and row remapping failed."});
  // Without `dcgm` it is not asked.
  GateWorld basic("container: {gpus: 2}\n");
  ASSERT_TRUE(basic.world.Connect());
  basic.gate.Note(basic.world.host_state(0), DriverSays(FourGpus(0)));
  basic.gate.Diagnose({&basic.world.host_state(0)});
  EXPECT_TRUE(basic.world.host("h1").lines().empty());
}

}  // namespace gpu_gate_test
}  // namespace barge::runner
