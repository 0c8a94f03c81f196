// A slurm: job placed on the nodes Slurm granted (runner/controller/slurm_run.h):
// whole nodes as the job file says, shared nodes with exactly the
// allocation's share as each container's Docker limits. And the job's life
// around the allocation (the Controller with its SlurmAllocation part) on a
// scripted Slurm and fake hosts, on the job's one virtual loop: the wait:
// bound in Slurm's queue, the squeue watch every 10 s while the head runs,
// scancel however the job ends.
#include "runner/console/exit_codes.h"
#include "runner/controller/slurm_run.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cluster/plan.h"
#include "container/docker_args.h"
#include "runner/controller/controller.h"
#include "runner/controller/entry_points.h"
#include "runner/controller/slurm_allocation.h"
#include "runner/jobfile/job_file.h"
#include "runner/remote/command_group.h"
#include "tests/support/fake_hosts.h"
#include "tests/support/fake_slurm.h"

namespace barge::runner {
namespace {

JobSpec Spec(const std::string& text) {
  LoadedJob job = ParseJobText(text, "job.yaml", "/tmp");
  for (const JobFileError& e : job.errors) ADD_FAILURE() << e.ToString();
  return job.spec.value_or(JobSpec{});
}

SlurmNode Node(std::string name, std::string address, std::vector<int> gpus, int cpus, long long mem_mb) {
  SlurmNode n;
  n.name = std::move(name);
  n.address = std::move(address);
  n.gpus = std::move(gpus);
  n.cpus = cpus;
  n.mem_mb = mem_mb;
  return n;
}

// The docker run arguments of every node of `spec` placed on `nodes`.
std::vector<container::Argv> RunLines(const JobSpec& spec, const std::vector<SlurmNode>& nodes) {
  cluster::PlanInput input = MakePlanInput(spec, "a1b2c3d4");
  Status placed = PlaceOnSlurmNodes(*spec.slurm, nodes, &input);
  EXPECT_TRUE(placed.ok()) << placed.message();
  Result<cluster::Plan> plan = cluster::MakePlan(input);
  EXPECT_TRUE(plan.ok()) << plan.status().message();
  std::vector<container::Argv> out;
  if (plan.ok()) {
    for (const cluster::NodePlan& n : plan->nodes) out.push_back(container::RunArgs(n.container));
  }
  return out;
}

// The value after `flag` in `argv`, or "" when the flag is absent.
std::string After(const container::Argv& argv, const std::string& flag) {
  auto it = std::find(argv.begin(), argv.end(), flag);
  return it == argv.end() || it + 1 == argv.end() ? "" : *(it + 1);
}

TEST(SlurmPlacement, HostNIsNodeNAtItsNodeAddrAndTheCountsMustAgree) {
  const JobSpec spec = Spec("name: t\nimage: busybox\nslurm: {nodes: 2, time: 1h}\n");
  ASSERT_EQ(spec.hosts.size(), 2u);
  cluster::PlanInput input = MakePlanInput(spec, "a1b2c3d4");
  ASSERT_TRUE(
      PlaceOnSlurmNodes(*spec.slurm, {Node("h1", "10.0.0.1", {}, 2, 0), Node("h2", "10.0.0.2", {}, 2, 0)}, &input)
          .ok());
  EXPECT_EQ(input.hosts[1].address, "10.0.0.2");
  EXPECT_EQ(input.hosts[1].internal_address, "10.0.0.2");
  EXPECT_EQ(input.hosts[1].vars.at("SLURM_NODE"), "h2");
  EXPECT_NE(spec.hosts[1].address, "10.0.0.2") << "the validated spec is never edited";
  cluster::PlanInput again = MakePlanInput(spec, "a1b2c3d4");
  EXPECT_EQ(PlaceOnSlurmNodes(*spec.slurm, {Node("h1", "10.0.0.1", {}, 2, 0)}, &again).message(),
            "Slurm gave 1 node(s), the job asked for 2");
  EXPECT_EQ(again.hosts[0].address, spec.hosts[0].address) << "a failed placement changes nothing";
}

TEST(SlurmPlacement, WholeNodesKeepTheJobsOwnContainerOptions) {
  const std::vector<container::Argv> lines =
      RunLines(Spec("name: t\nimage: busybox\ncontainer: {gpus: all, memory: 4g}\n"
                    "slurm: {nodes: 1, time: 1h, gpus_per_node: 2}\n"),
               {Node("h1", "10.0.0.1", {0, 1}, 64, 0)});
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(After(lines[0], "--gpus"), "all");
  EXPECT_EQ(After(lines[0], "--memory"), "4g");
  EXPECT_EQ(After(lines[0], "--cpus"), "");
}

TEST(SlurmPlacement, ASharedNodesContainerGetsExactlyTheAllocationsGpusCpusAndMemory) {
  const std::string text =
      "name: t\nimage: busybox\ncontainer: {gpus: all, memory: 64g, cpus: 32}\n"
      "roles: {worker: {container: {gpus: 8}}}\n"
      "slurm: {nodes: 3, time: 1h, exclusive: false, gpus_per_node: 2, cpus_per_node: 4, mem_per_node: 3g}\n";
  const std::vector<container::Argv> lines =
      RunLines(Spec(text), {Node("n1", "10.0.0.1", {1, 3}, 4, 2048), Node("n2", "10.0.0.2", {0, 5}, 4, 0),
                            Node("n3", "10.0.0.3", {}, 2, 0)});
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(After(lines[0], "--gpus"), "\"device=1,3\"");
  EXPECT_EQ(After(lines[0], "--cpus"), "4");
  EXPECT_EQ(After(lines[0], "--memory"), "2048m") << "Slurm's Mem= wins";
  EXPECT_EQ(After(lines[1], "--gpus"), "\"device=0,5\"") << "the worker's gpus: 8 does not widen it";
  EXPECT_EQ(After(lines[1], "--memory"), "3g") << "no Mem= from Slurm: the job's mem_per_node";
  EXPECT_EQ(After(lines[2], "--gpus"), "") << "a node Slurm gave no GPUs gets none, whatever gpus: says";
  EXPECT_EQ(After(lines[2], "--cpus"), "2");
}

TEST(SlurmPlacement, TheNodesEventKeepsNamesAndAddressesInOrder) {
  const std::vector<SlurmNode> nodes = {Node("h1", "10.77.0.2", {0}, 1, 0), Node("h2", "10.77.0.3", {}, 1, 0)};
  EXPECT_EQ(FormatSlurmNodes(nodes), "h1=10.77.0.2 h2=10.77.0.3");
  Result<std::vector<SlurmNode>> back = ParseSlurmNodes(FormatSlurmNodes(nodes));
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[1].name, "h2");
  EXPECT_EQ((*back)[1].address, "10.77.0.3");
  EXPECT_FALSE(ParseSlurmNodes("h1").ok());
}

using std::chrono::milliseconds;
using std::chrono::seconds;

// What the controller said, one line each.
class Said : public JobObserver {
 public:
  void Message(std::string_view line) override { text += std::string(line) + "\n"; }
  std::string text;
};

// A slurm: job's Controller on `slurm_` and fake hosts, on one virtual loop.
class SlurmJobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    state_ = std::filesystem::temp_directory_path() /
             ("barge-slurm-run-test-" + std::to_string(getpid()) + "-" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(state_);
    std::filesystem::create_directories(state_);
  }
  void TearDown() override { std::filesystem::remove_all(state_); }

