#include "container/proc_net.h"

#include <gtest/gtest.h>

namespace barge::container {
namespace {

TEST(ProcNet, OnlyListeningSocketsCountInBothTables) {
  const char* tcp =
      "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
      "   0: 00000000:7332 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1\n"
      "   1: 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 2 1\n";
  const char* tcp6 =
      "  sl  local_address                         remote_address                        st\n"
      "   0: 00000000000000000000000000000000:0016 00000000000000000000000000000000:0000 0A 0 0 0\n";
  EXPECT_EQ(ParseListeningPorts(std::string(tcp) + tcp6), (std::set<int>{29490, 22}));
}

TEST(ProcNet, GarbageYieldsNoPorts) {
  EXPECT_TRUE(ParseListeningPorts("").empty());
  EXPECT_TRUE(ParseListeningPorts("cat: /proc/1/net/tcp6: No such file\n").empty());
  EXPECT_TRUE(ParseListeningPorts("   0: 00000000:zz 00000000:0000 0A\n").empty());
}

}  // namespace
}  // namespace barge::container
