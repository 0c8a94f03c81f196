// The Controller runs one job to its end: connect → preflight → start head →
// ready → start workers → running → completing → torn down, and returns
// barge's exit code (the head's own code, else one of
// runner/console/exit_codes.h).
//
// It is driven by one ssh::EventLoop: every remote command is a channel on
// its host's one session (or a local child process), and Poll is the only
// place it blocks. Single-threaded except for the parallel SSH connects,
// which finish before the loop starts. The shape inside is described in
// runner/controller/controller.h.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <memory>
#include <vector>
#include <string>

#include "base/status.h"
#include "cluster/plan.h"
#include "runner/console/exit_codes.h"
#include "runner/console/failure.h"
#include "runner/jobfile/job_spec.h"
#include "runner/remote/hosts_view.h"

namespace barge::ssh {
class EventLoop;
class Executor;
}  // namespace barge::ssh

namespace barge::runner {

class HostConnector;
class Progress;
class StdioWriter;

struct ControllerOptions {
  std::string state_dir;  // StateDir() unless a test says otherwise
  bool echo = true;       // container lines to the terminal
  std::string spec_text;  // the job file as run, for the job store
  // `--events json`: one JSON object per job event, written here (not
  // owned; null: none). See EventStreamObserver.
  std::FILE* events = nullptr;
  // The status line, which the containers' echoed lines clear and redraw
  // (set by the entry points; not owned).
  Progress* progress = nullptr;
  // Where container lines echoed to the terminal go, never blocking the
  // loop (set by the entry points; not owned; null: straight to stdout).
  StdioWriter* stdio = nullptr;
  // Serve the job file's `forward:` entries (an attached `barge run`; a
  // detached controller does not).
  bool serve_forwards = false;
  // `barge run --wait`: a host held by another job is waited for (up to the
  // job's `wait:`, 30 minutes without one) instead of failing the job.
  bool wait = false;
  // With `wait`: no limit without the job's `wait:` (a job array's member:
  // runner/array/array_runner.h).
  bool wait_unbounded = false;
  // `barge hosts --gpus`: each host's GPUs too (gpu_health.h).
  bool hosts_gpus = false;
  // `barge hosts --forgive HOST`: that host's failure record is forgiven
  // (a "forgiven" entry with who and when; runner/remote/host_record.h)
  // before it is listed.
  std::string hosts_forgive;
  // Where a slurm: job's Slurm commands run (runner/controller/
  // slurm_allocation.h), made on the job's loop; unset: ConnectSubmitHost
  // (this machine, or slurm.login over SSH). A unit test gives scripted
  // commands.
  std::function<Result<std::unique_ptr<ssh::Executor>>(ssh::EventLoop*)> connect_slurm_submit;
  // How the hosts are reached; unset: SSH (SshHostConnector). The verbs on
  // a slurm: job with transport srun reach them as job steps
  // (srun_connector.h); its Controller makes that connector itself, once
  // Slurm granted the allocation.
  std::function<std::unique_ptr<HostConnector>(ssh::EventLoop*)> make_connector;
};

// `input` is the job's PlanInput (with job id); the plan is made again after
// preflight once live hosts have filled in what only they know.
int RunJob(const JobSpec& spec, const cluster::PlanInput& input, const ControllerOptions& options);

// `barge down` of a job whose controller is gone (see Controller): removes
// the job's containers on its hosts by label, runs its teardown hooks.
int TearDownJob(const JobSpec& spec, const cluster::PlanInput& input,
                const ControllerOptions& options);

// `barge reap`: removes, on every host of `spec`, each barge-labelled
// container whose job `is_live` reports as not running.
int ReapJobHosts(const JobSpec& spec, const cluster::PlanInput& input,
                 const ControllerOptions& options,
                 const std::function<bool(const std::string&)>& is_live);

// `barge exec`: runs `argv` in node `rank`'s container; returns its code.
int ExecInJobNode(const JobSpec& spec, const cluster::PlanInput& input,
                  const ControllerOptions& options, int rank, const std::vector<std::string>& argv);

// `barge exec -i` / `-it`: `argv` in node `rank`'s container with this
// process's stdin passed through, and with `tty`, a pseudo-terminal (raw
// mode here, window-size changes passed on); returns its exit code.
int ExecInteractiveInJobNode(const JobSpec& spec, const cluster::PlanInput& input,
                             const ControllerOptions& options, int rank,
                             const std::vector<std::string>& argv, bool tty);

// `barge forward JOB [LOCAL:]REMOTE --node RANK` (and `barge attach`'s
// forwards): serves `forwards` over fresh sessions to the nodes' hosts until
// an interrupt (0) or a host refuses forwarding or is lost (125). A busy
// local port fails at once, before connecting.
int ForwardJobPorts(const JobSpec& spec, const cluster::PlanInput& input,
                    const ControllerOptions& options, const std::vector<ForwardSpec>& forwards);

// `barge top JOB`: a sample of every node's CPU, memory, network and GPUs
// every `every`, as a table (or, with `once`, one sample; `json` as JSON).
struct TopOptions {
  bool once = false;
  bool json = false;
  std::chrono::milliseconds every{2000};
};
int TopJob(const JobSpec& spec, const cluster::PlanInput& input, const ControllerOptions& options,
           const TopOptions& top);

// `barge hosts`: every host of `spec`'s holds and running barge containers,
// from the hosts themselves (runner/remote/hosts_view.h), added to `views`
// (each host named with `label` after it when not empty); 125 when a host
// could not be asked.
int ListJobHosts(const JobSpec& spec, const cluster::PlanInput& input, const ControllerOptions& options,
                 const std::string& label, std::vector<HostView>* views);

// `barge attach` to a job whose controller is gone (see Controller).
int AttachToOrphan(const JobSpec& spec, const cluster::PlanInput& input,
                   const ControllerOptions& options, const std::map<int, int64_t>& kept_through_ns,
                   std::optional<int64_t> restarted_at_ns = std::nullopt);

// Helpers shared with `barge plan`.
cluster::PlanInput MakePlanInput(const JobSpec& spec, const std::string& job_id);
// The host's docker command words; for a job with a `registry:` (given
// the job's directory on the host, `job_dir`), followed by `--config
// DockerConfigDir(job_dir)`, so that every docker command of the job on
// that host sees the job's own login and no other (the host user's
// ~/.docker is neither read nor changed).
std::vector<std::string> DockerCommandOf(const JobSpec& spec, const cluster::Host& host,
                                         const std::string& job_dir = "");

}  // namespace barge::runner
