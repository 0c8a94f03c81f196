// Who is at the other end of a connection accepted on this machine: the
// owner (uid) of a loopback TCP client's socket, read from the kernel's
// socket table (/proc/net/tcp, which lists every socket of this network
// namespace with its owner's uid), or of a unix socket's peer
// (SO_PEERCRED). The port forwards serve only connections of the user
// barge runs as (ssh/port_forward.h): a loopback port is otherwise open
// to every user of the machine.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>

#include <optional>
#include <string_view>

namespace barge {

// The uid of the socket in `proc_net_tcp` (the text of /proc/net/tcp)
// whose local end is 127.0.0.1:`client_port` and remote end
// 127.0.0.1:`server_port`, in state ESTABLISHED or CLOSE_WAIT (a client
// that already sent its FIN); nullopt when there is none.
std::optional<uid_t> LoopbackClientUid(std::string_view proc_net_tcp, int client_port, int server_port);

// The uid of the socket in `proc_net_tcp` (the text of /proc/net/tcp or
// /proc/net/tcp6) whose ends are exactly `local` and `remote`, as the kernel
// prints them ("0200007F:C350"), in state ESTABLISHED or CLOSE_WAIT.
std::optional<uid_t> SocketOwner(std::string_view proc_net_tcp, std::string_view local, std::string_view remote);

// An address of this machine's loopback: 127.0.0.0/8, ::1, or an IPv4-mapped
// 127.x (::ffff:127.0.0.1).
bool IsLoopbackAddress(const sockaddr_storage& address);

// The owner of the client end of `fd`, a connection accepted on a
// loopback TCP listener (from any loopback address: 127.0.0.2 as well as
// 127.0.0.1, ::1) or on a unix socket; nullopt when it cannot be told (the
// client has gone, /proc is not readable) or the client is not on this
// machine's loopback.
std::optional<uid_t> PeerUid(int fd);

}  // namespace barge
