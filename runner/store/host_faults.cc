#include "runner/store/host_faults.h"

#include <algorithm>
#include <iterator>
#include <string_view>

namespace barge::runner {

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

}  // namespace barge::runner
