// Who is at the other end of an accepted connection.
#include "base/peer_owner.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace barge {

namespace {

// "0100007F:1F90" (127.0.0.1:8080 as the kernel prints it: the IPv4
// address as a host-order 32-bit number, the port as a number) → whether
// it is 127.0.0.1:`port`.
bool IsLoopbackEnd(std::string_view field, int port) {
  // The kernel prints the address's in-memory (network order) bytes read
  // as a native number: 0100007F for 127.0.0.1 on a little-endian machine.
  char want[16];
  std::snprintf(want, sizeof want, "%08X:%04X", static_cast<unsigned>(htonl(INADDR_LOOPBACK)),
                static_cast<unsigned>(port));
  if (field.size() != 13) return false;
  for (size_t i = 0; i < 13; ++i) {
    char a = field[i], b = want[i];
    if (a >= 'a' && a <= 'f') a = static_cast<char>(a - 'a' + 'A');
    if (a != b) return false;
  }
  return true;
}

}  // namespace

std::optional<uid_t> LoopbackClientUid(std::string_view proc_net_tcp, int client_port, int server_port) {
  std::istringstream in{std::string(proc_net_tcp)};
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    // sl local rem st tx:rx tr:when retrnsmt uid timeout inode ...
    std::istringstream f(line);
    std::string sl, local, remote, state, queues, timer, retransmits, uid;
    if (!(f >> sl >> local >> remote >> state >> queues >> timer >> retransmits >> uid)) continue;
    // 01 ESTABLISHED, 08 CLOSE_WAIT.
    if (state != "01" && state != "08") continue;
    if (!IsLoopbackEnd(local, client_port) || !IsLoopbackEnd(remote, server_port)) continue;
    try {
      size_t used = 0;
      const unsigned long v = std::stoul(uid, &used);
      if (used == uid.size()) return static_cast<uid_t>(v);
    } catch (...) {
    }
  }
  return std::nullopt;
}

std::optional<uid_t> PeerUid(int fd) {
  sockaddr_storage peer{}, self{};
  socklen_t plen = sizeof peer, slen = sizeof self;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &plen) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&self), &slen) != 0) {
    return std::nullopt;
  }
  if (peer.ss_family == AF_UNIX) {
    ucred cred{};
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return std::nullopt;
    return cred.uid;
  }
  if (peer.ss_family != AF_INET) return std::nullopt;
  const auto* p = reinterpret_cast<const sockaddr_in*>(&peer);
  const auto* s = reinterpret_cast<const sockaddr_in*>(&self);
  if (p->sin_addr.s_addr != htonl(INADDR_LOOPBACK)) return std::nullopt;
  std::ifstream file("/proc/net/tcp");
  if (!file) return std::nullopt;
  std::ostringstream text;
  text << file.rdbuf();
  return LoopbackClientUid(text.str(), ntohs(p->sin_port), ntohs(s->sin_port));
}

}  // namespace barge
