// The pool of hosts a job array's members take and give back.
#include "runner/array/host_pool.h"

namespace barge::runner::fleet {

std::optional<std::vector<size_t>> HostPool::TakeFreeHosts(size_t n) {
  std::vector<size_t> taken;
  for (size_t i = 0; i < busy_.size() && taken.size() < n; ++i) {
    if (!busy_[i]) taken.push_back(i);
  }
  if (taken.size() < n || n == 0) return std::nullopt;
  for (size_t i : taken) busy_[i] = true;
  return taken;
}

void HostPool::Release(const std::vector<size_t>& hosts) {
  for (size_t i : hosts) {
    if (i < busy_.size()) busy_[i] = false;
  }
}

size_t HostPool::free_count() const {
  size_t n = 0;
  for (bool b : busy_) n += b ? 0 : 1;
  return n;
}

}  // namespace barge::runner::fleet
