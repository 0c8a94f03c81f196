// Slurm's client commands as barge runs them on a submit host (this
// machine, or slurm.login over SSH), and the parsers of their answers.
// Pure: runner/controller/slurm_allocation.h runs them.
//
// The allocation is `salloc --no-shell` (it waits in Slurm's queue, prints
// "salloc: Pending job allocation J" / "salloc: Granted job allocation J" on
// stderr and exits once granted, leaving the allocation to the caller);
// `squeue` says what it waits for, `scontrol -o show job -d` which nodes
// (and GPU indices) it got, `scontrol -o show node` their addresses, and
// `scancel` ends it.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "runner/jobfile/job_spec.h"

namespace barge::runner::slurm {

// salloc --time's value for `limit`, rounded up to whole minutes (Slurm's
// granularity): "D-HH:MM:SS".
std::string TimeLimit(std::chrono::milliseconds limit);

// The name the allocation carries: "barge-<job id>-<job name>", so that
// squeue and sacct show which barge job it is.
std::string AllocationName(const std::string& job_id, const std::string& job_name);

// The command line that asks for the allocation (see the header). Its
// options in this order: --no-shell, --job-name, --nodes, --ntasks-per-node=1,
// --time, then --partition, --account, --qos, --gpus-per-node,
// --cpus-per-task (the node's one task), --mem (MiB, rounded up),
// --exclusive as set, then `extra` as written.
std::string SallocLine(const SlurmSpec& spec, const std::string& job_id, const std::string& job_name);

// The Slurm job id salloc's stderr so far names ("job allocation 123"),
// or nullopt when it names none yet.
std::optional<std::string> JobIdInSalloc(std::string_view stderr_text);

// `squeue -h -j ID -o '%T|%r'`: the job's state and reason.
std::string SqueueLine(const std::string& id);
struct QueueState {
  std::string state;   // PENDING, RUNNING, ... ("" when squeue knows the job no more)
  std::string reason;  // Priority, Resources, None, ...
};
// One "STATE|REASON" line; an empty answer is a job squeue knows no more.
Result<QueueState> ParseSqueue(std::string_view output);

// `scontrol -o show job -d ID`.
std::string ShowJobLine(const std::string& id);
// What the job got on one node (-d's per-node details).
struct JobNode {
  std::string name;
  std::vector<int> gpus;  // the GRES gpu indices Slurm gave the job there
  int cpus = 0;           // how many CPUs (CPU_IDs counted; Slurm's own
                          // numbering, so only the count is used)
  long long mem_mb = 0;   // Mem= in MiB; 0 where Slurm does not track memory
};
struct JobInfo {
  std::string state;      // JobState=
  std::string reason;     // Reason=
  std::string partition;  // Partition=
  std::string node_list;  // NodeList= (a hostlist; "(null)" while pending)
  std::vector<JobNode> nodes;  // NodeList expanded, in Slurm's order
};
// scontrol's one-line record (-o), with -d's per-node details ("Nodes=h1
// CPU_IDs=0-1 Mem=0 GRES=gpu:2(IDX:0-1)") on the same line.
Result<JobInfo> ParseShowJob(std::string_view output);

// `scontrol -o show node NAMES` (NAMES a hostlist): one line per node.
std::string ShowNodesLine(const std::string& names);
// Each node's NodeAddr by NodeName.
Result<std::map<std::string, std::string>> ParseNodeAddresses(std::string_view output);

// A job step of allocation `id` on node `node` that runs one POSIX sh
// command line: srun --jobid ID --overlap (beside the job's other steps) on
// one task there, in /, output unbuffered, Slurm's own messages quieted,
// running kSrunStepProgram with /bin/sh -c. The step gets srun's
// environment (Slurm's default) and srun's stdin (Slurm's default: srun
// passes it on to the task).
//
// The line itself is on no command line: not srun's on the submit host,
// where every user of that machine can read it in /proc for as long as the
// step takes to start (and a job directory named there could be made first
// by one of them), nor the step's on the node. The caller writes
// SrunStdinLine(line) to the step's stdin first; what it writes after that
// is the line's commands' stdin, and its EOF theirs.
std::string SrunLine(const std::string& id, const std::string& node);

// What the step runs: reads one line of stdin (the shell's `read` takes
// bytes from a pipe one at a time, so not one byte more), decodes it with
// the builtin printf %b (a '.' after it, dropped again before the eval,
// keeps the trailing newlines $(...) would strip), and evals the result
// in the same shell, so that its exit status, signals and output are the
// step's. All builtins: on the node too the line is on no process's argv
// (only the commands it runs carry their own words). Without a line on
// stdin it exits 125, saying so on stderr.
inline constexpr std::string_view kSrunStepProgram =
    "IFS= read -r barge_line || { echo barge: no command line on standard input >&2; exit 125; }; "
    "barge_line=$(printf %b. \"$barge_line\"); eval \"unset barge_line;${barge_line%.}\"";

// `line` as the first line of a SrunLine step's stdin: each byte outside
// printable ASCII, and the backslash, as printf %b's octal escape \0NNN
// (newlines included), then "\n".
std::string SrunStdinLine(std::string_view line);

// `scancel ID`.
std::string ScancelLine(const std::string& id);

// What an operator runs to take a node out of service (barge never does it
// itself): `scontrol update nodename=NODE state=drain reason="..."`.
std::string DrainCommand(const std::string& node, const std::string& reason);

// Slurm's hostlist syntax expanded, in order: "h[1-3,7],gpu05" is h1 h2 h3
// h7 gpu05; zero-padded ranges keep their width ("n[08-10]": n08 n09 n10).
// An error for brackets that do not close, a range that runs backwards, or
// more than kMaxHostlistNames names in all (a broken or hostile slurmctld
// must not fill the controller's memory: "n[0-99999],m[0-99999],..." ).
inline constexpr size_t kMaxHostlistNames = 100000;
Result<std::vector<std::string>> ExpandHostlist(std::string_view list);

}  // namespace barge::runner::slurm
