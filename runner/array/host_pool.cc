// The pool of hosts a job array's members take and give back.
#include "runner/array/host_pool.h"

#include <algorithm>
#include <iterator>
#include <string_view>

namespace barge::runner::array {

std::optional<std::vector<size_t>> HostPool::TakeFreeHosts(size_t n, const std::set<size_t>& avoid) {
  std::vector<size_t> taken;
  for (const bool avoided : {false, true}) {
    for (size_t i = 0; i < busy_.size() && taken.size() < n; ++i) {
      if (!busy_[i] && !aside_[i] && avoid.contains(i) == avoided) taken.push_back(i);
    }
  }
  if (taken.size() < n || n == 0) return std::nullopt;
  std::sort(taken.begin(), taken.end());
  for (size_t i : taken) busy_[i] = true;
  return taken;
}

std::vector<size_t> HostPool::NoteAttempt(const std::vector<size_t>& hosts, const std::set<size_t>& host_caused,
                                          const std::set<size_t>& unavailable) {
  std::vector<size_t> newly;
  for (size_t h : hosts) {
    if (h >= streak_.size()) continue;
    streak_[h] = host_caused.contains(h) || unavailable.contains(h) ? streak_[h] + 1 : 0;
    if ((streak_[h] >= 2 || unavailable.contains(h)) && !aside_[h]) {
      aside_[h] = true;
      newly.push_back(h);
    }
  }
  return newly;
}

void HostPool::Release(const std::vector<size_t>& hosts) {
  for (size_t i : hosts) {
    if (i < busy_.size()) busy_[i] = false;
  }
}

size_t HostPool::FreeCountExcept(const std::set<size_t>& except) const {
  size_t n = 0;
  for (size_t i = 0; i < busy_.size(); ++i) n += busy_[i] || aside_[i] || except.contains(i) ? 0 : 1;
  return n;
}

bool HostPool::NoteWaitAndCanMove(const std::vector<size_t>& waiting_on, size_t n, std::set<size_t>* waited) const {
  waited->insert(waiting_on.begin(), waiting_on.end());
  return FreeCountExcept(*waited) >= n;
}

size_t HostPool::usable_count() const {
  return static_cast<size_t>(std::count(aside_.begin(), aside_.end(), false));
}

size_t HostPool::free_count() const {
  size_t n = 0;
  for (size_t i = 0; i < busy_.size(); ++i) n += busy_[i] || aside_[i] ? 0 : 1;
  return n;
}

}  // namespace barge::runner::array
