#include "cluster/plan.h"

#include <gtest/gtest.h>

#include <map>

#include "container/create_body.h"
#include "container/docker_args.h"

namespace barge::cluster {
namespace {

std::map<std::string, std::string> EnvOf(const NodePlan& n) {
  return {n.container.env.begin(), n.container.env.end()};
}

Host MakeHost(const std::string& address, const std::string& internal = "") {
  Host h;
  h.address = address;
  h.internal_address = internal;
  return h;
}

PlanInput ThreeHosts() {
  PlanInput in;
  in.job_id = "a1b2c3d4";
  in.job_name = "ddp";
  in.image = "barge/torch:local";
  in.command = std::vector<std::string>{"python3", "train.py"};
  in.hosts = {MakeHost("203.0.113.10", "10.0.0.10"), MakeHost("203.0.113.11", "10.0.0.11"),
              MakeHost("203.0.113.12", "10.0.0.12")};
  return in;
}

TEST(Plan, TheFirstHostCarriesTheHeadAndWorkersFollowInInventoryOrder) {
  Result<Plan> plan = MakePlan(ThreeHosts());
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_EQ(plan->nodes.size(), 3u);
  EXPECT_EQ(plan->nodes[0].role, "head");
  EXPECT_EQ(plan->nodes[0].host_index, 0u);
  EXPECT_EQ(plan->nodes[1].role, "worker");
  EXPECT_EQ(plan->nodes[1].host_index, 1u);
  EXPECT_EQ(plan->nodes[2].rank, 2);
  EXPECT_EQ(plan->nodes[2].host_index, 2u);
  EXPECT_EQ(plan->nodes[1].container.name, "barge-ddp-a1b2c3d4-1");
}

TEST(Plan, LaunchStagesStartTheHeadGatedByItsReadinessThenEveryWorker) {
  PlanInput in = ThreeHosts();
  RoleSpec head;
  head.ready.kind = ReadinessProbe::Kind::kTcpPort;
  head.ready.tcp_port = 29500;
  in.roles[kHeadRole] = head;
  Result<Plan> plan = MakePlan(in);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_EQ(plan->stages.size(), 2u);
  EXPECT_EQ(plan->stages[0].name, "head");
  EXPECT_EQ(plan->stages[0].ranks, std::vector<int>{0});
  EXPECT_EQ(plan->stages[0].gate.kind, ReadinessProbe::Kind::kTcpPort);
  EXPECT_EQ(plan->stages[0].gate.tcp_port, 29500);
  EXPECT_EQ(plan->stages[1].name, "workers");
  EXPECT_EQ(plan->stages[1].ranks, (std::vector<int>{1, 2}));
  EXPECT_EQ(plan->stages[1].gate.kind, ReadinessProbe::Kind::kRunning);
}

TEST(Plan, APathPrefixThatDiffersByHostIsReplacedByEachHostsOwnInItsNodesVolumesAndRunOptions) {
  PlanInput in = ThreeHosts();
  in.host_path = "/tmp/barge-j.XXXXXXXXXXXX";
  in.container.volumes = {{"/tmp/barge-j.XXXXXXXXXXXX/workdir:/workspace", "/data:/data"}};
  in.container.run_options = {{"--env-file", "/tmp/barge-j.XXXXXXXXXXXX/secrets/.env"}};
  in.host_paths = {{0, "/tmp/barge-j.aaaaaaaaaaaa"}, {1, "/tmp/barge-j.bbbbbbbbbbbb"}};
  Result<Plan> plan = MakePlan(in);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  const auto& v0 = *plan->nodes[0].container.options.volumes;
  EXPECT_EQ(v0, (std::vector<std::string>{"/tmp/barge-j.aaaaaaaaaaaa/workdir:/workspace", "/data:/data"}));
  EXPECT_EQ((*plan->nodes[1].container.options.run_options)[1], "/tmp/barge-j.bbbbbbbbbbbb/secrets/.env");
  // A host whose name is not known yet keeps the shown one (barge plan).
  EXPECT_EQ((*plan->nodes[2].container.options.volumes)[0], "/tmp/barge-j.XXXXXXXXXXXX/workdir:/workspace");
}

TEST(Plan, HostNetworkNodesAreToldTheInterfaceOfTheirHostsAddressForNcclAndGlooUnlessTheJobSetsIt) {
  PlanInput in = ThreeHosts();
  in.container.network = "host";
  in.host_ifaces = {{0, "eth1"}, {1, ""}};
  Result<Plan> plan = MakePlan(in);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  // NCCL's exact-match form (a bare name matches every interface it
  // prefixes); Gloo takes the name.
  EXPECT_EQ(EnvOf(plan->nodes[0])["NCCL_SOCKET_IFNAME"], "=eth1");
  EXPECT_EQ(EnvOf(plan->nodes[0])["GLOO_SOCKET_IFNAME"], "eth1");
  // A host that could not tell: nothing set.
  EXPECT_EQ(EnvOf(plan->nodes[1]).count("NCCL_SOCKET_IFNAME"), 0u);
  EXPECT_EQ(EnvOf(plan->nodes[1]).count("GLOO_SOCKET_IFNAME"), 0u);
  // Not asked yet (barge plan): a placeholder.
  EXPECT_EQ(EnvOf(plan->nodes[2])["NCCL_SOCKET_IFNAME"], "=<interface of 203.0.113.12>");
  EXPECT_TRUE(plan->has_placeholders);
  // The job's own value wins.
  in.container.env = std::vector<std::pair<std::string, std::string>>{{"NCCL_SOCKET_IFNAME", "ib0"}};
  Result<Plan> own = MakePlan(in);
  ASSERT_TRUE(own.ok());
  EXPECT_EQ(EnvOf(own->nodes[0])["NCCL_SOCKET_IFNAME"], "ib0");
  EXPECT_EQ(EnvOf(own->nodes[0])["GLOO_SOCKET_IFNAME"], "eth1");
  // A container on its own network: none (its eth0 is the one).
  in.container.network.reset();
  in.container.env.reset();
  Result<Plan> bridged = MakePlan(in);
  ASSERT_TRUE(bridged.ok());
  EXPECT_EQ(EnvOf(bridged->nodes[0]).count("NCCL_SOCKET_IFNAME"), 0u);
}

// network: {rdma: auto}: a host with active HCAs gives its nodes the
// device directory, unlimited locked memory, IPC_LOCK and NCCL_IB_HCA naming
// exactly those HCAs, as docker arguments and as the Engine API's body; a
// host without any gets none of them; one not asked yet shows a placeholder.
TEST(Plan, RdmaHostsGiveTheirNodesTheDevicesMemlockIpcLockAndTheirExactHcas) {
  PlanInput in = ThreeHosts();
  in.rdma = true;
  in.host_rdma = {{0, {"mlx5_0", "mlx5_1"}}, {1, {}}};
  Result<Plan> plan = MakePlan(in);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(EnvOf(plan->nodes[0])["NCCL_IB_HCA"], "=mlx5_0,mlx5_1");
  const std::vector<std::string> args = container::RunArgs(plan->nodes[0].container);
  std::string line;
  for (const std::string& a : args) line += a + " ";
  EXPECT_NE(line.find("--cap-add IPC_LOCK "), std::string::npos) << line;
  EXPECT_NE(line.find("--ulimit memlock=-1 "), std::string::npos) << line;
  EXPECT_NE(line.find("--device /dev/infiniband "), std::string::npos) << line;
  Result<std::string> body = container::CreateBody(plan->nodes[0].container);
  ASSERT_TRUE(body.ok()) << body.status().message();
  EXPECT_NE(body->find(R"("CapAdd":["CAP_IPC_LOCK"])"), std::string::npos) << *body;
  EXPECT_NE(body->find(R"({"Hard":-1,"Name":"memlock","Soft":-1})"), std::string::npos) << *body;
  EXPECT_NE(body->find(R"("PathOnHost":"/dev/infiniband")"), std::string::npos) << *body;
  EXPECT_NE(body->find(R"("NCCL_IB_HCA==mlx5_0,mlx5_1")"), std::string::npos) << *body;
  // No HCA on host 1: sockets, nothing added.
  EXPECT_EQ(EnvOf(plan->nodes[1]).count("NCCL_IB_HCA"), 0u);
  EXPECT_FALSE(plan->nodes[1].container.options.devices.has_value());
  EXPECT_FALSE(plan->nodes[1].container.options.cap_add.has_value());
  EXPECT_FALSE(plan->nodes[1].container.options.ulimits.has_value());
  // Not asked yet (barge plan).
  EXPECT_EQ(EnvOf(plan->nodes[2])["NCCL_IB_HCA"], "=<active HCAs of 203.0.113.12>");
  EXPECT_TRUE(plan->has_placeholders);
  // The job's own NCCL_IB_HCA and memlock win; its devices are kept.
  in.container.env = std::vector<std::pair<std::string, std::string>>{{"NCCL_IB_HCA", "mlx5_1:1"}};
  in.container.ulimits = container::KeyValues{{"memlock", "1024"}};
  in.container.devices = std::vector<std::string>{"/dev/fuse"};
  Result<Plan> own = MakePlan(in);
  ASSERT_TRUE(own.ok());
  EXPECT_EQ(EnvOf(own->nodes[0])["NCCL_IB_HCA"], "mlx5_1:1");
  EXPECT_EQ(*own->nodes[0].container.options.ulimits, (container::KeyValues{{"memlock", "1024"}}));
  EXPECT_EQ(*own->nodes[0].container.options.devices, (std::vector<std::string>{"/dev/fuse", "/dev/infiniband"}));
  // Without network.rdma: nothing.
  in = ThreeHosts();
  in.host_rdma = {{0, {"mlx5_0"}}};
  Result<Plan> off = MakePlan(in);
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(EnvOf(off->nodes[0]).count("NCCL_IB_HCA"), 0u);
}

TEST(Plan, AJobOfOneNodeHasOnlyTheHeadStage) {
  PlanInput in = ThreeHosts();
  in.hosts.resize(1);
  Result<Plan> plan = MakePlan(in);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_EQ(plan->stages.size(), 1u);
  EXPECT_EQ(plan->stages[0].ranks, std::vector<int>{0});
}

TEST(Plan, AHostMarkedHeadGetsRankZero) {
  PlanInput in = ThreeHosts();
  in.hosts[2].role = "head";
  Result<Plan> plan = MakePlan(in);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->nodes[0].host_index, 2u);
  EXPECT_EQ(plan->nodes[1].host_index, 0u);
  EXPECT_EQ(plan->nodes[2].host_index, 1u);
  EXPECT_EQ(EnvOf(plan->nodes[1])["MASTER_ADDR"], "10.0.0.12");
}

TEST(Rendezvous, WorkersSeeTheHeadAddressAndTheirOwnRank) {
  Result<Plan> plan = MakePlan(ThreeHosts());
  ASSERT_TRUE(plan.ok());
  auto env = EnvOf(plan->nodes[2]);
  EXPECT_EQ(env["MASTER_ADDR"], "10.0.0.10");
  EXPECT_EQ(env["MASTER_PORT"], "29500");
  EXPECT_EQ(env["RANK"], "2");
  EXPECT_EQ(env["NODE_RANK"], "2");
  EXPECT_EQ(env["WORLD_SIZE"], "3");
  EXPECT_EQ(env["BARGE_ROLE"], "worker");
  EXPECT_EQ(env["BARGE_NODE_IPS"], "10.0.0.10,10.0.0.11,10.0.0.12");
  EXPECT_EQ(env["SKYPILOT_NODE_IPS"], "10.0.0.10\n10.0.0.11\n10.0.0.12");
  EXPECT_EQ(env["DSTACK_MASTER_NODE_IP"], "10.0.0.10");
  EXPECT_EQ(env["RAY_HEAD_IP"], "10.0.0.10");
  EXPECT_EQ(env["SM_HOSTS"], "[\"10.0.0.10\",\"10.0.0.11\",\"10.0.0.12\"]");
  EXPECT_EQ(env["SM_CURRENT_HOST"], "10.0.0.12");
  EXPECT_EQ(env["BARGE_GPUS_PER_NODE"], "0");
  EXPECT_EQ(env["BARGE_JOB_ID"], "a1b2c3d4");
}

TEST(Rendezvous, AddressesSettledAtRunTimeReplaceAliasesInEveryConvention) {
  PlanInput in = ThreeHosts();
  in.hosts = {MakeHost("gpu-1"), MakeHost("gpu-2"), MakeHost("gpu-3", "10.0.0.99")};
  in.reached_addresses = {{0, "10.0.0.10"}, {1, "10.0.0.11"}, {2, "10.9.9.9"}};
  Result<Plan> plan = MakePlan(in);
  ASSERT_TRUE(plan.ok());
  auto env = EnvOf(plan->nodes[1]);
  // The inventory's own internal_address wins over a settled one.
  EXPECT_EQ(env["MASTER_ADDR"], "10.0.0.10");
  EXPECT_EQ(env["BARGE_HEAD_ADDR"], "10.0.0.10");
  EXPECT_EQ(env["BARGE_NODE_IPS"], "10.0.0.10,10.0.0.11,10.0.0.99");
  EXPECT_EQ(env["SKYPILOT_NODE_IPS"], "10.0.0.10\n10.0.0.11\n10.0.0.99");
  EXPECT_EQ(env["SM_HOSTS"], "[\"10.0.0.10\",\"10.0.0.11\",\"10.0.0.99\"]");
  EXPECT_EQ(env["SM_CURRENT_HOST"], "10.0.0.11");
  // The hosts keep the user's names; the plan's copy carries the address.
  EXPECT_EQ(plan->hosts[0].address, "gpu-1");
  EXPECT_EQ(plan->hosts[0].internal_address, "10.0.0.10");
  EXPECT_EQ(plan->hosts[2].internal_address, "10.0.0.99");
}

TEST(Rendezvous, OnlyTheAskedConventionsAreInjected) {
  PlanInput in = ThreeHosts();
  in.rendezvous.conventions = {"torch"};
  Result<Plan> plan = MakePlan(in);
  ASSERT_TRUE(plan.ok());
  auto env = EnvOf(plan->nodes[0]);
  EXPECT_EQ(env.count("MASTER_ADDR"), 1u);
  EXPECT_EQ(env.count("BARGE_JOB_ID"), 0u);
  EXPECT_EQ(env.count("RAY_HEAD_IP"), 0u);
}

TEST(Rendezvous, UnknownGpuCountsArePlaceholdersUntilAHostReportsThem) {
  PlanInput in = ThreeHosts();
  in.container.gpus = "all";
  Result<Plan> plan = MakePlan(in);
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->has_placeholders);
  EXPECT_EQ(EnvOf(plan->nodes[1])["BARGE_GPUS_PER_NODE"], "<gpus of 203.0.113.10>");
  in.detected_gpus = {{0, 8}, {1, 8}, {2, 8}};
  plan = MakePlan(in);
  ASSERT_TRUE(plan.ok());
  EXPECT_FALSE(plan->has_placeholders);
  EXPECT_EQ(EnvOf(plan->nodes[1])["DSTACK_GPUS_PER_NODE"], "8");
  EXPECT_EQ(EnvOf(plan->nodes[1])["DSTACK_GPUS_NUM"], "24");
}

