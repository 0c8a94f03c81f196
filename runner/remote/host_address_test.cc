#include "runner/remote/host_address.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace barge::runner {
namespace {

std::string NetFixture(const std::string& name) {
  std::ifstream in(std::string(BARGE_SOURCE_DIR) + "/tests/data/net/debian12-vm/" + name);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(HostInterface, TheInterfaceCarryingAnAddressIsWhereIpListsItElseTheMostSpecificRoutesOne) {
  // Real outputs of this Debian VM (tests/data/net/README.md).
  const std::string ip = NetFixture("ip-o-4-addr.txt");
  const std::string route = NetFixture("proc-net-route.txt");
  ASSERT_FALSE(ip.empty());
  ASSERT_FALSE(route.empty());
  const std::string both = ip + "@route\n" + route;
  EXPECT_EQ(InterfaceOf(both, "192.0.2.2"), "eth0");
  EXPECT_EQ(InterfaceOf(both, "172.17.0.1"), "docker0");
  EXPECT_EQ(InterfaceOf(both, "127.0.0.1"), "lo");
  // A host without `ip` (as the captured H100 machine): the route table.
  const std::string routes_only = "@route\n" + route;
  EXPECT_EQ(InterfaceOf(routes_only, "192.0.2.2"), "eth0");    // its /24
  EXPECT_EQ(InterfaceOf(routes_only, "172.17.0.1"), "docker0");  // its /16, not the default route
  EXPECT_EQ(InterfaceOf(routes_only, "198.51.100.7"), "eth0");   // only the default route holds it
  // Nothing to tell from.
  EXPECT_EQ(InterfaceOf("@route\n", "192.0.2.2"), "");
  EXPECT_EQ(InterfaceOf(both, "my-alias"), "");
  EXPECT_NE(InterfacesCommand().find("cat /proc/net/route"), std::string::npos);
}

TEST(HostAddress, OnlyNumericAddressesAreIpAddresses) {
  EXPECT_TRUE(IsIpAddress("10.77.0.2"));
  EXPECT_TRUE(IsIpAddress("fe80::1"));
  EXPECT_TRUE(IsIpAddress("::ffff:10.0.0.1"));
  EXPECT_FALSE(IsIpAddress("gpu-1"));
  EXPECT_FALSE(IsIpAddress("gpu-1.lab.example"));
  EXPECT_FALSE(IsIpAddress("[fe80::1]"));
  EXPECT_FALSE(IsIpAddress("10.77.0"));
  EXPECT_FALSE(IsIpAddress(""));
}

TEST(HostAddress, LoopbackIsThe127NetworkAndColonColonOne) {
  EXPECT_TRUE(IsLoopbackAddress("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackAddress("127.0.0.2"));
  EXPECT_TRUE(IsLoopbackAddress("::1"));
  EXPECT_TRUE(IsLoopbackAddress("::ffff:127.0.0.1"));
  EXPECT_FALSE(IsLoopbackAddress("10.77.0.1"));
  EXPECT_FALSE(IsLoopbackAddress("128.0.0.1"));
  EXPECT_FALSE(IsLoopbackAddress("fe80::1"));
  EXPECT_FALSE(IsLoopbackAddress("localhost"));
}

TEST(HostAddress, OnlyRemoteHostsNamedByANameWithoutInternalAddressAreSettledAtRunTime) {
  cluster::Host alias;
  alias.address = "gpu-1";
  EXPECT_TRUE(AddressSettledAtRunTime(alias));
  cluster::Host set = alias;
  set.internal_address = "10.0.0.9";
  EXPECT_FALSE(AddressSettledAtRunTime(set));
  cluster::Host ip;
  ip.address = "10.0.0.5";
  EXPECT_FALSE(AddressSettledAtRunTime(ip));
  cluster::Host local;
  local.address = cluster::kLocalAddress;
  EXPECT_FALSE(AddressSettledAtRunTime(local));
}

TEST(HostAddress, TheProbeAsksForSshConnectionAndRoutesOnlyWhenGivenATarget) {
  EXPECT_EQ(AddressProbeCommand(""), "printf 'ssh %s\\n' \"$SSH_CONNECTION\"");
  EXPECT_EQ(AddressProbeCommand("10.77.0.2"),
            "printf 'ssh %s\\n' \"$SSH_CONNECTION\"; PATH=\"$PATH:/usr/sbin:/sbin\" ip -o route "
            "get 10.77.0.2 2>&1");
}

TEST(HostAddress, TheServerSideOfSshConnectionIsWhereTheHostWasReached) {
  AddressProbe p = ParseAddressProbe("ssh 10.77.0.3 51234 10.77.0.4 2022\n");
  EXPECT_EQ(p.reached_at, "10.77.0.4");
  EXPECT_EQ(p.route_source, "");
  EXPECT_EQ(ParseAddressProbe("ssh fe80::2 40000 fe80::1 22\n").reached_at, "fe80::1");
  // sshd sets nothing (another server), or the line is not the probe's.
  EXPECT_EQ(ParseAddressProbe("ssh \n").reached_at, "");
  EXPECT_EQ(ParseAddressProbe("ssh gpu-1 1 gpu-2 22\n").reached_at, "");
}

TEST(HostAddress, TheRouteSourceIsTheHostsAddressTowardTheTarget) {
  AddressProbe p = ParseAddressProbe(
      "ssh 127.0.0.1 40000 127.0.0.2 2222\n"
      "10.77.0.2 dev bb-br0 src 10.77.0.1 uid 0 \\    cache \n");
  EXPECT_EQ(p.reached_at, "127.0.0.2");
  EXPECT_EQ(p.route_source, "10.77.0.1");
  // No `ip`, or no route: nothing.
  p = ParseAddressProbe("ssh 127.0.0.1 40000 127.0.0.2 2222\nsh: ip: not found\n");
  EXPECT_EQ(p.route_source, "");
  p = ParseAddressProbe("ssh 127.0.0.1 40000 127.0.0.2 2222\nRTNETLINK answers: Network is unreachable\n");
  EXPECT_EQ(p.route_source, "");
}

}  // namespace
}  // namespace barge::runner
