// Which of this store's live jobs hold each host and which wait for it, as
// the store knows it (the dashboard's hosts page; the hosts themselves hold
// the truth, `barge hosts` asks them). A job holds a host from the moment
// it last entered preflight (where it takes its holds) until it ends; a
// job whose status is `waiting` stands in the host's queue from the moment
// it began to wait, the second its ticket carries, so the queue's order is
// the tickets' (since, job id).
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "runner/store/job_store.h"

namespace barge::runner {

struct HostJob {
  std::string job_id;
  std::string job_name;
  JobStatus status = JobStatus::kPreflight;
  TimePoint since{};
  std::string detail;  // a waiting job's "for HOST (held by ...)", as its last waiting event says
};

struct HostUse {
  std::string host;            // as the jobs name it (HostRecord::name)
  std::vector<HostJob> holds;  // by since, then job id
  std::vector<HostJob> queue;  // waiting jobs, by since, then job id
};

// Every host a live job (not final) of `store` uses now (a host a spare
// replaced is not), by host name. A job whose controller is gone is marked
// lost first (MarkLostIfControllerGone) and left out.
[[nodiscard]] Result<std::vector<HostUse>> HostsInUse(JobStore& store);

}  // namespace barge::runner
