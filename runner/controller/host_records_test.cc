// HostRecords on its own (host_records.h): given the job's context and the
// host set, on scripted fake hosts (tests/support/part_world.h). What it
// notes is what it writes at the job's end: one command per host, which the
// fake host keeps.
#include "runner/controller/host_records.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "runner/controller/job_state.h"
#include "tests/support/part_world.h"

namespace barge::runner {
namespace host_records_test {

struct RecordsWorld {
  RecordsWorld() : world(PartWorld::Yaml("", "[{address: h1, gpus: 4}]")), records(&world.ctx(), &world.hosts()) {}
  PartWorld world;
  internal::HostRecords records;
  internal::HostState& h1() { return world.host_state(0); }
  // The command lines that write h1's failure record.
  std::vector<std::string> Writes() {
    std::vector<std::string> out;
    for (const std::string& l : world.host("h1").lines()) {
      if (l.find("barge-fault-") != std::string::npos) out.push_back(l);
    }
    return out;
  }
  HostPhase Preflight() { return {Phase::kPreflight, 0, "h1", std::nullopt, std::nullopt}; }
};

TEST(HostRecords, AMissingNvidiaSmiOrTooFewGpusAtTheStartIsNotRecorded) {
  RecordsWorld w;
  ASSERT_TRUE(w.world.Connect());
  w.h1().gpus.findings = {
      {std::nullopt, "nvidia-smi failed (exit 127): sh: 1: nvidia-smi: not found", "now", gpu::Severity::kFatal},
      {std::nullopt, "the driver sees 1 GPU(s), the inventory says 4", "now", gpu::Severity::kFatal},
      {std::nullopt, "too few healthy GPUs for the job's nodes there: they ask for 4", "", gpu::Severity::kFatal}};
  w.records.WriteRecords();
  EXPECT_TRUE(w.Writes().empty()) << w.Writes().front();
  EXPECT_FALSE(w.world.recorder().Said("recorded on the host")) << w.world.recorder().AllMessages();
}

TEST(HostRecords, AFatalGpuFindingAtTheStartIsRecordedForItsGpu) {
  RecordsWorld w;
  ASSERT_TRUE(w.world.Connect());
  w.h1().gpus.findings = {
      {2, "Xid 79: GPU has fallen off the bus (reboot the host)", "1m ago", gpu::Severity::kFatal},
      {std::nullopt, "nvidia-smi failed (exit 127)", "now", gpu::Severity::kFatal}};
  w.records.WriteRecords();
  const std::vector<std::string> writes = w.Writes();
  ASSERT_EQ(writes.size(), 1u) << w.world.recorder().AllMessages();
  EXPECT_NE(writes[0].find("barge.fault=gpu_health"), std::string::npos) << writes[0];
  EXPECT_NE(writes[0].find("barge.hold.gpus=2"), std::string::npos) << writes[0];
  EXPECT_EQ(writes[0].find("exit 127"), std::string::npos) << "the missing nvidia-smi went along:\n" << writes[0];
  EXPECT_TRUE(w.world.recorder().Said("h1: recorded on the host: 1 host-caused failure(s) (gpu_health)"))
      << w.world.recorder().AllMessages();
}

TEST(HostRecords, APreflightFailureIsRecordedOnlyWhereTheEngineDidNotAnswer) {
  RecordsWorld w;
  ASSERT_TRUE(w.world.Connect());
  const TimePoint at{};
  w.records.HostEnded(w.Preflight(), at, false,
                      "GPUs requested but unavailable: could not select device driver \"\" with capabilities: [[gpu]]");
  w.records.HostEnded(w.Preflight(), at, false, "docker is not reachable: sh: 1: docker: not found");
  w.records.WriteRecords();
  EXPECT_TRUE(w.Writes().empty()) << w.Writes().front();
  w.records.HostEnded(w.Preflight(), at, false,
                      "the Docker engine did not answer within 2 s, 1 time(s) in a row (ssh.engine_timeout, "
                      "ssh.engine_misses)");
  w.records.WriteRecords();
  ASSERT_EQ(w.Writes().size(), 1u);
  EXPECT_NE(w.Writes()[0].find("barge.fault=engine"), std::string::npos) << w.Writes()[0];
}

TEST(HostRecords, AConnectFailureOfAHostNeverReachedIsNotNoted) {
  RecordsWorld w;
  w.world.host("h1").RefuseConnect("connection refused");
  EXPECT_FALSE(w.world.Connect());
  w.records.HostEnded({Phase::kConnect, 0, "h1", std::nullopt, std::nullopt}, TimePoint{}, false,
                      "cannot connect to h1: connection refused");
  w.records.WriteRecords();
  EXPECT_FALSE(w.world.recorder().Said("failure record")) << w.world.recorder().AllMessages();
}

TEST(HostRecords, WhileTheJobRunsAHostOutForAMissingNvidiaSmiIsNotRecordedAHungDriverIs) {
  RecordsWorld w;
  ASSERT_TRUE(w.world.Connect());
  // GpuWatch's state as it leaves it (gpu_watch.cc): the host is out, not
  // for its hardware.
  w.h1().gpus.out_while_running = "GPU health while running: nvidia-smi failed (exit 127)";
  w.records.JobEvent(event::kGpuUnhealthy, std::string("h1"), "h1: GPU health while running", TimePoint{});
  w.h1().gpus.out_while_running = "GPU health while running: GPU(s) 1 unhealthy, too few healthy GPUs left";
  w.records.JobEvent(event::kGpuUnhealthy, std::string("h1"), "the host is out", TimePoint{});
  w.records.WriteRecords();
  EXPECT_TRUE(w.Writes().empty()) << w.Writes().front();
  w.h1().gpus.hardware_fault_while_running = "GPU health while running: nvidia-smi did not answer in time";
  w.records.JobEvent(event::kGpuUnhealthy, std::string("h1"), "h1: GPU health while running", TimePoint{});
  w.records.WriteRecords();
  ASSERT_EQ(w.Writes().size(), 1u);
  EXPECT_NE(w.Writes()[0].find("did not answer in time"), std::string::npos) << w.Writes()[0];
}

}  // namespace host_records_test
}  // namespace barge::runner
