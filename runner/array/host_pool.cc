// The pool of hosts a job array's members take and give back.
#include "runner/array/host_pool.h"

#include <algorithm>
#include <iterator>
#include <string_view>

namespace barge::runner::fleet {

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

size_t HostPool::usable_count() const {
  return static_cast<size_t>(std::count(aside_.begin(), aside_.end(), false));
}

size_t HostPool::free_count() const {
  size_t n = 0;
  for (size_t i = 0; i < busy_.size(); ++i) n += busy_[i] || aside_[i] ? 0 : 1;
  return n;
}

namespace {

bool IsHostOut(const EventRecord& e) {
  return e.host && e.kind == event::kGpuUnhealthy && e.detail == "the host is out";
}

}  // namespace

std::set<std::string> UnavailableHosts(const std::vector<EventRecord>& events) {
  std::set<std::string> out;
  for (const EventRecord& e : events) {
    if (IsHostOut(e)) out.insert(*e.host);
  }
  return out;
}

std::map<std::string, std::string> HostCausedFailures(const std::vector<EventRecord>& events,
                                                      const std::vector<PhaseRecord>& phases) {
  std::map<std::string, std::string> out;
  for (const EventRecord& e : events) {
    if (!e.host) continue;
    // An unhealthy host (the GPU health gate put it out) is the host's.
    const bool unhealthy = IsHostOut(e);
    if (e.kind != event::kHostLost && e.kind != event::kPreempted && !unhealthy) continue;
    out.emplace(*e.host, e.kind + ": " + e.detail);
  }
  // Preflight: what is the host's own state (its engine, its disk, its
  // GPUs, its session), not the job's (an image or a port the job names).
  static constexpr std::string_view kHostsOwn[] = {"docker is not reachable", "did not answer", "did not finish",
                                                   "did not report", "disk full", "GPUs requested but unavailable",
                                                   "cannot reserve the host", "cannot arm the watchdog"};
  for (const PhaseRecord& p : phases) {
    if (p.outcome.empty() || p.outcome == "ok") continue;
    const bool own = p.phase == "connect" ||
                     (p.phase == "preflight" && std::any_of(std::begin(kHostsOwn), std::end(kHostsOwn), [&](auto k) {
                        return p.outcome.find(k) != std::string::npos;
                      }));
    if (own) out.emplace(p.host, p.phase + ": " + p.outcome);
  }
  return out;
}

}  // namespace barge::runner::fleet
