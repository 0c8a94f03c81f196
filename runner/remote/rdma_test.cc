#include "runner/remote/rdma.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <memory>

namespace barge::runner::rdma {
namespace {

// The command run by this machine's sh: it has no InfiniBand (like the
// captured H100 host, tests/data/nvidia-smi/.../ib.txt, whose
// /dev/infiniband holds only rdma_cm and /sys/class/infiniband nothing).
TEST(Rdma, ThisMachinesAnswerHasNoDeviceAndSaysSo) {
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(("sh -c '" + RdmaCommand() + "'; echo rc=$?").c_str(), "r"), pclose);
  ASSERT_TRUE(p);
  std::string out;
  std::array<char, 256> buf{};
  while (fgets(buf.data(), buf.size(), p.get())) out += buf.data();
  ASSERT_NE(out.find("rc=0"), std::string::npos) << out;
  const RdmaInfo info = ParseRdma(out);
  EXPECT_FALSE(info.usable());
  EXPECT_EQ(info.why_not(), "no InfiniBand device (/dev/infiniband/uverbs*, /sys/class/infiniband)");
}

// The sysfs form the kernel documents (Documentation/ABI/stable/
// sysfs-class-infiniband: a port's `state` reads "4: ACTIVE"); no machine
// with an HCA was at hand to capture one.
TEST(Rdma, ActiveHcasAreNamedExactlyAndADownOneIsLeftOut) {
  const RdmaInfo info = ParseRdma(
      "device /dev/infiniband/uverbs0\n"
      "device /dev/infiniband/uverbs1\n"
      "state /sys/class/infiniband/mlx5_1/ports/1/state 4: ACTIVE\n"
      "state /sys/class/infiniband/mlx5_0/ports/1/state 4: ACTIVE\n"
      "state /sys/class/infiniband/mlx5_2/ports/1/state 1: DOWN\n"
      "state /sys/class/infiniband/mlx5_3/ports/1/state 2: INIT\n"
      "state /sys/class/infiniband/mlx5_3/ports/2/state 4: ACTIVE\n");
  EXPECT_TRUE(info.usable());
  EXPECT_EQ(info.devices, (std::vector<std::string>{"/dev/infiniband/uverbs0", "/dev/infiniband/uverbs1"}));
  EXPECT_EQ(info.active_hcas, (std::vector<std::string>{"mlx5_0", "mlx5_1", "mlx5_3"}));
  EXPECT_EQ(info.inactive_hcas, (std::vector<std::string>{"mlx5_2"}));
  EXPECT_EQ(NcclIbHca(info.active_hcas), "=mlx5_0,mlx5_1,mlx5_3");
}

TEST(Rdma, DevicesWithoutAnActivePortOrPortsWithoutADeviceAreNotUsable) {
  const RdmaInfo down = ParseRdma("device /dev/infiniband/uverbs0\nstate /sys/class/infiniband/mlx5_0/ports/1/state 1: DOWN\n");
  EXPECT_FALSE(down.usable());
  EXPECT_EQ(down.why_not(), "no active port on mlx5_0");
  const RdmaInfo nodev = ParseRdma("state /sys/class/infiniband/mlx5_0/ports/1/state 4: ACTIVE\n");
  EXPECT_FALSE(nodev.usable());
  EXPECT_EQ(nodev.why_not(), "no verbs device in /dev/infiniband");
  // Lines of anything else (a section cut short, noise) are ignored.
  EXPECT_FALSE(ParseRdma("state /sys/class/infiniband/ 4: ACTIVE\ndevice /dev/null\n").usable());
}

}  // namespace
}  // namespace barge::runner::rdma
