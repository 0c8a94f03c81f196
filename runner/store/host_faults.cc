#include "runner/store/host_faults.h"

#include <algorithm>
#include <iterator>
#include <string_view>

namespace barge::runner {

namespace {

bool IsHostOut(const EventRecord& e) {
  return e.host && e.kind == event::kGpuUnhealthy && e.detail == "the host is out";
}

bool IsAvoided(const EventRecord& e) { return e.host && e.kind == event::kHostAvoided; }

}  // namespace

std::set<std::string> UnavailableHosts(const std::vector<EventRecord>& events) {
  std::set<std::string> out;
  for (const EventRecord& e : events) {
    if (IsHostOut(e) || IsAvoided(e)) out.insert(*e.host);
  }
  return out;
}

bool IsHostsOwnFailure(std::string_view phase, std::string_view outcome) {
  // Preflight: what is the host's own state (its engine, its disk, its
  // GPUs, its session), not the job's (an image or a port the job names).
  static constexpr std::string_view kHostsOwn[] = {"docker is not reachable", "did not answer", "did not finish",
                                                   "did not report", "disk full", "GPUs requested but unavailable",
                                                   "cannot reserve the host", "cannot arm the watchdog"};
  if (outcome.empty() || outcome == "ok") return false;
  return phase == "connect" ||
         (phase == "preflight" && std::any_of(std::begin(kHostsOwn), std::end(kHostsOwn), [&](std::string_view k) {
            return outcome.find(k) != std::string_view::npos;
          }));
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
  for (const PhaseRecord& p : phases) {
    if (p.outcome.empty() || p.outcome == "ok") continue;
    const bool own = IsHostsOwnFailure(p.phase, p.outcome);
    if (own) out.emplace(p.host, p.phase + ": " + p.outcome);
  }
  return out;
}

}  // namespace barge::runner
