#include "container/container_spec.h"

#include <gtest/gtest.h>

namespace barge::container {
namespace {

TEST(Merge, ScalarsAndListsFromOverReplaceThoseOfBase) {
  ContainerOptions base;
  base.shm_size = "1g";
  base.cap_add = std::vector<std::string>{"SYS_ADMIN", "NET_ADMIN"};
  base.network = "host";
  base.volumes = std::vector<std::string>{"/a:/a", "/b:/b"};
  ContainerOptions over;
  over.shm_size = "20g";
  over.cap_add = std::vector<std::string>{"SYS_PTRACE"};
  over.volumes = std::vector<std::string>{};  // an empty list still replaces

  ContainerOptions m = Merge(base, over);
  EXPECT_EQ(m.shm_size, "20g");
  EXPECT_EQ(m.cap_add, (std::vector<std::string>{"SYS_PTRACE"}));
  EXPECT_EQ(m.network, "host");
  ASSERT_TRUE(m.volumes.has_value());
  EXPECT_TRUE(m.volumes->empty());
}

TEST(Merge, UnsetFieldsStayUnsetWhenNeitherLayerSetsThem) {
  ContainerOptions m = Merge(ContainerOptions{}, ContainerOptions{});
  EXPECT_FALSE(m.shm_size.has_value());
  EXPECT_FALSE(m.gpus.has_value());
  EXPECT_FALSE(m.env.has_value());
  EXPECT_FALSE(m.ulimits.has_value());
  EXPECT_FALSE(m.run_options.has_value());
}

TEST(NanoCpus, ReadsCpusAsDockersCpusFlagDoes) {
  EXPECT_EQ(NanoCpus("2"), 2000000000LL);
  EXPECT_EQ(NanoCpus("1.5"), 1500000000LL);
  EXPECT_EQ(NanoCpus("0.000000001"), 1);
  EXPECT_EQ(NanoCpus("0.5"), 500000000LL);
  for (const char* bad : {"", "0", "0.0", ".5", "1.", "-1", "1.0000000001", "1e3", "two", "1,5", "1 "}) {
    EXPECT_EQ(NanoCpus(bad), std::nullopt) << bad;
  }
}

TEST(Merge, EveryFieldOfOverIsTakenOverAnEmptyBase) {
  ContainerOptions over;
  over.shm_size = "2g";
  over.cap_add = std::vector<std::string>{"SYS_ADMIN"};
  over.gpus = "all";
  over.ipc = "host";
  over.network = "host";
  over.memory = "512m";
  over.cpus = "1.5";
  over.ulimits = KeyValues{{"stack", "67108864"}};
  over.devices = std::vector<std::string>{"/dev/fuse"};
  over.volumes = std::vector<std::string>{"/data:/data:ro"};
  over.env = KeyValues{{"A", "1"}};
  over.run_options = std::vector<std::string>{"--init"};
  ContainerOptions m = Merge(ContainerOptions{}, over);
  EXPECT_EQ(m.shm_size, over.shm_size);
  EXPECT_EQ(m.cap_add, over.cap_add);
  EXPECT_EQ(m.gpus, over.gpus);
  EXPECT_EQ(m.ipc, over.ipc);
  EXPECT_EQ(m.network, over.network);
  EXPECT_EQ(m.memory, over.memory);
  EXPECT_EQ(m.cpus, over.cpus);
  EXPECT_EQ(m.ulimits, over.ulimits);
  EXPECT_EQ(m.devices, over.devices);
  EXPECT_EQ(m.volumes, over.volumes);
  EXPECT_EQ(m.env, over.env);
  EXPECT_EQ(m.run_options, over.run_options);
  // And the other way round: an empty `over` keeps everything of base.
  ContainerOptions back = Merge(over, ContainerOptions{});
  EXPECT_EQ(back.memory, "512m");
  EXPECT_EQ(back.env, over.env);
  EXPECT_EQ(back.devices, over.devices);
}

TEST(Merge, EnvMergesKeyByKeyKeepingFirstSeenOrderWithOverWinning) {
  ContainerOptions base;
  base.env = KeyValues{{"A", "1"}, {"B", "2"}, {"C", "3"}};
  ContainerOptions over;
  over.env = KeyValues{{"D", "4"}, {"B", "twenty"}};
  ContainerOptions m = Merge(base, over);
  EXPECT_EQ(m.env, (KeyValues{{"A", "1"}, {"B", "twenty"}, {"C", "3"}, {"D", "4"}}));
}

TEST(Merge, UlimitsMergeKeyByKeyLikeEnv) {
  ContainerOptions base;
  base.ulimits = KeyValues{{"memlock", "-1"}, {"stack", "67108864"}};
  ContainerOptions over;
  over.ulimits = KeyValues{{"nofile", "1024:2048"}, {"memlock", "4194304:4194304"}};
  ContainerOptions m = Merge(base, over);
  EXPECT_EQ(m.ulimits, (KeyValues{{"memlock", "4194304:4194304"},
                                  {"stack", "67108864"},
                                  {"nofile", "1024:2048"}}));
}

TEST(Merge, AKeyRepeatedWithinOneLayerCollapsesToItsLastValue) {
  ContainerOptions base;
  base.env = KeyValues{{"A", "1"}, {"B", "2"}, {"A", "3"}};
  ContainerOptions over;
  over.env = KeyValues{};
  EXPECT_EQ(Merge(base, over).env, (KeyValues{{"A", "3"}, {"B", "2"}}));
}

TEST(Merge, LayersApplyInOrderJobThenRoleThenHost) {
  ContainerOptions job, role, host;
  job.shm_size = "1g";
  job.env = KeyValues{{"X", "job"}, {"Y", "job"}};
  role.shm_size = "20g";
  role.env = KeyValues{{"Y", "role"}};
  host.env = KeyValues{{"X", "host"}};
  ContainerOptions m = Merge(Merge(job, role), host);
  EXPECT_EQ(m.shm_size, "20g");
  EXPECT_EQ(m.env, (KeyValues{{"X", "host"}, {"Y", "role"}}));
}

}  // namespace
}  // namespace barge::container
