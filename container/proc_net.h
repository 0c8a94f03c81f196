// Which TCP ports a container listens on, read from the host side: the
// kernel's /proc/<pid>/net/tcp and tcp6 tables of the container's main
// process show its network namespace, whatever tools the image lacks.
#pragma once

#include <set>
#include <string_view>

namespace barge::container {

// Ports in state LISTEN (0A) in the concatenated text of /proc/net/tcp and
// /proc/net/tcp6 tables. Header lines and malformed lines are skipped.
std::set<int> ParseListeningPorts(std::string_view proc_net_tcp);

}  // namespace barge::container
