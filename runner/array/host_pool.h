// The job's inventory as a pool that a job array's members draw their
// hosts from: a member holds its hosts alone until it ends, so no two
// members of one array ever share a host. The array controller keeps one
// pool for the job's hosts and one per host group (JobSpec::host_groups);
// a host is in one pool only (the job file's validation sees to it).
//
// TakeFreeHosts is the one place a member gets hosts. Today it knows only
// this array's own members; the seam for the hosts' reservations (other
// jobs, other users) is there: a host the pool thinks free but whose
// reservation another job holds will be skipped, or waited for, inside it.
//
// Not thread-safe; the array controller's thread only.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

namespace barge::runner::fleet {

class HostPool {
 public:
  explicit HostPool(size_t size) : busy_(size, false) {}

  // `n` free hosts (by index into the inventory, lowest first, so the
  // order is the same on every run), now marked busy; nullopt (nothing
  // taken) when fewer than `n` are free.
  std::optional<std::vector<size_t>> TakeFreeHosts(size_t n);
  // Gives `hosts` back (a member ended). Hosts not taken are ignored.
  void Release(const std::vector<size_t>& hosts);

  size_t size() const { return busy_.size(); }
  size_t free_count() const;

 private:
  std::vector<bool> busy_;
};

}  // namespace barge::runner::fleet
