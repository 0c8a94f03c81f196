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
  using O = ContainerOptions;
  ContainerOptions out;
  for (auto field : {&O::shm_size, &O::gpus, &O::ipc, &O::network, &O::memory, &O::cpus}) {
    out.*field = Replace(base.*field, over.*field);
  }
  for (auto field : {&O::cap_add, &O::devices, &O::volumes, &O::run_options}) {
    out.*field = Replace(base.*field, over.*field);
  }
  for (auto field : {&O::ulimits, &O::env}) out.*field = MergeMaps(base.*field, over.*field);
  return out;
}

}  // namespace barge::container
