// The job's inventory as a pool that a job array's members draw their
// hosts from: a member holds its hosts alone until it ends, so no two
// members of one array ever share a host. The array controller keeps one
// pool for the job's hosts and one per host group (JobSpec::host_groups);
// a host is in one pool only (the job file's validation sees to it).
//
// TakeFreeHosts is the one place a member gets hosts. It knows only this
// array's own members; a host another job holds is waited for by the
// member itself (its reservations, runner/remote/reservation.h). A host
// that keeps failing members is set aside (NoteAttempt).
//
// Not thread-safe; the array controller's thread only.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "runner/store/host_faults.h"
#include "runner/store/job_store.h"

namespace barge::runner::array {

class HostPool {
 public:
  explicit HostPool(size_t size) : busy_(size, false), streak_(size, 0), aside_(size, false) {}

  // `n` free hosts (by index into the inventory, lowest first, so the
  // order is the same on every run; hosts in `avoid` only when the others
  // do not make `n`), now marked busy; nullopt (nothing taken) when fewer
  // than `n` are free. A host set aside is never taken.
  std::optional<std::vector<size_t>> TakeFreeHosts(size_t n, const std::set<size_t>& avoid = {});
  // Gives `hosts` back (a member ended). Hosts not taken are ignored.
  void Release(const std::vector<size_t>& hosts);

  // An attempt on `hosts` ended; `host_caused` are those of them its
  // failure came from (HostCausedFailures). A host on which two attempts in
  // a row (by any members) ended in a failure it caused is set aside for
  // the rest of the array, and one in `unavailable` (UnavailableHosts: it
  // is unhealthy, which does not pass by waiting) at once: the hosts set
  // aside by this call.
  std::vector<size_t> NoteAttempt(const std::vector<size_t>& hosts, const std::set<size_t>& host_caused,
                                  const std::set<size_t>& unavailable = {});
  bool set_aside(size_t host) const { return host < aside_.size() && aside_[host]; }

  size_t size() const { return busy_.size(); }
  size_t free_count() const;
  // Free hosts not in `except`.
  size_t FreeCountExcept(const std::set<size_t>& except) const;
  // The move rule for a member waiting for `waiting_on` (hosts another job
  // holds): they join `waited`, every host it waited for in this array
  // (kept across its moves); true when `n` free hosts are left outside
  // `waited`, so a member never moves back to a host it waited for.
  bool NoteWaitAndCanMove(const std::vector<size_t>& waiting_on, size_t n, std::set<size_t>* waited) const;
  // Hosts not set aside (busy or free).
  size_t usable_count() const;

 private:
  std::vector<bool> busy_;
  std::vector<int> streak_;  // host-caused failures in a row
  std::vector<bool> aside_;
};

}  // namespace barge::runner::array
