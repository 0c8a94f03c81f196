#include "base/peer_owner.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <optional>

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

// The owner of a client on any loopback address, IPv4 or IPv6, as the
// kernel's socket table tells it: this process's uid from 127.0.0.2 and
// from ::1, and uid 65534 for a client made by a child running as it.
int ListenOn(const sockaddr_storage& a, socklen_t len, sockaddr_storage* bound) {
  const int server = socket(a.ss_family, SOCK_STREAM, 0);
  if (bind(server, reinterpret_cast<const sockaddr*>(&a), len) != 0 || listen(server, 4) != 0) return -1;
  socklen_t blen = sizeof *bound;
  getsockname(server, reinterpret_cast<sockaddr*>(bound), &blen);
  return server;
}

// Connects from `source` (port 0) to `to`, in a child running as `uid`
// when it is not ours; the parent's accepted end, or -1. The child keeps
// its socket open until the parent has read the owner.
std::optional<uid_t> OwnerSeenByServer(const char* source, uid_t uid) {
  sockaddr_storage any{}, bound{};
  auto* in = reinterpret_cast<sockaddr_in*>(&any);
  in->sin_family = AF_INET;
  in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const int server = ListenOn(any, sizeof(sockaddr_in), &bound);
  if (server < 0) return std::nullopt;
  int hold[2];
  if (pipe(hold) != 0) return std::nullopt;
  const pid_t pid = fork();
  if (pid == 0) {
    if (uid != geteuid() && (setgid(uid) != 0 || setuid(uid) != 0)) _exit(1);
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in from{};
    from.sin_family = AF_INET;
    inet_pton(AF_INET, source, &from.sin_addr);
    if (bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0 ||
        connect(fd, reinterpret_cast<sockaddr*>(&bound), sizeof(sockaddr_in)) != 0) {
      _exit(2);
    }
    char c;
    (void)!read(hold[0], &c, 1);
    _exit(0);
  }
  const int accepted = accept(server, nullptr, nullptr);
  std::optional<uid_t> owner = accepted >= 0 ? PeerUid(accepted) : std::nullopt;
  (void)!write(hold[1], "x", 1);
  waitpid(pid, nullptr, 0);
  close(accepted);
  close(server);
  close(hold[0]);
  close(hold[1]);
  return owner;
}

TEST(PeerUid, IsTheClientsOwnerFromAnyLoopbackAddressIpv4OrIpv6) {
  ASSERT_EQ(geteuid(), 0u) << "this test plays another user (uid 65534): it needs root";
  EXPECT_EQ(OwnerSeenByServer("127.0.0.2", geteuid()), geteuid());
  EXPECT_EQ(OwnerSeenByServer("127.0.0.3", 65534), 65534u);
  EXPECT_EQ(OwnerSeenByServer("127.0.0.1", 65534), 65534u);

  sockaddr_storage six{}, bound{};
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&six);
  in6->sin6_family = AF_INET6;
  in6->sin6_addr = in6addr_loopback;
  const int server = ListenOn(six, sizeof(sockaddr_in6), &bound);
  ASSERT_GE(server, 0) << "no IPv6 loopback here";
  const int client = socket(AF_INET6, SOCK_STREAM, 0);
  ASSERT_EQ(connect(client, reinterpret_cast<sockaddr*>(&bound), sizeof(sockaddr_in6)), 0);
  const int accepted = accept(server, nullptr, nullptr);
  EXPECT_EQ(PeerUid(accepted), geteuid());
  close(accepted);
  close(client);
  close(server);
}

}  // namespace
}  // namespace barge
