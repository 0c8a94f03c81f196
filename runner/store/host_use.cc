// What the store knows of who holds and who waits for each host (host_use.h).
#include "runner/store/host_use.h"

#include <algorithm>
#include <map>
#include <set>

#include "runner/store/job_lookup.h"

namespace barge::runner {
namespace {

bool IsStatusEvent(const std::string& kind) {
  return std::any_of(kJobStatusNames.begin(), kJobStatusNames.end(),
                     [&](const auto& n) { return kind == n.name; });
}

// When the job last entered preflight (else when it was made), or, for a
// waiting job, when its current wait began, and what its last waiting
// event says it waits for.
void SinceOf(const JobRecord& job, const std::vector<EventRecord>& events, HostJob* out) {
  out->since = job.created;
  std::optional<TimePoint> preflight, wait_began;
  for (const EventRecord& e : events) {
    if (!IsStatusEvent(e.kind)) continue;
    if (e.kind == ToString(JobStatus::kWaiting)) {
      if (!wait_began) wait_began = e.at;
      out->detail = e.detail;
      continue;
    }
    wait_began.reset();
    if (e.kind == ToString(JobStatus::kPreflight)) preflight = e.at;
  }
  if (job.status == JobStatus::kWaiting) {
    if (wait_began) out->since = *wait_began;
  } else {
    out->detail.clear();
    if (preflight) out->since = *preflight;
  }
}

bool Before(const HostJob& a, const HostJob& b) {
  return a.since != b.since ? a.since < b.since : a.job_id < b.job_id;
}

}  // namespace

Result<std::vector<HostUse>> HostsInUse(JobStore& store) {
  Result<std::vector<JobRecord>> jobs = store.ListJobs();
  if (!jobs.ok()) return jobs.status();
  std::map<std::string, HostUse> by_host;
  for (JobRecord& job : *jobs) {
    if (IsFinal(job.status)) continue;
    if (Status s = MarkLostIfControllerGone(store, &job); !s.ok()) return s;
    if (IsFinal(job.status)) continue;
    Result<std::vector<HostRecord>> hosts = store.GetHosts(job.id);
    if (!hosts.ok()) return hosts.status();
    Result<std::vector<EventRecord>> events = store.GetEvents(job.id);
    if (!events.ok()) return events.status();
    HostJob use{job.id, job.name, job.status, {}, ""};
    SinceOf(job, *events, &use);
    std::set<int> replaced;
    for (const HostRecord& h : *hosts) {
      if (h.replaces) replaced.insert(*h.replaces);
    }
    std::set<std::string> seen;  // a host named twice (two host ids) counts once
    for (const HostRecord& h : *hosts) {
      if (replaced.count(h.host_id) || !seen.insert(h.name).second) continue;
      HostUse& u = by_host[h.name];
      u.host = h.name;
      (job.status == JobStatus::kWaiting ? u.queue : u.holds).push_back(use);
    }
  }
  std::vector<HostUse> out;
  for (auto& [name, u] : by_host) {
    std::sort(u.holds.begin(), u.holds.end(), Before);
    std::sort(u.queue.begin(), u.queue.end(), Before);
    out.push_back(std::move(u));
  }
  return out;
}

}  // namespace barge::runner