  // Runs a 2-node slurm: job with `extra` keys; what barge said (the
  // controller to its observer) goes to said_.
  int Run(const std::string& extra) {
    JobSpec spec = Spec("name: fake\nimage: img\ncommand: [train]\nslurm: {nodes: 2, time: 1h}\n"
                        "ssh: {dead_after: 1s, engine_timeout: 1s, engine_misses: 2}\nstop_grace: 1s\n" +
                        extra);
    cluster::PlanInput input = MakePlanInput(spec, "abcd1234");
    ControllerOptions options;
    options.state_dir = state_.string();
    options.echo = false;
    options.connect_slurm_submit = [this](ssh::EventLoop* loop) -> Result<std::unique_ptr<ssh::Executor>> {
      EXPECT_EQ(loop, &loop_) << "Slurm's commands run on the job's own loop";
      return slurm_.On(loop);
    };
    internal::Controller controller(spec, input, options, &loop_, &fake_, &observer_);
    const int code = controller.Run();
    // The job ran on hosts: a command reached one of them.
    ran_ = !fake_.all_lines().empty();
    said_ = observer_.text;
    return code;
  }
  bool NothingLeft() {
    return fake_.host("10.0.0.1").containers().empty() && fake_.host("10.0.0.2").containers().empty();
  }

  std::filesystem::path state_;
  ssh::EventLoop loop_{ssh::EventLoop::TimeSource::kVirtual};
  FakeConnector fake_{&loop_};
  Said observer_;
  FakeSlurm slurm_;
  bool ran_ = false;
  std::string said_;
};

TEST_F(SlurmJobTest, AJobStillQueuedInSlurmAfterItsWaitIsCancelledAndFailsWithoutRunning) {
  slurm_.grant_after = seconds(120);
  EXPECT_EQ(Run("wait: 30s\n"), kExitBargeFailure) << said_;
  EXPECT_NE(said_.find("Slurm job 7 was still queued after 30 s (wait:); cancelled"), std::string::npos) << said_;
  EXPECT_NE(said_.find("queued in Slurm: Priority (Slurm job 7)"), std::string::npos) << said_;
  EXPECT_FALSE(ran_);
  ASSERT_EQ(std::count(slurm_.lines.begin(), slurm_.lines.end(), "scancel 7"), 1) << said_;
  // Cancelled once past wait: (the queue is looked at every 3 s and the
  // bound every 0.2 s of the job's loop), not before.
  EXPECT_GE(slurm_.scancel_at - slurm_.salloc_at, seconds(30));
  EXPECT_LE(slurm_.scancel_at - slurm_.salloc_at, seconds(31));
}

