// Tests of top's parsing of docker stats and nvidia-smi output, its GPU
// selection per node, and its table and JSON.
#include "runner/remote/stats.h"

#include <gtest/gtest.h>

namespace barge::runner {
namespace {

TEST(DockerSize, ReadsBinaryAndDecimalUnitsAsDockerPrintsThem) {
  EXPECT_EQ(ParseDockerSize("0B"), 0u);
  EXPECT_EQ(ParseDockerSize("1.5GiB"), 1610612736u);
  EXPECT_EQ(ParseDockerSize("512MiB"), 536870912u);
  EXPECT_EQ(ParseDockerSize("12.3kB"), 12300u);
  EXPECT_EQ(ParseDockerSize("2MB"), 2000000u);
  EXPECT_FALSE(ParseDockerSize("lots").has_value());
  EXPECT_FALSE(ParseDockerSize("12 parsecs").has_value());
}

TEST(DockerStats, ParsesEveryContainerLineIntoCpuMemoryAndNetwork) {
  const std::string out =
      R"({"BlockIO":"0B / 0B","CPUPerc":"99.87%","Container":"a","ID":"a","MemPerc":"0.1%","MemUsage":"10MiB / 1GiB","Name":"barge-x-0","NetIO":"1.5kB / 648B","PIDs":"2"})"
      "\n"
      R"({"BlockIO":"0B / 0B","CPUPerc":"0.00%","Container":"b","ID":"b","MemPerc":"0.0%","MemUsage":"512KiB / 15.5GiB","Name":"barge-x-1","NetIO":"0B / 0B","PIDs":"1"})"
      "\n";
  Result<std::vector<ContainerStats>> s = ParseDockerStats(out);
  ASSERT_TRUE(s.ok()) << s.status().message();
  ASSERT_EQ(s->size(), 2u);
  EXPECT_EQ((*s)[0].name, "barge-x-0");
  EXPECT_DOUBLE_EQ((*s)[0].cpu_percent, 99.87);
  EXPECT_EQ((*s)[0].mem_used, 10u * 1048576);
  EXPECT_EQ((*s)[0].mem_limit, 1073741824u);
  EXPECT_EQ((*s)[0].net_rx, 1500u);
  EXPECT_EQ((*s)[0].net_tx, 648u);
  EXPECT_EQ((*s)[1].mem_used, 512u * 1024);
}

TEST(DockerStats, ALineThatIsNotAContainerIsAnErrorQuotingIt) {
  Result<std::vector<ContainerStats>> s = ParseDockerStats("Error response from daemon: boom\n");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("Error response from daemon"), std::string::npos);
}

TEST(GpuStats, ParsesTheQueryLinesAndNotAvailableAsMissing) {
  Result<std::vector<GpuStats>> g = ParseGpuStats(
      "0, GPU-aaaa, 87, 10240, 81920\n1, GPU-bbbb, [N/A], 0, 81920\n");
  ASSERT_TRUE(g.ok()) << g.status().message();
  ASSERT_EQ(g->size(), 2u);
  EXPECT_EQ((*g)[0].uuid, "GPU-aaaa");
  EXPECT_EQ((*g)[0].util_percent, 87.0);
  EXPECT_EQ((*g)[0].mem_used_mib, 10240u);
  EXPECT_EQ((*g)[1].index, 1);
  EXPECT_FALSE((*g)[1].util_percent.has_value());
  EXPECT_TRUE(ParseGpuStats("").ok());
  EXPECT_TRUE(ParseGpuStats("")->empty());
  EXPECT_FALSE(ParseGpuStats("nvidia-smi: command failed\n").ok());
}

TEST(NodeGpus, TakesTheNodesDevicesByIndexOrUuidTheFirstNOrAll) {
  std::vector<GpuStats> host(4);
  for (int i = 0; i < 4; ++i) {
    host[i].index = i;
    host[i].uuid = "GPU-" + std::to_string(i);
  }
  EXPECT_TRUE(NodeGpus(std::nullopt, host).empty());
  EXPECT_EQ(NodeGpus(std::string("all"), host).size(), 4u);
  EXPECT_EQ(NodeGpus(std::string("2"), host).size(), 2u);
  auto picked = NodeGpus(std::string("\"device=2,3\""), host);
  ASSERT_EQ(picked.size(), 2u);
  EXPECT_EQ(picked[0].index, 2);
  EXPECT_EQ(picked[1].index, 3);
  auto by_uuid = NodeGpus(std::string("device=GPU-1"), host);
  ASSERT_EQ(by_uuid.size(), 1u);
  EXPECT_EQ(by_uuid[0].index, 1);
}

TEST(TopTable, SaysHostNetworkHasNoNetworkIoAndShowsOneLinePerGpu) {
  NodeSample a;
  a.rank = 0;
  a.role = "head";
  a.host = "10.0.0.1";
  a.host_network = true;
  a.stats = ContainerStats{"c0", 150.0, 1048576, 1073741824, 0, 0};
  GpuStats g0{0, "GPU-0", 50.0, 100, 1000};
  GpuStats g1{1, "GPU-1", 75.0, 200, 1000};
  a.gpus = {g0, g1};
  NodeSample b;
  b.rank = 1;
  b.role = "worker";
  b.host = "10.0.0.2";
  b.error = "not running";
  const std::string t = RenderTopTable("j1", {a, b});
  EXPECT_NE(t.find("150.0"), std::string::npos) << t;
  EXPECT_NE(t.find("- (host net)"), std::string::npos) << t;
  EXPECT_NE(t.find("75%"), std::string::npos) << t;
  EXPECT_NE(t.find("200 / 1000 MiB"), std::string::npos) << t;
  EXPECT_NE(t.find("(not running)"), std::string::npos) << t;
  EXPECT_NE(t.find("host network: Docker reports no network I/O"), std::string::npos) << t;
  nlohmann::json j = TopJson("j1", "2026-01-01T00:00:00.000Z", {a, b});
  EXPECT_EQ(j["nodes"][0]["cpu_percent"], 150.0);
  EXPECT_TRUE(j["nodes"][0]["net_rx_bytes"].is_null());
  EXPECT_EQ(j["nodes"][0]["gpus"].size(), 2u);
  EXPECT_TRUE(j["nodes"][1]["cpu_percent"].is_null());
  EXPECT_EQ(j["nodes"][1]["error"], "not running");
}

}  // namespace
}  // namespace barge::runner
