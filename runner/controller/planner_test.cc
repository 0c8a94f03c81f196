// Planner on its own (planner.h): facts in, one plan per change of facts;
// the facts from a job file (tests/support/part_world.h).
#include "runner/controller/planner.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "tests/support/part_world.h"

namespace barge::runner {
namespace planner_test {

// The node's env as a map.
std::map<std::string, std::string> EnvOf(const cluster::NodePlan& n) {
  std::map<std::string, std::string> env;
  for (const auto& [k, v] : n.container.env) env[k] = v;
  return env;
}

struct PlannerWorld {
  explicit PlannerWorld(const std::string& extra = "", const std::string& hosts = "[h1, h2]")
      : world(PartWorld::Yaml(extra, hosts)), planner(world.input()) {}
  PartWorld world;  // the job file's facts (its own planner is not used)
  internal::Planner planner;
};

TEST(Planner, StartPlansTheSpecsFactsAndUpdateWithoutAChangeMakesNoPlan) {
  PlannerWorld w;
  ASSERT_TRUE(w.planner.Start().ok());
  EXPECT_EQ(w.planner.plans_made(), 1);
  ASSERT_EQ(w.planner.plan().nodes.size(), 2u);
  EXPECT_EQ(w.planner.plan().job_id, "abcd1234");
  ASSERT_TRUE(w.planner.Update().ok());
  EXPECT_EQ(w.planner.plans_made(), 1);
  // Facts already known are no change.
  w.planner.Restarted(0);
  w.planner.JobDir(0, "/tmp/barge-job");
  ASSERT_TRUE(w.planner.Update().ok());
  EXPECT_EQ(w.planner.plans_made(), 2);
  w.planner.JobDir(0, "/tmp/barge-job");
  ASSERT_TRUE(w.planner.Update().ok());
  EXPECT_EQ(w.planner.plans_made(), 2);
}

TEST(Planner, ManyFactsMakeOnePlanAtTheNextUpdate) {
  PlannerWorld w("container: {network: host}\nnetwork: {rdma: auto}\n");
  ASSERT_TRUE(w.planner.Start().ok());
  w.planner.Interface(0, "eth1");
  w.planner.Interface(1, "");
  w.planner.DetectedGpus(0, 4);
  w.planner.Rdma(0, {"mlx5_0"});
  w.planner.Restarted(2);
  EXPECT_NE(EnvOf(w.planner.plan().nodes[0]).at("NCCL_SOCKET_IFNAME"), "=eth1") << "planned before Update";
  ASSERT_TRUE(w.planner.Update().ok());
  EXPECT_EQ(w.planner.plans_made(), 2);
  const auto head = EnvOf(w.planner.plan().nodes[0]);
  EXPECT_EQ(head.at("NCCL_SOCKET_IFNAME"), "=eth1");
  EXPECT_EQ(head.at("BARGE_RESTART_COUNT"), "2");
  EXPECT_EQ(EnvOf(w.planner.plan().nodes[1]).count("NCCL_SOCKET_IFNAME"), 0u);
  EXPECT_EQ(w.planner.facts().detected_gpus.at(0), 4);
  EXPECT_EQ(w.planner.facts().host_rdma.at(0), std::vector<std::string>{"mlx5_0"});
}

TEST(Planner, HeldGpusArePlannedAtOnceAndRefusedWhenTheNodesNoLongerFit) {
  PlannerWorld w("container: {gpus: 2}\n", "[{address: h1, gpus: 4}]");
  ASSERT_TRUE(w.planner.Start().ok());
  EXPECT_EQ(w.planner.plan().nodes[0].gpu_devices, (std::vector<int>{0, 1}));
  ASSERT_TRUE(w.planner.HeldGpus(0, {0, 2}).ok());
  EXPECT_EQ(w.planner.plans_made(), 2);
  EXPECT_EQ(w.planner.plan().nodes[0].gpu_devices, (std::vector<int>{1, 3}));
  // Three of four held: the node's two do not fit; facts and plan stay.
  Status s = w.planner.HeldGpus(0, {0, 1, 2});
  ASSERT_FALSE(s.ok());
  EXPECT_FALSE(s.message().empty());
  EXPECT_EQ(w.planner.facts().held_gpus.at(0), (std::set<int>{0, 2}));
  EXPECT_EQ(w.planner.plan().nodes[0].gpu_devices, (std::vector<int>{1, 3}));
  EXPECT_EQ(w.planner.plans_made(), 2);
}

TEST(Planner, AReachedAddressIsInThePlansHostAtOnceAndInTheEnvAfterUpdate) {
  PlannerWorld w;
  ASSERT_TRUE(w.planner.Start().ok());
  w.planner.Reached(0, "10.1.0.1");
  EXPECT_EQ(w.planner.plan().hosts[0].internal_address, "10.1.0.1");
  EXPECT_NE(EnvOf(w.planner.plan().nodes[1]).at("MASTER_ADDR"), "10.1.0.1");
  ASSERT_TRUE(w.planner.Update().ok());
  EXPECT_EQ(EnvOf(w.planner.plan().nodes[1]).at("MASTER_ADDR"), "10.1.0.1");
  w.planner.Unreached(0);
  EXPECT_EQ(w.planner.facts().reached_addresses.count(0), 0u);
  w.planner.Unreached(0);  // not known: no change
  ASSERT_TRUE(w.planner.Update().ok());
  EXPECT_EQ(w.planner.plans_made(), 3);
}

TEST(Planner, AReplacedHostIsInThePlanAtOnceAndForgetsItsHeldGpus) {
  PlannerWorld w("container: {gpus: 1}\n", "[{address: h1, gpus: 2}, {address: h2, gpus: 2}]");
  ASSERT_TRUE(w.planner.Start().ok());
  ASSERT_TRUE(w.planner.HeldGpus(1, {0}).ok());
  cluster::Host spare = w.planner.facts().hosts[1];
  spare.address = "spare1";
  w.planner.ReplaceHost(1, spare);
  EXPECT_EQ(w.planner.plan().hosts[1].address, "spare1");
  EXPECT_EQ(w.planner.facts().hosts[1].address, "spare1");
  EXPECT_EQ(w.planner.facts().held_gpus.count(1), 0u);
  ASSERT_TRUE(w.planner.Update().ok());
  EXPECT_EQ(w.planner.plan().nodes[1].gpu_devices, std::vector<int>{0});
}

TEST(Planner, APlanInUseStaysValidAfterTheNextAndOneNotInUseIsDropped) {
  PlannerWorld w;
  ASSERT_TRUE(w.planner.Start().ok());
  w.planner.Restarted(1);
  ASSERT_TRUE(w.planner.Update().ok());
  EXPECT_EQ(w.planner.plans_kept(), 0u) << "no node pointed into the first plan";
  w.planner.InUse();
  const cluster::NodePlan* before = &w.planner.plan().nodes[1];
  const std::string name = before->container.name;
  w.planner.Restarted(2);
  ASSERT_TRUE(w.planner.Update().ok());
  EXPECT_EQ(w.planner.plans_kept(), 1u);
  EXPECT_NE(&w.planner.plan().nodes[1], before);
  EXPECT_EQ(before->container.name, name);  // the old node's plan is still there
  EXPECT_EQ(EnvOf(*before).at("BARGE_RESTART_COUNT"), "1");
  EXPECT_EQ(EnvOf(w.planner.plan().nodes[1]).at("BARGE_RESTART_COUNT"), "2");
}

TEST(Planner, UseHostsSetsTheHostsAVerbWorksOn) {
  PlannerWorld w("", "[h1, h2, h3]");
  ASSERT_TRUE(w.planner.Start().ok());
  EXPECT_EQ(w.planner.plan().used_hosts, (std::vector<size_t>{0, 1, 2}));
  w.planner.UseHosts({2});
  EXPECT_EQ(w.planner.plan().used_hosts, std::vector<size_t>{2});
}

}  // namespace planner_test
}  // namespace barge::runner
