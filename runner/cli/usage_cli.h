// `barge usage [--since TIME] [--by user|job|host] [--json]`: how many
// host-hours and GPU-hours the jobs of this store held (runner/store/usage.h:
// from each node's start to its container's removal, by the GPUs it was
// given), summed per user (the uid of the job's controller), per job or per
// host. Only the part of each hold after --since (a time such as
// 2024-05-01T12:00:00Z, or a duration before now such as 7d) counts; a job
// still running counts up to now.
//
// Table:   USER  JOBS  HOST-HOURS  GPU-HOURS          (--by user, the default)
//          JOB  NAME  USER  STATUS  HOST-HOURS  GPU-HOURS
//          HOST  JOBS  HOST-HOURS  GPU-HOURS
// then a TOTAL line. In each row and in the total, a host counts once while
// any of its jobs' nodes holds it (usage.h); GPU-hours add up. Hours print
// as FormatHours (runner/console/time_format.h); a GPU-hours value
// marked "*" leaves out nodes whose GPU count barge did not know (`gpus:
// all` with `health: {gpus: off}`), and a note under the table says so.
// JSON: {"since": ISO|null, "until": ISO, "by": "user", "rows": [{"user"
// (or "job", "name", "user", "status"; or "host"), "jobs" (user, host),
// "host_hours", "gpu_hours", "gpus_unknown"}], "total": {"host_hours",
// "gpu_hours", "gpus_unknown"}}.
//
// Exit codes and errors as in jobs_cli.h: 0, or 125 with "barge: MESSAGE"
// on `err`. A store that does not exist reads as empty. Jobs whose
// controller is gone are marked lost first.
#pragma once

#include <cstdio>
#include <optional>
#include <string>

#include "base/status.h"
#include "runner/store/job_store.h"
#include "runner/store/usage.h"

namespace barge::runner {

struct UsageOptions {
  std::optional<std::string> since;  // as typed
  std::string by = "user";           // user, job or host
  bool json = false;
};

int UsageCommand(const std::string& state_dir, const UsageOptions& options, std::FILE* out,
                 std::FILE* err = stderr);

// What job `job` of `store` held, all of it (up to `now` while it lives):
// `barge ls` and `barge show` print it.
[[nodiscard]] Result<Usage> JobUsage(JobStore& store, const JobRecord& job, TimePoint now);

// The user a job ran as: its controller's uid, by name where the system
// knows it ("uid 1234" otherwise), "-" when the record has none.
std::string JobUser(const JobRecord& job);

}  // namespace barge::runner
