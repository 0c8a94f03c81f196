// The verbs of barge's command line that the CLI11 tree calls (verb_tree.h;
// each family's options and its call are in the family's *_tree.cc), one
// family per file: run_verbs.cc (plan, run, rerun), job_verbs.cc (down,
// attach), node_verbs.cc (hosts, reap, exec, forward, top). The job history
// (ls, show, rm, prune) is jobs_cli.h, usage usage_cli.h, logs logs_cli.h, arrays array_cli.h,
// the dashboard runner/ui/ui_cli.h.
//
// Each verb prints what it has to say and returns barge's exit code: the
// job's, or kExitBargeFailure (125) for barge's own failures.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "runner/console/exit_codes.h"
#include "runner/controller/entry_points.h"
#include "runner/jobfile/job_file.h"
#include "runner/jobfile/overrides.h"
#include "runner/store/job_lookup.h"
#include "runner/store/job_store.h"

namespace barge::runner {

struct RecordedArrayJob;

// The first line of a recorded spec names the job file, so that `barge
// down` can parse it again with relative paths resolved as at run time.
inline constexpr const char* kSpecFileComment = "# barge job file: ";

// --- run_verbs.cc

// FindJob (runner/store/job_lookup.h) in `state_dir`, printing why not
// ("barge: no job matches 'x'").
std::optional<FoundJob> FindJobOrSay(const std::string& state_dir, const std::string& job_text);

// Parses `request` (its text as if read from request.file) with its
// overrides, the user's config.yaml and, for a rerun, the recorded hosts
// file; prints every error and returns nullopt on failure. `shown` is the
// job file's name in errors.
std::optional<LoadedJob> Load(const RunRequest& request, const std::string& shown,
                              SecretValues secrets = SecretValues::kRead, bool run_hosts_command = true);
// Reads the job file at `path` into a request with `overrides`; nullopt
// after saying why not.
std::optional<RunRequest> ReadRequest(const std::string& path, std::vector<Override> overrides);
// `barge plan FILE [--array PARAMS]`.
int Plan(const std::string& path, std::vector<Override> overrides, const std::string& array_file = "");

// `--events json`: the job's events as JSON lines on stdout (container
// output then goes only to the per-node files, so stdout stays parseable),
// or into `file` (a path, /dev/fd/N included) with the output echoed as
// usual.
struct EventsOption {
  std::string format;  // "" or "json"
  std::string file;    // "" = stdout
};
// `barge run`: records `request` in the store (how the job was run: the job
// file's text, the overrides, the hosts file as read), then runs the job,
// or the array of `array_file`; with `detach`, in a controller of its own
// in the background, printing the job id once it runs.
int Run(RunRequest request, const std::string& shown, bool detach, const EventsOption& events = {},
        const std::string& array_file = "", bool wait = false);
// `barge rerun JOB`: runs again what job JOB ran, from what was recorded.
int Rerun(const std::string& job_text, bool detach);
// A job array's recorded run request parsed again, for `barge rerun ARRAY
// --failed`; nullopt after printing why not.
std::optional<RecordedArrayJob> LoadRecordedArrayJob(const std::string& json);
// Parses the job as job `job` ran it (its recorded request), to act on its
// hosts: a job array's member job as that member, on its own hosts with its
// host group's ssh settings (runner/array/member_record.h); nullopt after
// printing why not.
std::optional<JobSpec> RecordedSpec(const JobRecord& job);
// The facts the plan of job `job_id` (its spec: RecordedSpec) is made from,
// as it ran: MakePlanInput, and for a slurm: job its allocation's nodes as
// the store recorded them (PlaceOnSlurmNodes; none while it was queued);
// nullopt after printing why not.
std::optional<cluster::PlanInput> RecordedPlanInput(const JobSpec& spec, const std::string& job_id);

// --- job_verbs.cc

// `barge down JOB`: the same teardown as completion, through its live
// controller (waited for until `deadline`) or, when that is gone, through
// the job's hosts.
int Down(const std::string& job_text,
         std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::now() +
                                                          std::chrono::minutes(10));
// `barge attach JOB`: the merged stream of a running job, all of it, live.
int Attach(const std::string& job_text);

// --- node_verbs.cc

// `barge hosts JOBFILE | --hosts a,b [--json]`.
int Hosts(const std::string& file, const std::string& hosts, bool json, bool gpus = false,
          const std::string& forgive = "");
// `barge reap FILE | --hosts a,b`: removes barge containers of no running job.
int Reap(const std::string& file, const std::string& hosts);
// `barge exec JOB --node RANK -- CMD...`.
int Exec(const std::string& job_text, int rank, const std::vector<std::string>& argv);
// `barge exec -i|-it JOB [--node RANK] -- CMD...`.
int ExecInteractive(const std::string& job_text, int rank, const std::vector<std::string>& argv, bool tty);
// `barge forward JOB [LOCAL:]REMOTE... [--node RANK]`: until Ctrl-C.
int Forward(const std::string& job_text, const std::vector<std::string>& ports, int rank,
            const std::string& socket_path);
// `barge top JOB [--once] [--json]`.
int Top(const std::string& job_text, TopOptions top);
// `barge __complete-jobs`: the store's job ids, then their names, one a
// line, for the completion scripts.
int CompleteJobs();

}  // namespace barge::runner