TEST(Plan, RoleAndHostBlocksLayerOverTheJobWideContainer) {
  PlanInput in = ThreeHosts();
  in.container.shm_size = "1g";
  in.container.env = container::KeyValues{{"EPOCHS", "3"}, {"MASTER_PORT", "1234"}};
  RoleSpec head;
  head.container.shm_size = "20g";
  head.command = std::vector<std::string>{"python3", "head.py"};
  in.roles["head"] = head;
  in.hosts[2].container.shm_size = "4g";
  Result<Plan> plan = MakePlan(in);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->nodes[0].container.options.shm_size, "20g");
  EXPECT_EQ(plan->nodes[1].container.options.shm_size, "1g");
  EXPECT_EQ(plan->nodes[2].container.options.shm_size, "4g");
  EXPECT_EQ((*plan->nodes[0].container.command)[1], "head.py");
  EXPECT_EQ((*plan->nodes[1].container.command)[1], "train.py");
  // The user's env wins over a rendezvous value of the same name.
  EXPECT_EQ(EnvOf(plan->nodes[1])["MASTER_PORT"], "1234");
  EXPECT_EQ(EnvOf(plan->nodes[1])["EPOCHS"], "3");
}

TEST(Plan, WorkerCountLimitsTheNodesAndTooManyIsAnError) {
  PlanInput in = ThreeHosts();
  RoleSpec worker;
  worker.count = 1;
  in.roles["worker"] = worker;
  Result<Plan> plan = MakePlan(in);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->nodes.size(), 2u);
  EXPECT_EQ(plan->used_hosts, (std::vector<size_t>{0, 1}));
  in.roles["worker"].count = 3;
  plan = MakePlan(in);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("only 2 nodes"), std::string::npos);
}

