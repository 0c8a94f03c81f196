// controller.h's entry points: each makes the event loop, the real host
// connector, the status line and the signal watcher, and hands them to a
// Controller (runner/controller/controller.h); plus the plan input and
// docker command helpers shared with `barge plan`.
#include "runner/controller/entry_points.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <type_traits>

#include <unistd.h>

#include "container/docker_args.h"
#include "runner/console/progress.h"
#include "runner/console/signals.h"
#include "runner/console/stdio_writer.h"
#include "runner/controller/controller.h"
#include "runner/controller/host_connector.h"
#include "runner/controller/host_verbs.h"
#include "runner/controller/job_observer.h"
#include "runner/jobfile/job_values.h"
#include "runner/remote/docker_commands.h"
#include "runner/remote/watchdog.h"
#include "runner/store/state_dir.h"
#include "ssh/event_loop.h"

namespace barge::runner {

cluster::PlanInput MakePlanInput(const JobSpec& spec, const std::string& job_id) {
  cluster::PlanInput in;
  in.job_id = job_id;
  in.job_name = spec.name;
  in.image = spec.image;
  in.command = spec.command;
  in.container = spec.container;
  in.hosts = spec.hosts;
  if (in.hosts.empty()) {
    cluster::Host local;
    local.address = cluster::kLocalAddress;
    in.hosts.push_back(local);
  }
  in.roles = spec.roles;
  in.rendezvous = spec.rendezvous;
  in.rdma = spec.network.rdma != RdmaUse::kOff;
  // The job's directory on each host has a name drawn when the host is
  // set up (NewHostJobDir): the plan carries the shown name, which MakePlan
  // replaces by each host's (PlanInput::host_paths, set by the controller).
  const std::string job_dir = HostJobDirShown(job_id);
  in.host_path = job_dir;
  if (spec.mpi) {
    in.mpi = spec.mpi;
    in.mpi->files_dir = MpiFilesDir(job_dir);
  }
  // workdir: and files: are mounted from the host's job directory into every
  // container, whatever volumes a role or host block sets.
  std::vector<std::string> mounts;
  if (spec.workdir) mounts.push_back(job_dir + "/workdir:" + spec.workdir->mount);
  for (size_t i = 0; i < spec.files.size(); ++i) {
    mounts.push_back(job_dir + "/files/" + std::to_string(i) + ":" + spec.files[i].to + ":ro");
  }
  // secrets: each one a read-only file at /run/secrets/NAME; those given as
  // environment come from an env file on the host (docker run --env-file),
  // so that no value is ever on a command line.
  for (const SecretSpec& secret : spec.secrets) {
    mounts.push_back(SecretsDir(job_dir) + "/" + secret.name + ":/run/secrets/" + secret.name + ":ro");
  }
  if (!mounts.empty()) {
    auto add = [&](container::ContainerOptions& o, bool always) {
      if (!o.volumes && !always) return;
      if (!o.volumes) o.volumes.emplace();
      o.volumes->insert(o.volumes->end(), mounts.begin(), mounts.end());
    };
    add(in.container, true);
    for (auto& [name, role] : in.roles) add(role.container, false);
    for (auto& host : in.hosts) add(host.container, false);
  }
  if (std::any_of(spec.secrets.begin(), spec.secrets.end(),
                  [](const SecretSpec& s) { return s.as_env; })) {
    const std::vector<std::string> env_file = {"--env-file", SecretEnvFile(job_dir)};
    auto add = [&](container::ContainerOptions& o, bool always) {
      if (!o.run_options && !always) return;
      if (!o.run_options) o.run_options.emplace();
      o.run_options->insert(o.run_options->begin(), env_file.begin(), env_file.end());
    };
    add(in.container, true);
    for (auto& [name, role] : in.roles) add(role.container, false);
    for (auto& host : in.hosts) add(host.container, false);
  }
  return in;
}

std::vector<std::string> DockerCommandOf(const JobSpec& spec, const cluster::Host& host,
                                         const std::string& job_dir) {
  const std::string& text = host.docker_command ? *host.docker_command : spec.docker_command;
  Result<std::vector<std::string>> split = SplitDockerCommand(text);
  // Validated at parse time: the fallback is not reached.
  std::vector<std::string> words = split.ok() ? *split : std::vector<std::string>{"docker"};
  if (spec.registry && !job_dir.empty()) {
    words.push_back("--config");
    words.push_back(DockerConfigDir(job_dir));
  }
  return words;
}

using internal::Controller;
using internal::HostVerbs;

namespace {

// Where the status line and barge's messages go: on a terminal straight
// to stderr (the status line asks the terminal's width); elsewhere queued
// with everything else, so a stalled reader stalls nothing.
std::FILE* StatusFile(StdioWriter& stdio) {
  if (isatty(STDERR_FILENO)) return stderr;
  std::FILE* queued = stdio.err_file();
  return queued ? queued : stderr;
}

// What every entry point gives its Controller: one loop, the real
// connector, stdout and stderr that never block the loop, the status line
// on stderr, and the signals as interrupts.
struct Env {
  ssh::EventLoop loop;
  std::unique_ptr<HostConnector> connector;
  StdioWriter stdio{&loop};
  Progress progress{StatusFile(stdio), isatty(STDERR_FILENO) != 0};
  ProgressObserver status_line{&progress};
  ObserverList observers;
  std::unique_ptr<EventStreamObserver> events;

