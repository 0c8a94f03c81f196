// The accounting over a job's phase spans (usage.h).
#include "runner/store/usage.h"

#include <algorithm>
#include <chrono>
#include <utility>

namespace barge::runner {
namespace {

constexpr const char* kStart = "start";
constexpr const char* kRunning = "running";
constexpr const char* kRemove = "remove";

using Spans = std::vector<const PhaseRecord*>;  // in the order they began

// The first of `spans` that began at or after `t`; nullptr if none.
const PhaseRecord* FirstFrom(const Spans& spans, TimePoint t) {
  for (const PhaseRecord* p : spans) {
    if (p->began >= t) return p;
  }
  return nullptr;
}

double Hours(TimePoint::duration d) {
  return std::chrono::duration<double, std::ratio<3600>>(d).count();
}

}  // namespace

std::vector<NodeHold> NodeHolds(const JobRecord& job, const std::vector<PhaseRecord>& phases, TimePoint now) {
  const TimePoint open_end = job.ended ? *job.ended : now;
  std::map<int, Spans> removes;                  // by host id
  std::map<std::pair<int, int>, Spans> running;  // by host id and rank
  std::vector<const PhaseRecord*> starts;
  for (const PhaseRecord& p : phases) {
    if (p.phase == kRemove) removes[p.host_id].push_back(&p);
    if (!p.rank) continue;
    if (p.phase == kRunning) running[{p.host_id, *p.rank}].push_back(&p);
    if (p.phase == kStart) starts.push_back(&p);
  }
  auto by_began = [](const PhaseRecord* a, const PhaseRecord* b) { return a->began < b->began; };
  for (auto& [id, spans] : removes) std::stable_sort(spans.begin(), spans.end(), by_began);
  for (auto& [key, spans] : running) std::stable_sort(spans.begin(), spans.end(), by_began);
  std::stable_sort(starts.begin(), starts.end(), by_began);

  std::vector<NodeHold> out;
  for (const PhaseRecord* s : starts) {
    NodeHold hold{s->host, *s->rank, s->gpus, s->began, open_end};
    if (const PhaseRecord* r = FirstFrom(removes[s->host_id], s->began)) {
      if (r->ended) hold.ended = *r->ended;
    } else if (const PhaseRecord* run = FirstFrom(running[{s->host_id, *s->rank}], s->began); run && run->ended) {
      hold.ended = *run->ended;
    }
    hold.ended = std::max(hold.ended, hold.began);
    out.push_back(std::move(hold));
  }
  return out;
}

Usage& Usage::operator+=(const Usage& other) {
  host_hours += other.host_hours;
  gpu_hours += other.gpu_hours;
  gpus_unknown = gpus_unknown || other.gpus_unknown;
  return *this;
}

std::map<std::string, Usage> UsageByHost(const std::vector<NodeHold>& holds, TimePoint from, TimePoint to) {
  std::map<std::string, std::vector<std::pair<TimePoint, TimePoint>>> held;  // clipped, per host
  std::map<std::string, Usage> out;
  for (const NodeHold& h : holds) {
    const TimePoint began = std::max(h.began, from);
    const TimePoint ended = std::min(h.ended, to);
    if (ended <= began) continue;
    held[h.host].emplace_back(began, ended);
    Usage& u = out[h.host];
    if (h.gpus) {
      u.gpu_hours += *h.gpus * Hours(ended - began);
    } else {
      u.gpus_unknown = true;
    }
  }
  // Host-hours: the union of the host's holds.
  for (auto& [host, spans] : held) {
    std::sort(spans.begin(), spans.end());
    TimePoint covered_to = spans.front().first;
    TimePoint::duration total{};
    for (const auto& [began, ended] : spans) {
      const TimePoint b = std::max(began, covered_to);
      if (ended > b) total += ended - b;
      covered_to = std::max(covered_to, ended);
    }
    out[host].host_hours = Hours(total);
  }
  return out;
}

Usage TotalUsage(const std::vector<NodeHold>& holds, TimePoint from, TimePoint to) {
  Usage total;
  for (const auto& [host, u] : UsageByHost(holds, from, to)) total += u;
  return total;
}

Result<std::map<std::string, Usage>> UsageByHostInStore(JobStore& store, TimePoint from, TimePoint now) {
  Result<std::vector<JobRecord>> jobs = store.ListJobs();
  if (!jobs.ok()) return jobs.status();
  std::vector<NodeHold> holds;
  for (const JobRecord& job : *jobs) {
    if (job.ended && *job.ended < from) continue;  // held nothing after `from`
    Result<std::vector<PhaseRecord>> phases = store.GetPhases(job.id);
    if (!phases.ok()) return phases.status();
    for (NodeHold& h : NodeHolds(job, *phases, now)) holds.push_back(std::move(h));
  }
  return UsageByHost(holds, from, now);
}

}  // namespace barge::runner
