// SlurmAllocation (slurm_allocation.h) built with only what it takes: the
// job's context on a virtual loop (tests/support/part_world.h) and a
// scripted Slurm on the submit host (tests/support/fake_slurm.h). Every
// Slurm command is a command on the job's loop: a squeue Slurm does not
// answer blocks nothing, and the whole flow runs on the fake clock.
#include "runner/controller/slurm_allocation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runner/store/job_store.h"
#include "tests/support/fake_slurm.h"
#include "tests/support/part_world.h"

namespace barge::runner {
namespace slurm_allocation_test {

using std::chrono::milliseconds;
using std::chrono::seconds;

// A 2-node slurm: job's world with its store record, and its allocation on
// `slurm`.
struct SlurmWorld {
  explicit SlurmWorld(const std::string& extra = "")
      : world("name: fake\nimage: img\ncommand: [train]\nslurm: {nodes: 2, time: 1h}\n" + extra) {
    Result<std::unique_ptr<JobStore>> store = JobStore::Open(world.state_dir().string());
    EXPECT_TRUE(store.ok()) << store.status().message();
    if (!store.ok()) return;
    JobRecord job;
    job.id = "abcd1234";
    job.name = "fake";
    job.status = JobStatus::kWaiting;
    EXPECT_TRUE((*store)->CreateJob(job).ok());
    world.ctx().store = std::move(store).value();
    allocation = std::make_unique<internal::SlurmAllocation>(
        &world.ctx(), [this](ssh::EventLoop* loop) -> Result<std::unique_ptr<ssh::Executor>> {
          EXPECT_EQ(loop, &world.loop()) << "Slurm's commands run on the job's own loop";
          return slurm.On(loop);
        });
  }
  ~SlurmWorld() { allocation.reset(); }

  // The store's events of the job, "KIND: DETAIL" each.
  std::vector<std::string> Events() {
    std::vector<std::string> out;
    Result<std::vector<EventRecord>> events = world.ctx().store->GetEvents("abcd1234");
    if (events.ok()) {
      for (const EventRecord& e : *events) {
        if (e.kind.starts_with("slurm_")) out.push_back(e.kind + ": " + e.detail);
      }
    }
    return out;
  }
  long Count(const std::string& line) { return std::count(slurm.lines.begin(), slurm.lines.end(), line); }

  FakeSlurm slurm;
  PartWorld world;
  std::unique_ptr<internal::SlurmAllocation> allocation;
};

TEST(SlurmAllocation, AllocateRecordsTheSlurmJobAndItsNodesAndSaysEachChangeOfTheQueue) {
  SlurmWorld w;
  w.slurm.grant_after = seconds(10);
  Status granted = w.allocation->Allocate();
  ASSERT_TRUE(granted.ok()) << granted.message();
  EXPECT_EQ(w.allocation->id(), "7");
  ASSERT_EQ(w.allocation->nodes().size(), 2u);
  EXPECT_EQ(w.allocation->nodes()[1].address, "10.0.0.2");
  const PartRecorder& said = w.world.recorder();
  EXPECT_TRUE(said.Said("barge: job abcd1234 (fake): Slurm job 7 submitted from this machine")) << said.AllMessages();
  EXPECT_TRUE(said.Said("barge: queued in Slurm: Priority (Slurm job 7)")) << said.AllMessages();
  EXPECT_EQ(std::count_if(said.messages.begin(), said.messages.end(),
                          [](const std::string& m) { return m.find("queued in") != std::string::npos; }),
            1)
      << "the same queue state is said once: " << said.AllMessages();
  EXPECT_TRUE(said.Said("barge: Slurm job 7 granted 2 node(s): n1 (10.0.0.1), n2 (10.0.0.2)")) << said.AllMessages();
  EXPECT_EQ(w.Events(), (std::vector<std::string>{"slurm_job: 7", "slurm_nodes: n1=10.0.0.1 n2=10.0.0.2"}));
  Result<JobRecord> job = w.world.ctx().store->GetJob("abcd1234");
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->status, JobStatus::kWaiting);

