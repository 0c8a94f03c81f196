// The job-array verbs, called by main.cc: `barge run --array` / `array:`,
// `barge plan --array`, and `ls`, `show`, `logs --index`, `down` and
// `rerun --failed` of an array. Each prints its result and returns barge's
// exit code (125 on an error, printed as "barge: MESSAGE").
//
// An array is named like a job (its id, the latest array of a name, or a
// unique id prefix); an array is looked for first, then a job.
#pragma once

#include <cstdio>
#include <functional>
#include <optional>
#include <string>

#include "base/status.h"
#include "runner/fleet/array_params.h"
#include "runner/jobs_cli.h"
#include "runner/job_spec.h"

namespace barge::runner::fleet {

// The rows of the job's array: from `array_file` (--array) when given, else
// from the job file's `array:`; nullopt when the job is not an array. The
// rows are checked against the job (substitutions, images, the pool).
[[nodiscard]] Result<std::optional<ArrayParams>> ArrayParamsOf(const JobSpec& spec,
                                                               const std::string& array_file);

// `barge run` of an array: records it (`request_json`: how it was run, as
// for a job) and runs it, in this process or (`detach`) in a process of
// its own that outlives this one, printing the array id.
int RunArrayCommand(const JobSpec& spec, const ArrayParams& params, const std::string& request_json,
                    const std::string& spec_text, bool detach);

// `barge plan --array`: the first `shown` members' plans, each with its row
// and the hosts the pool would give it, then how many more. `print_plan`
// prints one member spec's plan (main.cc's plan printer); touches nothing.
int PlanArray(const JobSpec& spec, const ArrayParams& params,
              const std::function<int(const JobSpec&)>& print_plan, size_t shown = 3);

// The id of the array `text` names, if one does.
[[nodiscard]] Result<std::optional<std::string>> FindArray(const std::string& state_dir,
                                                           const std::string& text);

// `barge ls`: hides the members' jobs and adds one row per array
// ("array running: running 2, succeeded 5, failed 1, waiting 4").
[[nodiscard]] Status AddArraysToList(const std::string& state_dir, ListOptions* list);
// `barge ls ARRAY`: the members (the summary table with their job ids).
int ListArrayMembers(const std::string& state_dir, const std::string& array_id, std::FILE* out);
// `barge show ARRAY`: the array's header, counts and summary table.
int ShowArray(const std::string& state_dir, const std::string& array_id, std::FILE* out);
// `barge logs ARRAY --index N`: the job id of member N's last attempt.
[[nodiscard]] Result<std::string> MemberJobId(const std::string& state_dir, const std::string& array_id,
                                              int index);
// `barge down ARRAY`: a live array controller gets SIGTERM (it cancels the
// waiting members and stops the running ones) and is waited for; when it
// is gone, `down_job` is called for each member job that has not ended.
int DownArray(const std::string& state_dir, const std::string& array_id,
              const std::function<int(const std::string&)>& down_job);
// `barge rerun ARRAY --failed`: members that failed, were cancelled or never
// started run again (the others keep their outcome), under the same array
// id, with the job as recorded (`load` parses the recorded run request).
// `load` returns the spec and the spec text each member job records.
struct RecordedArrayJob {
  JobSpec spec;
  std::string spec_text;
};
int RerunArray(const std::string& state_dir, const std::string& array_id, bool detach,
               const std::function<std::optional<RecordedArrayJob>(const std::string& request_json)>& load);

}  // namespace barge::runner::fleet
