#include "base/peer_owner.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace barge {
namespace {

// A little-endian machine's /proc/net/tcp: a listener on 127.0.0.1:8265,
// two clients of it (uid 1000 and uid 0) and the server ends, a socket in
// TIME_WAIT (uid 0, owner gone).
constexpr const char* kTable =
    "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    "   0: 0100007F:2049 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 101 1 0 100 0 0 10 0\n"
    "   1: 0100007F:C350 0100007F:2049 01 00000000:00000000 00:00000000 00000000  1000        0 102 1 0 20 4 30 10 -1\n"
    "   2: 0100007F:2049 0100007F:C350 01 00000000:00000000 00:00000000 00000000  1000        0 103 1 0 20 4 30 10 -1\n"
    "   3: 0100007F:C351 0100007F:2049 08 00000000:00000000 00:00000000 00000000     0        0 104 1 0 20 4 30 10 -1\n"
    "   4: 0100007F:C352 0100007F:2049 06 00000000:00000000 03:00001770 00000000     0        0 0 3\n";

TEST(LoopbackClientUid, FindsTheClientsSocketByBothEndsAndItsOwner) {
  if (htonl(INADDR_LOOPBACK) != 0x0100007F) GTEST_SKIP() << "the table above is a little-endian machine's";
  EXPECT_EQ(LoopbackClientUid(kTable, 0xC350, 8265), 1000u);
  EXPECT_EQ(LoopbackClientUid(kTable, 0xC351, 8265), 0u);  // CLOSE_WAIT: still its owner's
  EXPECT_FALSE(LoopbackClientUid(kTable, 0xC352, 8265).has_value());  // TIME_WAIT: owner gone
  EXPECT_FALSE(LoopbackClientUid(kTable, 0xC350, 8266).has_value());  // another server port
  EXPECT_FALSE(LoopbackClientUid("", 1, 2).has_value());
}

TEST(PeerUid, IsThisProcesssUidForItsOwnLoopbackConnection) {
  int server = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(server, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(listen(server, 1), 0);
  socklen_t len = sizeof a;
  getsockname(server, reinterpret_cast<sockaddr*>(&a), &len);
  int client = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(connect(client, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  int accepted = accept(server, nullptr, nullptr);
  ASSERT_GE(accepted, 0);
  EXPECT_EQ(PeerUid(accepted), geteuid());
  close(accepted);
  close(client);
  close(server);
}

}  // namespace
}  // namespace barge
