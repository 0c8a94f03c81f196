// The accounting: how long a job held its hosts and GPUs, from its per-host
// phase spans (job_store.h). Pure but for UsageByHostInStore, which reads
// a store; the clock is a value.
//
// A node holds its host from the moment its `start` began (`docker run`)
// until the end of the first `remove` on its host that began after that
// (its container gone); else until the end of its `running` (a host lost
// mid-job has no remove); else until the job's end; else, while the job
// lives, until `now`. A restart's new nodes are new spans.
//
// Host-hours count each host once while any of the nodes given holds it (a
// head and two workers on one machine hold it once; so do two jobs that
// share a host at once, when their holds are summed together). GPU-hours are each
// node's span times the GPUs it was given (PhaseRecord::gpus); a node whose
// GPU count barge did not know counts none and is flagged.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/time_point.h"
#include "runner/store/job_store.h"

namespace barge::runner {

// One node's hold of its host.
struct NodeHold {
  std::string host;  // the host's name, as PhaseRecord::host
  int rank = 0;
  std::optional<int> gpus;  // nullopt: not known
  TimePoint began{};
  TimePoint ended{};
};

// Every node hold `phases` show for `job`, in the order their starts began.
std::vector<NodeHold> NodeHolds(const JobRecord& job, const std::vector<PhaseRecord>& phases, TimePoint now);

struct Usage {
  double host_hours = 0;
  double gpu_hours = 0;
  // A node with GPUs of a count barge did not know held its host in the
  // window: gpu_hours leaves it out.
  bool gpus_unknown = false;

  Usage& operator+=(const Usage& other);
};

// The part of `holds` inside [from, to], per host name.
std::map<std::string, Usage> UsageByHost(const std::vector<NodeHold>& holds, TimePoint from, TimePoint to);
// The same, summed over the hosts.
Usage TotalUsage(const std::vector<NodeHold>& holds, TimePoint from, TimePoint to);

// UsageByHost of the holds of every job of `store` together, for [from,
// now]: a host two jobs held at once counts once for host-hours (the
// dashboard's hosts page: each host's recent use).
[[nodiscard]] Result<std::map<std::string, Usage>> UsageByHostInStore(JobStore& store, TimePoint from,
                                                                      TimePoint now);

}  // namespace barge::runner