  explicit Env(const ControllerOptions& options)
      : connector(options.make_connector ? options.make_connector(&loop)
                                         : std::make_unique<SshHostConnector>(&loop)) {
    observers.Add(&status_line);
    if (options.events) {
      events = std::make_unique<EventStreamObserver>(options.events);
      observers.Add(events.get());
    }
  }
};

// Runs `fn(runner)` on a `Runner` (the Controller of a job, or the
// HostVerbs of a verb) made with the entry point's environment, with
// signals turned into its interrupts.
template <typename Runner, typename Fn>
int With(const JobSpec& spec, const cluster::PlanInput& input, const ControllerOptions& options, Fn fn) {
  Env env(options);
  ControllerOptions with_progress = options;
  with_progress.progress = &env.progress;
  with_progress.stdio = &env.stdio;
  Runner runner(spec, input, with_progress, &env.loop, env.connector.get(), &env.observers);
  SignalWatcher signals(&env.loop, [&runner](int signo) {
    if constexpr (std::is_same_v<Runner, Controller>) {
      runner.Interrupt(signo);  // the job says so
    } else {
      runner.Interrupt();
    }
  });
  return fn(runner);
}

// A verb on a recorded job's hosts (host_verbs.h).
template <typename Fn>
int WithVerbs(const JobSpec& spec, const cluster::PlanInput& input, const ControllerOptions& options, Fn fn) {
  return With<HostVerbs>(spec, input, options, fn);
}

}  // namespace

int AttachToOrphan(const JobSpec& spec, const cluster::PlanInput& input,
                   const ControllerOptions& options, const std::map<int, int64_t>& kept_through_ns,
                   std::optional<int64_t> restarted_at_ns) {
  return WithVerbs(spec, input, options,
                   [&](HostVerbs& c) { return c.AttachOrphan(kept_through_ns, restarted_at_ns); });
}

int ReapJobHosts(const JobSpec& spec, const cluster::PlanInput& input,
                 const ControllerOptions& options,
                 const std::function<bool(const std::string&)>& is_live) {
  return WithVerbs(spec, input, options, [&](HostVerbs& c) { return c.Reap(is_live); });
}

int ExecInJobNode(const JobSpec& spec, const cluster::PlanInput& input,
                  const ControllerOptions& options, int rank, const std::vector<std::string>& argv) {
  return WithVerbs(spec, input, options, [&](HostVerbs& c) { return c.ExecInNode(rank, argv); });
}

int ExecInteractiveInJobNode(const JobSpec& spec, const cluster::PlanInput& input,
                             const ControllerOptions& options, int rank,
                             const std::vector<std::string>& argv, bool tty) {
  return WithVerbs(spec, input, options, [&](HostVerbs& c) { return c.ExecInteractive(rank, argv, tty); });
}

int ForwardJobPorts(const JobSpec& spec, const cluster::PlanInput& input,
                    const ControllerOptions& options, const std::vector<ForwardSpec>& forwards) {
  return WithVerbs(spec, input, options, [&](HostVerbs& c) { return c.Forward(forwards); });
}

int ListJobHosts(const JobSpec& spec, const cluster::PlanInput& input, const ControllerOptions& options,
                 const std::string& label, std::vector<HostView>* views) {
  return WithVerbs(spec, input, options, [&](HostVerbs& c) { return c.ListHosts(label, views); });
}

int TopJob(const JobSpec& spec, const cluster::PlanInput& input, const ControllerOptions& options,
           const TopOptions& top) {
  return WithVerbs(spec, input, options, [&](HostVerbs& c) { return c.Top(top); });
}

int TearDownJob(const JobSpec& spec, const cluster::PlanInput& input,
                const ControllerOptions& options) {
  return WithVerbs(spec, input, options, [&](HostVerbs& c) { return c.TearDownOrphan(); });
}

int RunJob(const JobSpec& spec, const cluster::PlanInput& input, const ControllerOptions& options) {
  // A slurm: job's allocation is the Controller's too (slurm_allocation.h).
  return With<Controller>(spec, input, options, [](Controller& c) { return c.Run(); });
}

}  // namespace barge::runner