  // The nodes into the plan's facts, with the label the epilog finds.
  ASSERT_TRUE(w.allocation->Place(&w.world.planner()).ok());
  const cluster::PlanInput& input = w.world.input();
  EXPECT_EQ(w.world.plan().hosts[1].address, "10.0.0.2") << "planned at once";
  EXPECT_EQ(input.hosts[0].address, "10.0.0.1");
  EXPECT_EQ(input.hosts[0].vars.at("SLURM_NODE"), "n1");
  EXPECT_NE(std::find(input.extra_labels.begin(), input.extra_labels.end(),
                      std::make_pair(std::string(cluster::kSlurmJobLabel), std::string("7"))),
            input.extra_labels.end());
  EXPECT_TRUE(w.allocation->StepConnector() == nullptr) << "transport ssh: the hosts' own connector";
}

TEST(SlurmAllocation, TheQueueWatchDoesNotBlockTheLoopWhileSqueueHasNotAnswered) {
  SlurmWorld w;
  ASSERT_TRUE(w.allocation->Allocate().ok());
  w.slurm.squeue_hangs = true;
  std::optional<internal::OutsideEnd> ended;
  w.allocation->Watch(seconds(10), [&](internal::OutsideEnd e) { ended = std::move(e); });
  // A timer of the job's, due while the first squeue (at 10 s) is still
  // unanswered.
  bool fired = false;
  size_t asked_when_fired = 0;
  w.world.ctx().timers.Add(w.world.loop().Now() + seconds(15), [&] {
    fired = true;
    asked_when_fired = w.slurm.squeue_at.size();
  });
  ASSERT_TRUE(w.world.RunUntil([&] { return fired; }, seconds(60)));
  EXPECT_EQ(asked_when_fired, 1u);
  // Unanswered squeues end nothing; each look asks again.
  EXPECT_TRUE(w.world.RunUntil([&] { return w.slurm.squeue_at.size() >= 3; }, seconds(60)));
  EXPECT_FALSE(ended.has_value());
  w.allocation->StopWatching();
}

TEST(SlurmAllocation, TheWholeWaitInTheQueueRunsOnTheFakeClock) {
  SlurmWorld w("wait: 600s\n");
  w.slurm.grant_after = std::chrono::hours(1);
  const auto real = std::chrono::steady_clock::now();
  const auto virtual_began = w.world.loop().Now();
  Status granted = w.allocation->Allocate();
  EXPECT_EQ(granted.message(), "Slurm job 7 was still queued after 600 s (wait:); cancelled");
  EXPECT_GE(w.world.loop().Now() - virtual_began, seconds(600));
  EXPECT_LT(std::chrono::steady_clock::now() - real, seconds(10)) << "ten minutes of queue took real time";
  // squeue 2 s in, then every 3 s.
  ASSERT_GE(w.slurm.squeue_at.size(), 199u);
  EXPECT_EQ(w.slurm.squeue_at[0] - w.slurm.salloc_at, seconds(2));
  EXPECT_EQ(w.slurm.squeue_at[1] - w.slurm.squeue_at[0], seconds(3));
  EXPECT_EQ(w.Count("scancel 7"), 1);
  EXPECT_EQ(w.Events().back(), "slurm_released: scancel 7 (still queued after wait:)");
  // Cancelled already: the release at the job's end asks nothing more.
  EXPECT_TRUE(w.allocation->Release().ok());
  EXPECT_EQ(w.Count("scancel 7"), 1);
}

TEST(SlurmAllocation, AnInterruptWhileQueuedCancelsTheAllocation) {
  SlurmWorld w;
  w.slurm.grant_after = seconds(120);
  w.world.ctx().timers.Add(w.world.loop().Now() + seconds(5), [&] { ++w.world.ctx().interrupts; });
  EXPECT_EQ(w.allocation->Allocate().message(), "interrupted while queued in Slurm");
  EXPECT_EQ(w.Count("scancel 7"), 1);
  EXPECT_LT(w.slurm.scancel_at - w.slurm.salloc_at, seconds(6));
  EXPECT_EQ(w.Events().back(), "slurm_released: scancel 7 (interrupted while queued)");
}

TEST(SlurmAllocation, AnAllocationEndedUnderTheJobIsSeenOnceThenReleasedOnce) {
  SlurmWorld w;
  ASSERT_TRUE(w.allocation->Allocate().ok());
  w.slurm.running_squeues = 1;
  w.slurm.end_state = "TIMEOUT";
  std::vector<internal::OutsideEnd> ended;
  w.allocation->Watch(seconds(10), [&](internal::OutsideEnd e) { ended.push_back(std::move(e)); });
  w.world.RunUntil([] { return false; }, seconds(60));
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].reason, "Slurm ended allocation 7 (TIMEOUT)");
  EXPECT_TRUE(ended[0].timed_out);
  EXPECT_EQ(w.slurm.squeue_at.size(), 2u) << "no squeue after the end was seen";
  ASSERT_TRUE(w.allocation->Release().ok());
  ASSERT_TRUE(w.allocation->Release().ok());
  EXPECT_EQ(w.Count("scancel 7"), 1);
  EXPECT_EQ(w.slurm.lines.back(), "scancel 7");
  EXPECT_EQ(w.Events().back(), "slurm_released: scancel 7");
  EXPECT_TRUE(w.world.recorder().Said("barge: Slurm job 7 released"));
}

}  // namespace slurm_allocation_test
}  // namespace barge::runner
