// The interface NCCL and Gloo are told, on a bed host whose interface is
// not eth0: every bed host's is eth0, so a barge that wrote eth0 without
// asking the host would pass every other test. Here one host's eth0 is
// renamed for the length of one short job, and renamed back after it,
// failure included.
#include <gtest/gtest.h>

#include <string>

#include "tests/support/bed_env.h"
#include "tests/support/bed_job.h"

using barge::testing::BedHost;
using barge::testing::BedHostsYaml;
using barge::testing::CliOutcome;
using barge::testing::GetBed;
using barge::testing::InHost;
using barge::testing::JobContainers;
using barge::testing::JobDir;

namespace {

constexpr const char* kNewName = "ens5";

// Renames `h`'s eth0 back from `name`, if it has that name now, and brings
// it up: its address stays on the link and the kernel puts the subnet's
// route back when the link comes up (the bed adds no other route).
void RenameBack(const BedHost& h, const std::string& name) {
  InHost(h, "if ip link show " + name + " >/dev/null 2>&1; then ip link set " + name +
                " down && ip link set " + name + " name eth0; fi; ip link set eth0 up");
}

// `h`'s eth0 is called `name` while this lives.
class RenamedInterface {
 public:
  RenamedInterface(const BedHost& h, std::string name) : host_(h), name_(std::move(name)) {
    InHost(host_, "ip link set eth0 down && ip link set eth0 name " + name_ + " && ip link set " +
                      name_ + " up");
  }
  ~RenamedInterface() { RenameBack(host_, name_); }
  RenamedInterface(const RenamedInterface&) = delete;
  RenamedInterface& operator=(const RenamedInterface&) = delete;

 private:
  const BedHost& host_;
  std::string name_;
};

// What carries `h`'s address and its subnet's route, as `ip` in its
// namespace says: "IFACE IFACE" when all is well.
std::string AddressAndRouteDevices(const BedHost& h) {
  std::string got = InHost(h, "ip -o -4 addr show | awk '$4 ~ /^" + h.address +
                                  "\\// {printf \"%s \", $2}'; ip -4 route show scope link | "
                                  "awk '{for (i = 1; i < NF; i++) if ($i == \"dev\") print $(i+1)}'");
  while (!got.empty() && got.back() == '\n') got.pop_back();
  return got;
}

class InterfaceBedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_GE(GetBed().hosts.size(), 2u) << "the bed needs 2 namespace hosts";
    RenameBack(Renamed(), kNewName);  // after a run that died with it renamed
    ASSERT_EQ(AddressAndRouteDevices(Renamed()), "eth0 eth0");
  }
  void TearDown() override {
    EXPECT_EQ(AddressAndRouteDevices(Renamed()), "eth0 eth0") << "the bed host was not restored";
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(JobContainers(GetBed().hosts[i]), "") << "a container was left on " << GetBed().hosts[i].name;
    }
  }
  static const BedHost& Renamed() { return GetBed().hosts[1]; }
};

TEST_F(InterfaceBedTest, ANodeOnAHostWhoseInterfaceIsNotEth0IsToldThatHostsOwnInterfaceName) {
  const auto& bed = GetBed();
  JobDir dir("interface-renamed");
  dir.Write("name: ifname\nimage: " + bed.image + "\n" + BedHostsYaml(0, 2) +
            "container: {network: host}\nstop_grace: 2s\non_worker_exit: ignore\n"
            "command: [\"sh\", \"-c\", \"echo nccl=$NCCL_SOCKET_IFNAME gloo=$GLOO_SOCKET_IFNAME\"]\n");
  CliOutcome o;
  {
    RenamedInterface renamed(Renamed(), kNewName);
    ASSERT_EQ(AddressAndRouteDevices(Renamed()), std::string(kNewName) + " " + kNewName);
    o = dir.Barge("run job.yaml");
  }
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("[0 head " + bed.hosts[0].address + "] nccl==eth0 gloo=eth0"), std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("[1 worker " + Renamed().address + "] nccl==" + kNewName + " gloo=" + kNewName),
            std::string::npos)
      << o.out;
}

}  // namespace
