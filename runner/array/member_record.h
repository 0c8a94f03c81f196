// What a job array's member job resolved, kept in the job store so that a
// verb acting on that job later (`barge down`, `exec`, `attach`, `forward`,
// `top`, through runner/cli's RecordedSpec) works on the member's own hosts
// with its host group's ssh settings, not on the job file's top level.
//
// The record is the member job's run request (RunRequest, kept by
// JobStore::SetRunRequest): the array's own (the job file's text, the
// overrides, the hosts files as read then, every host group's included)
// with RunRequest::Member: the array, the member's index and the hosts it
// took from its pool, by index. Nothing is read from disk again: the pool
// is the recorded job file's or hosts file's, and the row (which names the
// member's group) is the array's recorded row.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "runner/array/array_params.h"
#include "runner/jobfile/job_spec.h"
#include "runner/jobfile/overrides.h"

namespace barge::runner::array {

// Records, as job `job_id`'s run request, that it is member `index` of
// array `array_id` on hosts `hosts` of its pool (indices; one past the
// pool's end for the local engine of a job without hosts). An error when
// the store cannot be written or the array has no recorded run request.
[[nodiscard]] Status RecordMemberRun(const std::string& state_dir, const std::string& array_id, int index,
                                     const std::vector<size_t>& hosts, const std::string& job_id);

// Member `member`'s spec, as the array controller made it: `base` is the
// array's job as recorded, parsed again; `params` its recorded rows. An
// error when the row is gone or a recorded host is not in the pool.
[[nodiscard]] Result<JobSpec> MemberSpecFromRecord(const JobSpec& base, const ArrayParams& params,
                                                   const RunRequest::Member& member);

// MemberSpecFromRecord with the array's rows read from the store in
// `state_dir`.
[[nodiscard]] Result<JobSpec> RecordedMemberSpec(const std::string& state_dir, const JobSpec& base,
                                                 const RunRequest::Member& member);

}  // namespace barge::runner::array
