#include "container/proc_net.h"

#include <sstream>
#include <string>

namespace barge::container {

std::set<int> ParseListeningPorts(std::string_view text) {
  std::set<int> ports;
  std::istringstream lines{std::string(text)};
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state;
    if (!(fields >> slot >> local >> remote >> state)) continue;
    if (slot.empty() || slot.back() != ':' || state != "0A") continue;
    size_t colon = local.rfind(':');
    if (colon == std::string::npos) continue;
    try {
      size_t used = 0;
      int port = std::stoi(local.substr(colon + 1), &used, 16);
      if (used == local.size() - colon - 1) ports.insert(port);
    } catch (...) {
    }
  }
  return ports;
}

}  // namespace barge::container