TEST_F(SlurmJobTest, WhileTheHeadRunsSqueueIsAskedEvery10SecondsAndAnAllocationSlurmEndedStopsTheJob) {
  slurm_.clock = &loop_;
  slurm_.running_squeues = 2;
  slurm_.on_scancel = [this] { EXPECT_TRUE(NothingLeft()) << "scancel before the containers were removed"; };
  EXPECT_EQ(Run(""), kExitBargeFailure) << said_;
  EXPECT_EQ(internal::kSlurmWatchEvery, seconds(10));
  ASSERT_EQ(slurm_.squeue_at.size(), 3u) << said_;
  EXPECT_EQ(slurm_.squeue_at[1] - slurm_.squeue_at[0], seconds(10));
  EXPECT_EQ(slurm_.squeue_at[2] - slurm_.squeue_at[1], seconds(10));
  EXPECT_TRUE(NothingLeft());
  EXPECT_EQ(slurm_.lines.back(), "scancel 7");
  EXPECT_NE(said_.find("Slurm ended allocation 7 (CANCELLED): stopping the job"), std::string::npos) << said_;
}

TEST_F(SlurmJobTest, AnAllocationThatReachedItsTimeLimitEndsTheJobAsTimedOut) {
  slurm_.running_squeues = 0;
  slurm_.end_state = "TIMEOUT";
  EXPECT_EQ(Run(""), kExitTimedOut) << said_;
  EXPECT_NE(said_.find("Slurm ended allocation 7 (TIMEOUT): stopping the job"), std::string::npos) << said_;
}

TEST_F(SlurmJobTest, AFailedHeadsAllocationIsCancelledOnceItsContainersAreGone) {
  fake_.SetNode(0, FakeNode{seconds(5), 3});
  bool left_nothing = false;
  slurm_.on_scancel = [&] { left_nothing = NothingLeft(); };
  EXPECT_EQ(Run(""), 3) << said_;
  EXPECT_EQ(std::count(slurm_.lines.begin(), slurm_.lines.end(), "scancel 7"), 1) << said_;
  EXPECT_EQ(slurm_.lines.back(), "scancel 7");
  EXPECT_TRUE(left_nothing) << "scancel before the containers were removed";
  EXPECT_EQ(fake_.host("10.0.0.1").lines().empty(), false);
  EXPECT_NE(said_.find("Slurm job 7 released"), std::string::npos) << said_;
}

// Issue #40 (item 7): what Slurm's commands print on the submit host is
// read up to CommandGroup::kMaxOutputBytes, not whole: an answer past it
// fails the job naming the stream, and the allocation is released.
TEST_F(SlurmJobTest, AScontrolAnswerPastTheBoundFailsTheJobNamingTheStreamAndReleasesTheAllocation) {
  slurm_.show_job_padding = CommandGroup::kMaxOutputBytes + 1;
  EXPECT_EQ(Run(""), kExitBargeFailure) << said_.substr(0, 2000);
  EXPECT_FALSE(ran_);
  EXPECT_NE(said_.find("its stdout passed the " + std::to_string(CommandGroup::kMaxOutputBytes) +
                       " bytes barge reads from a host command"),
            std::string::npos)
      << said_.substr(0, 2000);
  EXPECT_LT(said_.size(), size_t{1} << 20) << "the answer itself was repeated";
  EXPECT_EQ(std::count(slurm_.lines.begin(), slurm_.lines.end(), "scancel 7"), 1);
}

TEST_F(SlurmJobTest, SallocWritingPastTheBoundWhileQueuedIsCancelledAndTheJobFails) {
  slurm_.grant_after = seconds(120);
  slurm_.salloc_padding = CommandGroup::kMaxOutputBytes + 1;
  EXPECT_EQ(Run(""), kExitBargeFailure) << said_.substr(0, 2000);
  EXPECT_FALSE(ran_);
  EXPECT_NE(said_.find("wrote more than " + std::to_string(CommandGroup::kMaxOutputBytes) + " bytes"),
            std::string::npos)
      << said_.substr(0, 2000);
  EXPECT_EQ(std::count(slurm_.lines.begin(), slurm_.lines.end(), "scancel 7"), 1) << said_.substr(0, 2000);
  // Cancelled at the first poll after the flood, not at the grant.
  EXPECT_LT(slurm_.scancel_at - slurm_.salloc_at, seconds(5));
}

}  // namespace
}  // namespace barge::runner
