// RDMA on a host (rdma.h).
#include "runner/remote/rdma.h"

#include <algorithm>
#include <map>
#include <sstream>

namespace barge::runner::rdma {

std::string RdmaCommand() {
  return "for H_d in /dev/infiniband/uverbs*; do [ -e \"$H_d\" ] && echo \"device $H_d\"; done; "
         "for H_s in /sys/class/infiniband/*/ports/*/state; do [ -r \"$H_s\" ] && "
         "echo \"state $H_s $(cat \"$H_s\" 2>/dev/null)\"; done; true";
}

std::string RdmaInfo::why_not() const {
  if (usable()) return "";
  if (devices.empty() && active_hcas.empty() && inactive_hcas.empty()) {
    return "no InfiniBand device (/dev/infiniband/uverbs*, /sys/class/infiniband)";
  }
  if (devices.empty()) return "no verbs device in /dev/infiniband";
  std::string names;
  for (const std::string& h : inactive_hcas) names += (names.empty() ? "" : ",") + h;
  return names.empty() ? "no HCA in /sys/class/infiniband" : "no active port on " + names;
}

RdmaInfo ParseRdma(std::string_view output) {
  RdmaInfo info;
  std::map<std::string, bool> hcas;  // name -> some port ACTIVE
  std::istringstream in{std::string(output)};
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("device /dev/infiniband/uverbs", 0) == 0) {
      info.devices.push_back(line.substr(7));
      continue;
    }
    constexpr std::string_view kState = "state /sys/class/infiniband/";
    if (line.rfind(kState, 0) != 0) continue;
    const std::string rest = line.substr(kState.size());
    const size_t slash = rest.find('/');
    const size_t space = rest.find(' ');
    if (slash == std::string::npos || slash == 0 || space == std::string::npos || slash > space) continue;
    const std::string hca = rest.substr(0, slash);
    // "4: ACTIVE" (the value after the path).
    const bool active = rest.find("ACTIVE", space) != std::string::npos &&
                        rest.find("INACTIVE", space) == std::string::npos;
    hcas[hca] = hcas[hca] || active;
  }
  for (const auto& [name, active] : hcas) (active ? info.active_hcas : info.inactive_hcas).push_back(name);
  return info;
}

std::string NcclIbHca(const std::vector<std::string>& hcas) {
  std::string v = "=";
  for (size_t i = 0; i < hcas.size(); ++i) v += (i ? "," : "") + hcas[i];
  return v;
}

}  // namespace barge::runner::rdma
