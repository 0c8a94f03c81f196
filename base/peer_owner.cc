// Who is at the other end of an accepted connection.
#include "base/peer_owner.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

namespace barge {

namespace {

// How the kernel prints a socket's end in /proc/net/tcp[6]: the address's
// in-memory (network order) bytes read as native 32-bit numbers, each
// %08X ("0100007F" for 127.0.0.1 on a little-endian machine; four of them
// for IPv6), then ':' and the port as %04X. Empty for another family.
std::string KernelEnd(const sockaddr_storage& a) {
  char text[64] = "";
  if (a.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&a);
    uint32_t word = 0;
    std::memcpy(&word, &in->sin_addr, 4);
    std::snprintf(text, sizeof text, "%08X:%04X", static_cast<unsigned>(word), static_cast<unsigned>(ntohs(in->sin_port)));
  } else if (a.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&a);
    uint32_t w[4];
    std::memcpy(w, &in6->sin6_addr, 16);
    std::snprintf(text, sizeof text, "%08X%08X%08X%08X:%04X", static_cast<unsigned>(w[0]),
                  static_cast<unsigned>(w[1]), static_cast<unsigned>(w[2]), static_cast<unsigned>(w[3]),
                  static_cast<unsigned>(ntohs(in6->sin6_port)));
  }
  return text;
}

bool SameField(std::string_view field, std::string_view want) {
  if (field.size() != want.size()) return false;
  for (size_t i = 0; i < field.size(); ++i) {
    char a = field[i];
    if (a >= 'a' && a <= 'f') a = static_cast<char>(a - 'a' + 'A');
    if (a != want[i]) return false;
  }
  return true;
}

std::string ReadFile(const char* path) {
  std::ifstream file(path);
  if (!file) return "";
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

}  // namespace

bool IsLoopbackAddress(const sockaddr_storage& a) {
  if (a.ss_family == AF_INET) {
    return (ntohl(reinterpret_cast<const sockaddr_in*>(&a)->sin_addr.s_addr) >> 24) == 127;
  }
  if (a.ss_family == AF_INET6) {
    const in6_addr& in6 = reinterpret_cast<const sockaddr_in6*>(&a)->sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(&in6)) return true;
    return IN6_IS_ADDR_V4MAPPED(&in6) && in6.s6_addr[12] == 127;
  }
  return false;
}

std::optional<uid_t> SocketOwner(std::string_view proc_net_tcp, std::string_view local, std::string_view remote) {
  std::istringstream in{std::string(proc_net_tcp)};
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    // sl local rem st tx:rx tr:when retrnsmt uid timeout inode ...
    std::istringstream f(line);
    std::string sl, local_field, remote_field, state, queues, timer, retransmits, uid;
    if (!(f >> sl >> local_field >> remote_field >> state >> queues >> timer >> retransmits >> uid)) continue;
    // 01 ESTABLISHED, 08 CLOSE_WAIT.
    if (state != "01" && state != "08") continue;
    if (!SameField(local_field, local) || !SameField(remote_field, remote)) continue;
    try {
      size_t used = 0;
      const unsigned long v = std::stoul(uid, &used);
      if (used == uid.size()) return static_cast<uid_t>(v);
    } catch (...) {
    }
  }
  return std::nullopt;
}

std::optional<uid_t> LoopbackClientUid(std::string_view proc_net_tcp, int client_port, int server_port) {
  char client[16], server[16];
  std::snprintf(client, sizeof client, "%08X:%04X", static_cast<unsigned>(htonl(INADDR_LOOPBACK)),
                static_cast<unsigned>(client_port));
  std::snprintf(server, sizeof server, "%08X:%04X", static_cast<unsigned>(htonl(INADDR_LOOPBACK)),
                static_cast<unsigned>(server_port));
  return SocketOwner(proc_net_tcp, client, server);
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
  if (!IsLoopbackAddress(peer)) return std::nullopt;
  // The client's socket: its local end is our peer, its remote end us.
  const std::string table = ReadFile(peer.ss_family == AF_INET ? "/proc/net/tcp" : "/proc/net/tcp6");
  return SocketOwner(table, KernelEnd(peer), KernelEnd(self));
}

}  // namespace barge
