// The job-array verbs, called by main.cc: `barge run --array` / `array:`,
// `barge plan --array`, and `ls`, `show`, `logs --index`, `down` and
// `rerun --failed` of an array. Each prints its result and returns barge's
// exit code (125 on an error, printed as "barge: MESSAGE").
//
// An array is named like a job (its id, the latest array of a name, or a
// unique id prefix); an array is looked for first, then a job.
#pragma once

#include <chrono>
#include <cstdio>
#include <functional>
#include <optional>
#include <set>
#include <string>

#include "base/status.h"
#include "runner/array/array_params.h"
#include "runner/cli/jobs_cli.h"
#include "runner/jobfile/job_spec.h"

namespace barge::runner {

// The rows of the job's array: from `array_file` (--array) when given, else
// from the job file's `array:`; nullopt when the job is not an array. The
// rows are checked against the job (substitutions, images, the pool).
[[nodiscard]] Result<std::optional<array::ArrayParams>> ArrayParamsOf(const JobSpec& spec,
                                                               const std::string& array_file);

// `barge run` of an array: records it (`request_json`: how it was run, as
// for a job) and runs it, in this process or (`detach`) in a process of
// its own that outlives this one, printing the array id. `events`: the
// array's --events json lines (array_events.h; not owned; null: none).
int RunArrayCommand(const JobSpec& spec, const array::ArrayParams& params, const std::string& request_json,
                    const std::string& spec_text, bool detach, std::FILE* events = nullptr);

// `barge plan --array`: the first `shown` members' plans, each with its row
// and the hosts the pool would give it, then how many more. `print_plan`
// prints one member spec's plan (main.cc's plan printer); touches nothing.
int PlanArray(const JobSpec& spec, const array::ArrayParams& params,
              const std::function<int(const JobSpec&)>& print_plan, size_t shown = 3);

// The id of the array `text` names, if one does.
[[nodiscard]] Result<std::optional<std::string>> FindArray(const std::string& state_dir,
                                                           const std::string& text);

// `barge ls`: hides the members' jobs and adds one row per array
// ("array running: running 2, succeeded 5, failed 1, waiting 4"), and for
// --json one object per array: {"kind": "array", id, name, status,
// exit_code, size, parallel, retries, source, columns, created, ended,
// duration_s, controller_pid, run_dir, counts: {running, succeeded, failed,
// waiting, cancelled}, members: [{index, params, status, attempts,
// exit_code, job (the last attempt's id), job_ids, hosts, started, ended}]}.
//
// An array whose controller is gone is marked lost; its members recorded
// as running then take their job's outcome once that job has ended (each
// member is a barge process of its own and runs on without the array
// controller). Every verb below does the same.
[[nodiscard]] Status AddArraysToList(const std::string& state_dir, ListOptions* list);
// `barge ls ARRAY`: the members (the summary table with their job ids).
int ListArrayMembers(const std::string& state_dir, const std::string& array_id, std::FILE* out);
// `barge show ARRAY`: the array's header, counts and summary table; with
// `json`, the array's object as in `ls --json`.
int ShowArray(const std::string& state_dir, const std::string& array_id, std::FILE* out, bool json = false);
// `barge logs ARRAY --index N`: the job id of member N's last attempt.
[[nodiscard]] Result<std::string> MemberJobId(const std::string& state_dir, const std::string& array_id,
                                              int index);
// `barge down ARRAY`: a live array controller gets SIGTERM (it cancels the
// waiting members and stops the running ones) and is waited for; when it
// is gone, `down_job(job, deadline)` is called for each member job that has
// not ended. The whole of it is bounded (kDownArrayLimit): a member that
// cannot be stopped in time is named, with its job and what to do, and the
// exit code is 125.
inline constexpr std::chrono::seconds kDownArrayLimit{240};
int DownArray(const std::string& state_dir, const std::string& array_id,
              const std::function<int(const std::string&, std::chrono::steady_clock::time_point)>& down_job);
// `barge rerun ARRAY --failed` (`failed_only`): members that failed, were
// cancelled or never started run again (the others keep their outcome),
// under the same array id, with the job as recorded (`load` parses the
// recorded run request). `barge rerun ARRAY`: every member runs again, as
// a new array (new id, the same recorded job and rows), as `rerun JOB`
// makes a new job; the old array keeps its record. Both refuse while the
// array's controller or one of its member jobs runs.
// `load` returns the spec and the spec text each member job records.
struct RecordedArrayJob {
  JobSpec spec;
  std::string spec_text;
};
int RerunArray(const std::string& state_dir, const std::string& array_id, bool failed_only, bool detach,
               const std::function<std::optional<RecordedArrayJob>(const std::string& request_json)>& load);

// `barge rm ARRAY`: refuses while the array's controller or any member job
// runs (naming it, and `barge down ARRAY`); otherwise removes every member
// job as `barge rm JOB` does (record, logs, artifacts), the controller's
// run directory and the array's records. Prints what it removed.
int RemoveArrayCommand(const std::string& state_dir, const std::string& array_id, std::FILE* out,
                       std::FILE* err = stderr);

// `barge prune --older-than D`, for arrays (called before the jobs' prune):
// removes, as RemoveArrayCommand, each array that has ended (not running)
// before now - `older_than` and has no member job still live; adds the
// member job ids of every array kept to `kept_jobs`, which the jobs' prune
// must leave alone. 0, or 125 when one could not be removed.
int PruneArrays(const std::string& state_dir, std::chrono::milliseconds older_than, std::FILE* out,
                std::FILE* err, std::set<std::string>* kept_jobs);

}  // namespace barge::runner