TEST(Plan, ALocalHostCanCarrySeveralNodes) {
  PlanInput in;
  in.job_id = "x";
  in.job_name = "local";
  in.image = "img";
  Host local = MakeHost("local");
  local.nodes = 3;
  in.hosts = {local};
  Result<Plan> plan = MakePlan(in);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->nodes.size(), 3u);
  EXPECT_EQ(plan->nodes[2].slot, 2);
  EXPECT_EQ(EnvOf(plan->nodes[2])["MASTER_ADDR"], "127.0.0.1");
  EXPECT_EQ(EnvOf(plan->nodes[2])["NNODES"], "3");
}

TEST(Plan, AJobWithoutAnImageIsRefused) {
  PlanInput in = ThreeHosts();
  in.image.clear();
  EXPECT_FALSE(MakePlan(in).ok());
}


// GPU slicing (cluster/gpu_slices.h) as the plan applies it.
PlanInput EightGpuHostWithFourNodes() {
  PlanInput in;
  in.job_id = "g1";
  in.job_name = "sliced";
  in.image = "img";
  Host h = MakeHost("10.0.0.5");
  h.gpus = 8;
  h.nodes = 4;
  in.hosts = {h};
  in.container.gpus = "2";
  return in;
}

TEST(GpuSlicing, FourNodesAskingForTwoOnAnEightGpuHostGetFourDisjointDeviceLists) {
  Result<Plan> plan = MakePlan(EightGpuHostWithFourNodes());
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_EQ(plan->nodes.size(), 4u);
  const char* expected[] = {"\"device=0,1\"", "\"device=2,3\"", "\"device=4,5\"", "\"device=6,7\""};
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(plan->nodes[r].container.options.gpus, expected[r]) << "rank " << r;
    EXPECT_EQ(plan->nodes[r].gpu_devices, (std::vector<int>{2 * r, 2 * r + 1}));
  }
}

