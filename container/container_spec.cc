#include "container/container_spec.h"

#include <algorithm>

namespace barge::container {
namespace {

// `over` replaces `base` when it is set.
template <typename T>
std::optional<T> Replace(const std::optional<T>& base, const std::optional<T>& over) {
  return over.has_value() ? over : base;
}

// Key by key: every key keeps the position where it was first seen (base
// first, then over); the value is the last one seen, so `over` wins. A key
// repeated within one list collapses the same way.
std::optional<KeyValues> MergeMaps(const std::optional<KeyValues>& base,
                                   const std::optional<KeyValues>& over) {
  if (!base.has_value()) return over;
  if (!over.has_value()) return base;
  KeyValues merged;
  merged.reserve(base->size() + over->size());
  auto add = [&merged](const std::pair<std::string, std::string>& kv) {
    auto it = std::find_if(merged.begin(), merged.end(),
                           [&kv](const auto& m) { return m.first == kv.first; });
    if (it == merged.end()) {
      merged.push_back(kv);
    } else {
      it->second = kv.second;
    }
  };
  for (const auto& kv : *base) add(kv);
  for (const auto& kv : *over) add(kv);
  return merged;
}

}  // namespace

ContainerOptions Merge(const ContainerOptions& base, const ContainerOptions& over) {
  ContainerOptions out;
  out.shm_size = Replace(base.shm_size, over.shm_size);
  out.cap_add = Replace(base.cap_add, over.cap_add);
  out.gpus = Replace(base.gpus, over.gpus);
  out.ipc = Replace(base.ipc, over.ipc);
  out.network = Replace(base.network, over.network);
  out.memory = Replace(base.memory, over.memory);
  out.cpus = Replace(base.cpus, over.cpus);
  out.ulimits = MergeMaps(base.ulimits, over.ulimits);
  out.devices = Replace(base.devices, over.devices);
  out.volumes = Replace(base.volumes, over.volumes);
  out.env = MergeMaps(base.env, over.env);
  out.run_options = Replace(base.run_options, over.run_options);
  return out;
}

}  // namespace barge::container
