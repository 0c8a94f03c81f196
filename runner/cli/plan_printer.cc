#include "runner/cli/plan_printer.h"

#include <algorithm>

#include <cstdlib>
#include <ostream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "runner/console/time_format.h"
#include "runner/controller/entry_points.h"
#include "runner/remote/slurm.h"
#include "container/docker_api.h"
#include "container/create_body.h"
#include "container/docker_args.h"
#include "runner/remote/docker_commands.h"
#include "runner/remote/gpu_health.h"
#include "runner/remote/host_address.h"
#include "runner/remote/image_relay.h"
#include "runner/remote/rdma.h"
#include "runner/remote/watchdog.h"

namespace barge::runner {
namespace {

// Where `barge run` may start nodes through the Engine API: the plain
// docker CLI (preflight then looks for the engine's socket), unless
// BARGE_ENGINE_API=0 (as runner/controller/preflight.cc decides).
bool EngineApiCandidate(const DockerCommands& docker) {
  const char* v = std::getenv("BARGE_ENGINE_API");
  return docker.plain() && (v == nullptr || std::string(v) != "0");
}

std::string Transport(const JobSpec& spec, const cluster::Host& host) {
  if (host.is_local()) return "the local Docker engine, no SSH (commands run with /bin/sh -c)";
  std::string user = host.user ? *host.user : spec.ssh.user ? *spec.ssh.user : "";
  std::optional<int> port = host.port ? host.port : spec.ssh.port;
  std::string target = (user.empty() ? "" : user + "@") + host.address +
                       (port ? ":" + std::to_string(*port) : "");
  const std::vector<std::string>& jump = host.proxy_jump ? *host.proxy_jump : spec.ssh.proxy_jump;
  std::string via;
  for (const std::string& hop : jump) via += (via.empty() ? " through ProxyJump " : ",") + hop;
  return "ssh " + target + via + " (one session; each command below is one channel on it)";
}

}  // namespace

std::string GateText(const cluster::ReadinessProbe& gate) {
  using Kind = cluster::ReadinessProbe::Kind;
  const long long secs =
      std::chrono::duration_cast<std::chrono::seconds>(gate.timeout).count();
  switch (gate.kind) {
    case Kind::kRunning: return "go on once each container runs";
    case Kind::kTcpPort:
      return "wait until port " + std::to_string(gate.tcp_port) + " listens in each (at most " +
             std::to_string(secs) + " s)";
    case Kind::kLog:
      return "wait for a log line matching /" + gate.log_regex + "/ from each (at most " +
             std::to_string(secs) + " s)";
    case Kind::kCommand:
      return "wait until `" + gate.command + "` succeeds in each (at most " + std::to_string(secs) + " s)";
  }
  return "";
}

namespace {

// A slurm: job: where its hosts come from, and the commands that ask for
// them and give them back.
std::string SlurmLines(const JobSpec& spec, const std::string& job_id) {
  if (!spec.slurm) return "";
  const std::string where = spec.slurm->login.empty() ? "on this machine" : "on " + spec.slurm->login + " over ssh";
  return "# The hosts are a Slurm allocation, asked for " + where + " (each change of its place in the queue\n"
         "# is printed; slurm-node-N stands for its N-th node, the head on the first):\n" +
         slurm::SallocLine(*spec.slurm, job_id, spec.name) + "\n" +
         "# then, once granted: " + slurm::ShowJobLine("<ID>") + "; " + slurm::ShowNodesLine("<NODES>") +
         "\n# and at the job's end, however it ends: " + slurm::ScancelLine("<ID>") + "\n" +
         (spec.slurm->exclusive ? ""
                                : "# Shared nodes: each container gets its node's share of the allocation instead "
                                  "of the\n# container blocks' GPUs, CPUs and memory: --gpus \"device=<its GPU "
                                  "indices>\", --cpus <its CPUs>,\n# --memory <its Mem, else mem_per_node>.\n");
}

// The nodes of `plan` on host `h`, in the plan's order.
std::vector<const cluster::NodePlan*> NodesOn(const cluster::Plan& plan, size_t h) {
  std::vector<const cluster::NodePlan*> nodes;
  for (const auto& n : plan.nodes)
    if (n.host_index == h) nodes.push_back(&n);
  return nodes;
}

// The plan's opening comment lines: the job, where its hosts come from, the
// nodes and hosts it uses, and its launch stages in order.
void WriteHeader(std::ostream& out, const JobSpec& spec, const cluster::Plan& plan) {
  out << "# barge plan: job '" << plan.job_name << "' from " << spec.file << "\n"
      << "# The job id is chosen at run time; this plan uses " << plan.job_id << ".\n"
      << (spec.hosts_command.empty() ? ""
                                     : std::string("# The hosts are what hosts_command printed") +
                                           (spec.hosts_command_ran ? ", run just now on this machine"
                                                                   : " (recorded)") +
                                           ": " + spec.hosts_command + "\n")
      << SlurmLines(spec, plan.job_id)
      << "# " << plan.nodes.size() << " node(s) on " << plan.used_hosts.size()
      << " host(s). Nothing below has been run.\n";
  if (plan.has_placeholders) {
    out << "# <...> values are filled in at preflight from the live hosts.\n";
  }
  out << "# Launch stages, in order:\n";
  for (size_t i = 0; i < plan.stages.size(); ++i) {
    const cluster::LaunchStage& stage = plan.stages[i];
    out << "#   " << i + 1 << ". " << stage.name << ": start node";
    if (stage.ranks.size() > 1) out << "s";
    for (size_t r = 0; r < stage.ranks.size(); ++r) out << (r ? "," : "") << " " << stage.ranks[r];
    out << " in parallel; then " << GateText(stage.gate) << "\n";
  }
}

// Preflight's engine calls on a host: how they are made, then each image's
// check (and pull or load) and the GPU probe.
void WriteImageChecks(std::ostream& out, const JobSpec& spec, const DockerCommands& docker,
                      const std::vector<const cluster::NodePlan*>& nodes) {
  if (EngineApiCandidate(docker)) {
    // preflight.cc: the host's part as a script, the engine's part over the API.
    out << "# preflight: one remote script (POSIX-shell probe, watchdog, disk, ports, the engine's\n"
           "# socket); where the socket answers, the holds and the image checks then go through the\n"
           "# Engine API (GET /images/NAME/json per image, each call bounded by ssh.engine_timeout,\n"
           "# tried ssh.engine_misses times); where it does not (or BARGE_ENGINE_API=0), a second\n"
           "# script makes these engine calls, each under timeout -s KILL ssh.engine_timeout:\n";
  } else {
    out << "# preflight: one remote script (POSIX-shell probe, watchdog, disk, these engine\n"
           "# calls each under timeout -s KILL ssh.engine_timeout, tried ssh.engine_misses times)\n";
  }
  std::set<std::string> images;
  for (const auto* n : nodes) images.insert(n->container.image);
  for (const auto& image : images) {
    if (spec.image_pull == ImagePull::kAlways) {
      out << docker.Pull(image) << " >/dev/null && " << docker.ImageId(image) << "\n";
      continue;
    }
    out << docker.Line(container::ImageStorageInspectArgs(image)) << "\n";
    if (spec.image_pull == ImagePull::kMissing) {
      out << "#   when missing: " << docker.Pull(image) << "\n";
    } else if (spec.image_pull == ImagePull::kPushDirect) {
      out << "#   when missing: docker save " << image << " here, streamed into: " << docker.Load()
          << "\n";
    } else if (spec.image_pull == ImagePull::kPush) {
      out << "#   when missing: docker save " << image << " here, sent once and relayed host to host"
          << " (each host: tee into its own " << docker.Load() << " and into ssh to up to "
          << kRelayFanOut << " more hosts, with a key made for the push); where the relay fails,"
          << " streamed into: " << docker.Load() << "\n";
    }
  }
  out << "#   when an image check fails, or to pull: " << docker.Version() << "\n";
  for (const auto* n : nodes) {
    if (n->container.options.gpus) {
      out << docker.GpuProbe(n->container) << "\n";
      break;
    }
  }
}

// The host checks of preflight's script that the job's settings ask for:
// GPU health (when a node there has GPUs), the interface of host networking,
// RDMA devices.
void WriteHostChecks(std::ostream& out, const JobSpec& spec, const cluster::Host& host,
                     const std::vector<const cluster::NodePlan*>& nodes) {
  const bool gpus = std::any_of(nodes.begin(), nodes.end(), [](const auto* n) { return n->container.options.gpus.has_value(); });
  if (gpus && spec.health.gpus != GpuHealthLevel::kOff) {
    // preflight.cc through gpu_gate.cc: the same lines, in the same script.
    const auto window = std::chrono::duration_cast<std::chrono::hours>(spec.health.xid_window).count();
    out << "# GPU health (health.gpus: basic, Xids of the last " << window
        << " h): the driver is asked in the same script; an\n"
           "# unhealthy GPU is taken out of what the host offers, an unhealthy host stops the job:\n"
        << gpu::GpuHealthLines(spec.health.nvidia_smi,
                               std::clamp(std::chrono::duration_cast<std::chrono::seconds>(spec.ssh.engine_timeout),
                                          std::chrono::seconds(5), std::chrono::seconds(30)));
    if (spec.health.gpus == GpuHealthLevel::kDcgm) {
      out << "# then (health.gpus: dcgm) DCGM's quick diagnostic on the GPUs the job holds there, e.g.:\n"
          << gpu::DcgmDiagCommand(spec.health.dcgmi, {0}, std::chrono::seconds(120)) << "\n";
    }
  }
  // runner/controller/gpu_watch.h: the command sampled while the job runs.
  const bool watch_health = spec.health.every && spec.health.gpus != GpuHealthLevel::kOff;
  const bool watch_util = spec.progress && spec.progress->gpu_util;
  if (gpus && (watch_health || watch_util)) {
    out << "# while the job runs, every "
        << FormatDuration(watch_util ? spec.progress->every : *spec.health.every)
        << " on the job's session (" << (watch_health ? "health.every" : "") << (watch_health && watch_util ? ", " : "")
        << (watch_util ? "progress.gpu_util" : "") << "):\n"
        << gpu::GpuWatchCommand(spec.health.nvidia_smi,
                                std::clamp(std::chrono::duration_cast<std::chrono::seconds>(spec.ssh.engine_timeout),
                                           std::chrono::seconds(5), std::chrono::seconds(30)),
                                watch_health, watch_util);
  }
  const bool host_network = std::any_of(nodes.begin(), nodes.end(), [](const auto* n) {
    return n->container.options.network && *n->container.options.network == "host";
  });
  if (host_network) {
    out << "# NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME: the interface that carries "
        << cluster::InternalAddress(host) << ", from (in the same script):\n"
        << InterfacesCommand() << "\n";
  }
  if (spec.network.rdma != RdmaUse::kOff) {
    out << "# RDMA (network.rdma: " << NameOf(kRdmaUseNames, spec.network.rdma)
        << "): the host's verbs devices and HCA ports, from (in the same script):\n"
        << rdma::RdmaCommand() << "\n"
        << (spec.network.rdma == RdmaUse::kRequired
                ? "#   a host without a verbs device and an active HCA fails preflight\n"
                : "#   a host without a verbs device and an active HCA gets none of the RDMA flags (sockets)\n");
  }
}

// The commands that write the job's secrets into `job_dir` on a host (none
// without secrets).
void WriteSecrets(std::ostream& out, const JobSpec& spec, const std::string& job_dir) {
  if (spec.secrets.empty()) return;
  out << "# secrets, each value written to the command's stdin (mode 0600), mounted at "
         "/run/secrets/NAME\n";
  std::string env_names;
  for (const SecretSpec& secret : spec.secrets) {
    out << WriteSecretCommand(job_dir, SecretsDir(job_dir) + "/" + secret.name) << "   # "
        << secret.source << "\n";
    if (secret.as_env) env_names += (env_names.empty() ? "" : " ") + secret.name;
  }
  if (!env_names.empty()) {
    out << WriteSecretCommand(job_dir, SecretEnvFile(job_dir)) << "   # NAME=VALUE of " << env_names
        << ", for --env-file\n";
  }
}

// An MPI job's commands on a host (none for other jobs): the images' uid
// (and the workers' sshd) probes, then each node's key and config files.
void WriteMpiFiles(std::ostream& out, const cluster::Plan& plan, const DockerCommands& docker,
                   const std::vector<const cluster::NodePlan*>& nodes, const std::string& job_dir) {
  if (plan.mpi_nodes.empty()) return;
  std::set<std::string> worker_images, head_images;
  for (const auto* n : nodes) {
    (n->rank != 0 ? worker_images : head_images).insert(n->container.image);
  }
  for (const auto& image : worker_images) {
    out << docker.ImageUserId(image, cluster::kSshdPath)
        << "   # mpi: the workers' sshd, and the uid the image runs as\n";
  }
  for (const auto& image : head_images) {
    if (worker_images.count(image)) continue;
    out << docker.ImageUserId(image, "") << "   # mpi: the uid the head's image runs as\n";
  }
  out << "# mpi: the job's keys, made here in memory (ed25519), and each node's files, each "
         "written to the command's stdin (mode 0600; for an image running as a non-root uid, "
         "0644 in a 0755 directory under a 0700 one), mounted read-only at "
      << cluster::kMpiDir << "\n";
  for (const auto* n : nodes) {
    const std::string dir = MpiFilesDir(job_dir) + "/" + std::to_string(n->rank) + "/";
    const std::vector<std::string> files =
        n->rank == 0 ? std::vector<std::string>{"id_ed25519", "id_ed25519.pub", "known_hosts",
                                                "ssh_config", "hostfile"}
                     : std::vector<std::string>{"ssh_host_ed25519_key", "ssh_host_ed25519_key.pub",
                                                "authorized_keys"};
    for (const std::string& f : files) out << WriteSecretCommand(job_dir, dir + f) << "\n";
  }
}

// How node `n`'s container is made, started and waited for: through the
// Engine API where the host may have it (with the CLI's fallback), else the
// docker CLI.
void WriteContainerStart(std::ostream& out, const DockerCommands& docker, const cluster::NodePlan& n) {
  if (!EngineApiCandidate(docker)) {
    out << docker.Run(n.container) << "\n";
    out << docker.Logs(n.container.name) << "\n";
    out << docker.Wait(n.container.name) << "\n";
    return;
  }
  // node_streams_api.cc: create, then attach and start through the Engine API.
  const std::string path = "/v" + std::string(container::kDefaultApiVersion) + "/containers/" +
                           container::UrlEncode(n.container.name);
  if (Result<std::string> body = container::CreateBody(n.container); body.ok()) {
    out << "# made through the Engine API over the session: POST /v"
        << container::kDefaultApiVersion << "/containers/create?name="
        << container::UrlEncode(n.container.name)
        << " with this line's settings as JSON (the same container: container/create_body.h)\n";
    out << "#   " << docker.Create(n.container) << "\n";
  } else {
    out << "# made with the CLI (" << body.status().message() << "):\n";
    out << docker.Create(n.container) << "\n";
  }
  out << "# then through the Engine API over the session: POST " << path
      << "/attach?stream=1&stdout=1&stderr=1 (its live output), POST " << path
      << "/start once attached, GET " << path << "/json (and POST " << path
      << "/wait while it still runs) once the output ends\n";
  out << "# where the engine's socket does not answer (or BARGE_ENGINE_API=0): `docker run -d` "
         "with the same arguments, then:\n";
  out << "#   " << docker.Logs(n.container.name) << "\n";
  out << "#   " << docker.Wait(n.container.name) << "\n";
}

// Node `n` on `host`: its rank, role and stage, the GPUs barge chose for
// it, and its container's commands.
void WriteNode(std::ostream& out, const cluster::Plan& plan, const cluster::Host& host,
               const DockerCommands& docker, const cluster::NodePlan& n) {
  size_t stage = 0;
  for (size_t i = 0; i < plan.stages.size(); ++i) {
    for (int r : plan.stages[i].ranks) {
      if (r == n.rank) stage = i + 1;
    }
  }
  out << "# node " << n.rank << " (" << n.role << "), stage " << stage << " ("
      << plan.stages[stage - 1].name << ")\n";
  if (!n.gpu_devices.empty()) {
    std::string ids;
    for (int d : n.gpu_devices) ids += (ids.empty() ? "" : ",") + std::to_string(d);
    out << "# GPUs " << ids << " of the host's " << host.gpus.value_or(0)
        << ", chosen by barge (as if no other job held any; at run time it skips those held)\n";
  }
  WriteContainerStart(out, docker, n);
}

// The end of the job on a host: the workers stopped (within stop_grace),
// every container removed, the registry logged out of.
void WriteTeardown(std::ostream& out, const JobSpec& spec, const DockerCommands& docker,
                   const std::vector<const cluster::NodePlan*>& nodes, const std::string& job_dir) {
  const int grace = static_cast<int>(
      std::chrono::duration_cast<std::chrono::seconds>(spec.stop_grace).count());
  std::vector<std::string> workers, all;
  for (const auto* n : nodes) {
    all.push_back(n->container.name);
    if (n->rank != 0) workers.push_back(n->container.name);
  }
  out << "# teardown, once the head has exited\n";
  if (!workers.empty()) out << docker.Stop(workers, grace) << "\n";
  out << docker.Remove(all) << "\n";
  if (spec.registry) {
    out << docker.Logout(DockerConfigDir(job_dir), spec.registry->server) << "\n";
  }
}

// Everything `barge run` sends to host `h` of the plan, in order, under its
// heading (and its address note, if any).
void WriteHost(std::ostream& out, const JobSpec& spec, const cluster::Plan& plan, size_t h,
               const std::map<size_t, std::string>& address_notes) {
  const cluster::Host& host = plan.hosts[h];
  // The job's directory there is drawn when the host is set up; the plan
  // shows its pattern.
  const std::string job_dir = HostJobDirShown(plan.job_id);
  DockerCommands docker(DockerCommandOf(spec, host, job_dir));
  const std::vector<const cluster::NodePlan*> nodes = NodesOn(plan, h);
  out << "\n## host " << host.address << ": " << Transport(spec, host) << "\n";
  if (auto note = address_notes.find(h); note != address_notes.end()) {
    out << "# " << note->second << "\n";
  }
  if (spec.registry) {
    out << "# registry login, the password written to the command's stdin (" +
               spec.registry->password_source + "); docker logout at the end\n"
        << docker.Login(DockerConfigDir(job_dir), spec.registry->server,
                        spec.registry->username)
        << "\n";
  }
  WriteImageChecks(out, spec, docker, nodes);
  WriteHostChecks(out, spec, host, nodes);
  WriteSecrets(out, spec, job_dir);
  WriteMpiFiles(out, plan, docker, nodes, job_dir);
  for (const auto* n : nodes) WriteNode(out, plan, host, docker, *n);
  WriteTeardown(out, spec, docker, nodes, job_dir);
}

}  // namespace

std::string FormatPlan(const JobSpec& spec, const cluster::Plan& plan,
                       const std::map<size_t, std::string>& address_notes) {
  std::ostringstream out;
  WriteHeader(out, spec, plan);
  for (size_t h : plan.used_hosts) WriteHost(out, spec, plan, h, address_notes);
  return out.str();
}

}  // namespace barge::runner