TEST(GpuSlicing, TheGpuEnvCountsTheSliceAndNeverNamesHostIndices) {
  Result<Plan> plan = MakePlan(EightGpuHostWithFourNodes());
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_FALSE(plan->has_placeholders);
  for (const NodePlan& n : plan->nodes) {
    auto env = EnvOf(n);
    EXPECT_EQ(env["BARGE_GPUS_PER_NODE"], "2");
    EXPECT_EQ(env["SKYPILOT_NUM_GPUS_PER_NODE"], "2");
    EXPECT_EQ(env["DSTACK_GPUS_PER_NODE"], "2");
    EXPECT_EQ(env["SM_NUM_GPUS"], "2");
    EXPECT_EQ(env["DSTACK_GPUS_NUM"], "8") << "4 nodes of 2, not 4 x the host's 8";
    EXPECT_EQ(env.count("CUDA_VISIBLE_DEVICES"), 0u);
    EXPECT_EQ(env.count("NVIDIA_VISIBLE_DEVICES"), 0u);
  }
}

TEST(GpuSlicing, IndicesHeldByOtherJobsAreSkipped) {
  PlanInput in = EightGpuHostWithFourNodes();
  in.hosts[0].nodes = 2;
  in.held_gpus[0] = {0, 1, 4};
  Result<Plan> plan = MakePlan(in);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->nodes[0].container.options.gpus, "\"device=2,3\"");
  EXPECT_EQ(plan->nodes[1].container.options.gpus, "\"device=5,6\"");
}

