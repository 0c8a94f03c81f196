// A slurm: job placed on the nodes Slurm granted (runner/controller/slurm_run.h):
// whole nodes as the job file says, shared nodes with exactly the
// allocation's share as each container's Docker limits.
#include "runner/controller/slurm_run.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cluster/plan.h"
#include "container/docker_args.h"
#include "runner/controller/entry_points.h"
#include "runner/jobfile/job_file.h"

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
std::vector<container::Argv> RunLines(JobSpec spec, const std::vector<SlurmNode>& nodes) {
  Status placed = PlaceOnSlurmNodes(spec, nodes);
  EXPECT_TRUE(placed.ok()) << placed.message();
  Result<cluster::Plan> plan = cluster::MakePlan(MakePlanInput(spec, "a1b2c3d4"));
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
  JobSpec spec = Spec("name: t\nimage: busybox\nslurm: {nodes: 2, time: 1h}\n");
  ASSERT_EQ(spec.hosts.size(), 2u);
  ASSERT_TRUE(PlaceOnSlurmNodes(spec, {Node("h1", "10.0.0.1", {}, 2, 0), Node("h2", "10.0.0.2", {}, 2, 0)}).ok());
  EXPECT_EQ(spec.hosts[1].address, "10.0.0.2");
  EXPECT_EQ(spec.hosts[1].internal_address, "10.0.0.2");
  EXPECT_EQ(spec.hosts[1].vars.at("SLURM_NODE"), "h2");
  JobSpec again = Spec("name: t\nimage: busybox\nslurm: {nodes: 2, time: 1h}\n");
  EXPECT_EQ(PlaceOnSlurmNodes(again, {Node("h1", "10.0.0.1", {}, 2, 0)}).message(),
            "Slurm gave 1 node(s), the job asked for 2");
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

}  // namespace
}  // namespace barge::runner
