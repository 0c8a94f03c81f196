// `barge run --array ... --events json` / `--events-file`: the array
// controller's own events as JSON lines, in the envelope of a job's events
// (runner/controller/job_observer.h EventStreamObserver): every line one
// object with "at" (ISO-8601 UTC, ms), "type": "event", "kind" and "detail",
// plus the array's fields:
//   array_started   array, size, to_run, parallel
//   member_started  array, index, job, attempt, hosts
//   member_ended    array, index, job, attempt, exit_code, status
//                   (succeeded, retrying, failed, cancelled), retries (the
//                   retries this member has had so far in this run)
//   succeeded | failed | cancelled   array, exit_code, counts — always last
// The members' own job events are not in this stream (each member is a job
// of its own: `barge show JOB --json` has them).
//
// Writes and flushes one line per call; not thread-safe; does not own `out`.
#pragma once

#include <cstdio>
#include <string>

#include "runner/store/job_store.h"

namespace barge::runner::array {

class ArrayEventStream {
 public:
  // `out` may be null: every call is then a no-op.
  ArrayEventStream(std::FILE* out, std::string array_id) : out_(out), array_id_(std::move(array_id)) {}

  void ArrayStarted(int size, int to_run, int parallel, TimePoint at);
  void MemberStarted(int index, const std::string& job_id, int attempt, const std::string& hosts, TimePoint at);
  void MemberEnded(int index, const std::string& job_id, int attempt, int exit_code, const std::string& status,
                   int retries, TimePoint at);
  // `status`: succeeded, failed or cancelled (the kind of the line).
  void ArrayEnded(const std::string& status, int exit_code, const std::string& counts, TimePoint at);

 private:
  std::FILE* out_;
  std::string array_id_;
};

}  // namespace barge::runner::array