TEST(GpuSlicing, TooFewFreeGpusFailsThePlanNamingTheHost) {
  PlanInput in = EightGpuHostWithFourNodes();
  in.held_gpus[0] = {7};
  Result<Plan> plan = MakePlan(in);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().message(),
            "not enough free GPUs on 10.0.0.5: its nodes ask for 8 (node 0: 2, node 1: 2, node 2: "
            "2, node 3: 2), but only 7 of its 8 are free (0-6); held by other jobs: 7");
}

TEST(GpuSlicing, AHostWithoutAGpuCountKeepsDockersCount) {
  PlanInput in = EightGpuHostWithFourNodes();
  in.hosts[0].gpus.reset();
  in.detected_gpus = {{0, 8}};
  Result<Plan> plan = MakePlan(in);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->nodes[1].container.options.gpus, "2");
  EXPECT_TRUE(plan->nodes[1].gpu_devices.empty());
}

TEST(GpuSlicing, AllAndExplicitDeviceListsAreLeftAsWrittenAndListedDevicesAvoided) {
  PlanInput in = EightGpuHostWithFourNodes();
  in.hosts[0].nodes = 3;
  RoleSpec head;
  head.container.gpus = "\"device=0,1\"";
  in.roles[kHeadRole] = head;
  Result<Plan> plan = MakePlan(in);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->nodes[0].container.options.gpus, "\"device=0,1\"");
  EXPECT_TRUE(plan->nodes[0].gpu_devices.empty());
  EXPECT_EQ(plan->nodes[1].container.options.gpus, "\"device=2,3\"");
  EXPECT_EQ(plan->nodes[2].container.options.gpus, "\"device=4,5\"");
  in.roles[kHeadRole].container.gpus = "all";
  plan = MakePlan(in);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->nodes[0].container.options.gpus, "all");
  EXPECT_EQ(plan->nodes[1].container.options.gpus, "\"device=0,1\"");
}

