#include "cluster/gpu_slices.h"

#include <algorithm>
#include <cctype>

namespace barge::cluster {

std::string DescribeGpuIndices(const std::set<int>& indices) {
  if (indices.empty()) return "none";
  std::string out;
  auto it = indices.begin();
  while (it != indices.end()) {
    int first = *it, last = *it;
    for (++it; it != indices.end() && *it == last + 1; ++it) last = *it;
    if (!out.empty()) out += ",";
    out += std::to_string(first);
    if (last > first) out += (last == first + 1 ? "," : "-") + std::to_string(last);
  }
  return out;
}

Result<std::map<int, std::vector<int>>> AllocateGpuSlices(const std::vector<GpuClaim>& claims,
                                                          const std::map<size_t, HostGpus>& hosts) {
  std::map<size_t, std::vector<const GpuClaim*>> by_host;
  for (const GpuClaim& c : claims) {
    if (!hosts.contains(c.host_index)) {
      return Status::Error("node " + std::to_string(c.rank) + " asks for GPUs on host #" +
                           std::to_string(c.host_index) + ", whose GPU count is unknown");
    }
    by_host[c.host_index].push_back(&c);
  }
  std::map<int, std::vector<int>> out;
  for (auto& [h, list] : by_host) {
    std::sort(list.begin(), list.end(),
              [](const GpuClaim* a, const GpuClaim* b) { return a->rank < b->rank; });
    const HostGpus& host = hosts.at(h);
    std::set<int> free;
    for (int i = 0; i < host.total; ++i) {
      if (!host.held.contains(i) && !host.listed.contains(i)) free.insert(i);
    }
    int asked = 0;
    std::string per_node;
    for (const GpuClaim* c : list) {
      asked += c->count;
      per_node += (per_node.empty() ? "" : ", ") + std::string("node ") + std::to_string(c->rank) +
                  ": " + std::to_string(c->count);
    }
    if (asked > static_cast<int>(free.size())) {
      std::string why = "not enough free GPUs on " + host.address + ": its nodes ask for " +
                        std::to_string(asked) + " (" + per_node + "), but only " +
                        std::to_string(free.size()) + " of its " + std::to_string(host.total) +
                        " are free (" + DescribeGpuIndices(free) + ")";
      if (!host.held.empty()) why += "; held by other jobs: " + DescribeGpuIndices(host.held);
      if (!host.listed.empty()) {
        why += "; taken by this job's device lists: " + DescribeGpuIndices(host.listed);
      }
      return Status::Error(why);
    }
    auto next = free.begin();
    for (const GpuClaim* c : list) {
      std::vector<int>& devices = out[c->rank];
      for (int k = 0; k < c->count; ++k) devices.push_back(*next++);
    }
  }
  return out;
}

std::string GpuDeviceValue(const std::vector<int>& devices) {
  std::string joined;
  for (int d : devices) joined += (joined.empty() ? "" : ",") + std::to_string(d);
  return "\"device=" + joined + "\"";
}

std::optional<int> GpuCount(const std::string& gpus_value) {
  if (gpus_value.empty() || gpus_value.size() > 6) return std::nullopt;
  for (char ch : gpus_value) {
    if (!std::isdigit(static_cast<unsigned char>(ch))) return std::nullopt;
  }
  return std::stoi(gpus_value);
}

std::set<int> GpuDeviceIndices(const std::string& gpus_value) {
  std::set<int> out;
  std::string v = gpus_value;
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
  const std::string kPrefix = "device=";
  if (v.rfind(kPrefix, 0) != 0) return out;
  v = v.substr(kPrefix.size());
  for (size_t i = 0; i <= v.size();) {
    size_t j = v.find(',', i);
    if (j == std::string::npos) j = v.size();
    if (std::optional<int> n = GpuCount(v.substr(i, j - i))) out.insert(*n);
    i = j + 1;
  }
  return out;
}

}  // namespace barge::cluster