TEST(GpuSlicing, NodesOnDifferentHostsAreSlicedPerHost) {
  PlanInput in = EightGpuHostWithFourNodes();
  in.hosts[0].nodes = 1;
  Host b = MakeHost("10.0.0.6");
  b.gpus = 4;
  b.nodes = 2;
  in.hosts.push_back(b);
  Result<Plan> plan = MakePlan(in);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(plan->nodes[0].container.options.gpus, "\"device=0,1\"");
  EXPECT_EQ(plan->nodes[1].container.options.gpus, "\"device=0,1\"");
  EXPECT_EQ(plan->nodes[2].container.options.gpus, "\"device=2,3\"");
  EXPECT_EQ(EnvOf(plan->nodes[2])["DSTACK_GPUS_NUM"], "6");
}

TEST(GpuSlicing, MpiSlotsAreTheSliceNotTheHostsGpus) {
  PlanInput in = EightGpuHostWithFourNodes();
  in.mpi = MpiOptions{};
  Result<Plan> plan = MakePlan(in);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  for (const MpiNode& m : plan->mpi_nodes) EXPECT_EQ(m.slots, "2");
}

}  // namespace
}  // namespace barge::cluster

namespace barge::cluster {
namespace {

TEST(Plan, ExtraLabelsFollowBargesOwnOnEveryNode) {
  PlanInput in = ThreeHosts();
  in.extra_labels = {{kSlurmJobLabel, "42"}};
  Result<Plan> plan = MakePlan(in);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  for (const NodePlan& n : plan->nodes) {
    ASSERT_EQ(n.container.labels.size(), 4u);
    EXPECT_EQ(n.container.labels[0].first, kJobLabel);
    EXPECT_EQ(n.container.labels[3], (std::pair<std::string, std::string>{"barge.slurm_job", "42"}));
  }
}

}  // namespace
}  // namespace barge::cluster
