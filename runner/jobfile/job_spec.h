// The job model: one job file, parsed and validated. A JobSpec is complete and
// consistent (see job_file.h); nothing in it has been checked against a live
// host yet.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/enum_names.h"
#include "cluster/inventory.h"
#include "cluster/mpi.h"
#include "cluster/roles.h"
#include "container/container_spec.h"
#include "ssh/session_options.h"

namespace barge::runner {

struct SshSettings {
  // Expanded, absolute paths; empty = ssh's defaults (~/.ssh/known_hosts,
  // ~/.ssh/config), as ssh::SessionOptions takes them.
  std::string known_hosts;
  std::string config_file;
  ssh::HostKeyChecking host_key_checking = ssh::HostKeyChecking::kStrict;
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(10)};
  // A host whose session has not answered for this long is lost (keepalive
  // requests on the open session; see ssh::SshExecutor).
  std::chrono::milliseconds dead_after{std::chrono::seconds(10)};
  // The Docker engine: each call barge makes to it (preflight, the probes
  // while a job runs) is bounded by engine_timeout, and the engine counts as
  // frozen (the host is lost) only after engine_misses calls in a row got no
  // answer. A busy engine is slow, not dead: this is longer than dead_after.
  std::chrono::milliseconds engine_timeout{std::chrono::seconds(20)};
  int engine_misses = 3;
  // Job-wide defaults for hosts that do not set their own.
  std::optional<std::string> user;
  std::optional<int> port;
  std::optional<std::string> identity_file;
  // Jump hosts for hosts that set none (ssh.proxy_jump; runner/jobfile/proxy_jump.h);
  // empty = the ssh config's ProxyJump, if any.
  std::vector<std::string> proxy_jump;
  // At most this many SSH handshakes in flight at once on the job's loop
  // (ssh::ConnectAll's queue): bounds the controller's CPU burst and keeps a jump host's or a
  // host's sshd MaxStartups (default 10:30:100) from refusing logins.
  int parallel_connects = 32;
};

// image_pull: when hosts pull the image; push copies it from here (sent
// once, relayed from host to host), push-direct too (sent to each host).
enum class ImagePull { kAlways, kMissing, kNever, kPush, kPushDirect };
inline constexpr auto kImagePullNames = std::to_array<EnumName<ImagePull>>(
    {{ImagePull::kAlways, "always"}, {ImagePull::kMissing, "missing"}, {ImagePull::kNever, "never"},
     {ImagePull::kPush, "push"}, {ImagePull::kPushDirect, "push-direct"}});
// Whether `p` copies the image from this machine.
constexpr bool Pushes(ImagePull p) { return p == ImagePull::kPush || p == ImagePull::kPushDirect; }
static_assert(ListsEveryValueInOrder(kImagePullNames));

// on_worker_exit: whether a worker that exits non-zero fails the job.
enum class OnWorkerExit { kFail, kIgnore };
inline constexpr auto kOnWorkerExitNames = std::to_array<EnumName<OnWorkerExit>>(
    {{OnWorkerExit::kFail, "fail"}, {OnWorkerExit::kIgnore, "ignore"}});
static_assert(ListsEveryValueInOrder(kOnWorkerExitNames));

// What ends an attempt and may restart the job (restart.on); the names are
// also the kinds of the store's fault events (event::kHostLost, ...).
// gpu_unhealthy: the in-run GPU health check (health.every) found a fatal
// problem (runner/controller/gpu_watch.h): a host fault.
enum class RestartCause { kHostLost, kNodeFailed, kPreempted, kHang, kGpuUnhealthy };
inline constexpr auto kRestartCauseNames = std::to_array<EnumName<RestartCause>>(
    {{RestartCause::kHostLost, "host_lost"}, {RestartCause::kNodeFailed, "node_failed"},
     {RestartCause::kPreempted, "preempted"}, {RestartCause::kHang, "hang"},
     {RestartCause::kGpuUnhealthy, "gpu_unhealthy"}});
static_assert(ListsEveryValueInOrder(kRestartCauseNames));

struct TeardownHooks {
  std::optional<std::string> host_command;   // run on each host over SSH
  std::optional<std::string> local_command;  // run on the controller, once per host
};

// `artifacts:` entry: files copied from containers back to
// STATE/runs/<job-id>/artifacts/<rank>/ periodically and before teardown.
struct ArtifactSpec {
  std::optional<int> rank;  // nullopt with all_nodes false = the head
  bool all_nodes = false;
  std::string path;  // absolute, inside the container
  std::optional<std::chrono::milliseconds> every;  // nullopt = only before teardown
  // `to:` "s3://BUCKET/KEY-TEMPLATE" ({job}, {name}, {rank}, {host}; without
  // {name}, "/{name}" is added): where the copies go (needs `storage:`);
  // "" = only into STATE/runs/<id>/artifacts/<rank>/.
  std::string to;
  // `local: false` (needs `to`): no copy on the controller; each file is
  // streamed from its host to `to` (runner/controller/artifact_stream.h).
  bool local = true;
};

// `workdir:` — a local directory shipped to every host's per-job directory
// (a tar stream over the open session) and mounted into every container.
struct WorkdirSpec {
  std::string path;                       // local directory, expanded
  std::string mount = "/workspace";       // where containers see it
  std::vector<std::string> exclude;       // tar --exclude patterns
};

// `files:` entry: one local file shipped likewise, mounted read-only at `to`.
struct FileSpec {
  std::string from;  // local file, expanded
  std::string to;    // absolute path in the container
};

// `restart:` — whole-job restarts after a fault. A restartable failure tears
// every node down (graceful stop, last artifacts), waits `backoff`, and
// launches again, on the same hosts or with a spare in place of a lost one.
struct RestartPolicy {
  int max_restarts = 0;
  // Causes that restart the job (the rest fail it): host_lost (the session
  // died or the engine stopped answering), node_failed (a container exited
  // non-zero or was killed before teardown began), preempted.
  bool on_host_lost = true;
  bool on_node_failed = true;
  bool on_preempted = true;
  // hang: the job made no progress (`progress:`) and says `on_hang: restart`.
  bool on_hang = true;
  // gpu_unhealthy: the next attempt runs without that GPU, or a spare host
  // in that host's place.
  bool on_gpu_unhealthy = true;
  std::chrono::milliseconds backoff{std::chrono::seconds(10)};
};

// `progress:` — what progress looks like while the job runs; a job that
// makes none for as long as it says has hung (runner/controller/
// progress_watch.h). From the moment the attempt's nodes all run:
//   silence  no rank printed anything for this long;
//   pattern  no rank printed a line matching this ECMAScript regular
//            expression (a step counter, say) for `within`.
// Checked every `every`. On a hang: `stop` fails the job (exit 123);
// `restart` restarts it when `restart:` allows (it counts as any fault).
enum class OnHang { kStop, kRestart };
inline constexpr auto kOnHangNames =
    std::to_array<EnumName<OnHang>>({{OnHang::kStop, "stop"}, {OnHang::kRestart, "restart"}});
static_assert(ListsEveryValueInOrder(kOnHangNames));
// `progress.stragglers:` — a rank whose last `steps` step times were each
// more than `factor` times the median rank's is a straggler (reported, the
// job goes on). A step's time is the interval between two of the rank's
// lines matching `pattern`, or, with `time`, the number of seconds its
// first group captures from a line.
struct StragglerSpec {
  double factor = 1.5;
  int steps = 5;
  std::optional<std::string> time;
};
// `progress.heartbeat:` — a file each rank's container touches (a path in
// the container); a hang when no rank's was modified for `within`.
struct HeartbeatSpec {
  std::string file;
  std::chrono::milliseconds within{};
};
// gpu_util: a hang where every GPU of a node stays below `below` percent
// for `for_` (sampled every `every` with nvidia-smi on the job's hosts:
// runner/controller/gpu_watch.h).
struct GpuUtilSpec {
  int below = 0;
  std::chrono::milliseconds for_{0};
};
struct ProgressSpec {
  std::optional<std::chrono::milliseconds> silence;
  std::optional<GpuUtilSpec> gpu_util;
  std::optional<std::string> pattern;
  std::optional<std::chrono::milliseconds> within;
  std::optional<HeartbeatSpec> heartbeat;
  std::optional<StragglerSpec> stragglers;
  std::chrono::milliseconds every{std::chrono::seconds(10)};
  OnHang on_hang = OnHang::kStop;
};

// `notify:` — a webhook the job's events are POSTed to
// (runner/controller/webhooks.h, docs/guide/notifications.md). The events'
// names; `started` is the first `running` of the job, `restarted` a restart.
inline constexpr std::string_view kNotifyEvents[] = {
    "started", "succeeded", "failed", "cancelled", "timed_out", "restarted", "host_lost",
    "node_failed", "preempted", "hang", "straggler", "gpu_unhealthy"};
struct NotifySpec {
  std::string url;  // from `url`, or read from `url_from` (then a secret)
  bool url_secret = false;
  std::vector<std::string> events = {"started", "succeeded", "failed", "cancelled", "timed_out", "restarted"};
  std::string secret;  // the HMAC key ("" = not signed); exact bytes
};

// `storage:` — the object store that s3:// destinations go to (AWS or any
// S3-compatible endpoint; runner/controller/s3_client.h). The credentials
// are read when the job file is validated (secrets from a file or barge's
// environment, or a profile of the AWS shared credentials file) and kept
// only in memory, like secrets:.
struct StorageSpec {
  std::string endpoint;  // scheme://host[:port]; "" = https://s3.REGION.amazonaws.com
  std::string region = "us-east-1";
  bool path_style = false;  // `addressing: path` (else virtual-host)
  std::string access_key;
  std::string secret_key;
  std::string session_token;  // "" = none
  std::string profile;        // where the keys came from, when a profile
  uint64_t part_size = 16ull << 20;
  int parallel = 4;
  std::string logs;  // "s3://BUCKET/KEY-TEMPLATE" for the kept logs; "" = none
};

// `on_failure:` — what a failed job leaves for a look before its teardown
// (runner/controller/keep.h). `keep`: its containers (stopped ranks to
// inspect, live ones still running), holds and leases stay this long after
// it failed, or until `barge down`; then the usual teardown. The hosts'
// watchdogs know the deadline (runner/remote/watchdog.h).
struct OnFailureSpec {
  std::chrono::milliseconds keep{0};
};

// `preemption:` — a command polled on every host; its success (exit 0)
// means "this host is going away".
struct PreemptionSpec {
  std::string command;
  std::chrono::milliseconds every{std::chrono::seconds(5)};
};

// `secrets:` entry. The value is read when the job file is validated (from a
// local file or from barge's own environment) and is kept only in memory:
// it reaches each host through the command's stdin over the open session
// (the job's per-host directory, mode 0600), the container through a
// read-only mount at /run/secrets/NAME and, unless `as_env: false`, its
// environment through `docker run --env-file`. It is never on a command
// line, in `barge plan`, in the job store or in barge's messages.
struct SecretSpec {
  std::string name;  // an environment variable name; also the file's name
  // Where the value came from, for messages: "file ~/.hf_token",
  // "env WANDB_API_KEY".
  std::string source;
  bool as_env = true;
  std::string value;  // exact bytes; empty when parsed with SecretValues::kSkip
};

// A secret as the container's environment gets it: without trailing line
// breaks (as a shell's "$(cat FILE)" would give it; a token file usually
// ends with one). Validation guarantees no line break, NUL or invalid UTF-8
// is left in it when `as_env` is set.
inline std::string EnvValueOf(const SecretSpec& s) {
  std::string v = s.value;
  while (!v.empty() && (v.back() == '\n' || v.back() == '\r')) v.pop_back();
  return v;
}

// `registry:` — every host logs in before the images are checked or pulled
// (`docker login --password-stdin`, the password on the command's stdin),
// into the job's own Docker client config in its per-host directory, and
// logs out at the end of the job.
struct RegistrySpec {
  std::string server;    // as `docker login` takes it: "ghcr.io", "registry.example.com:5000"
  std::string username;
  std::string password_source;  // "file ...", "env ...", for messages
  std::string password;  // without trailing line breaks; empty with SecretValues::kSkip
};

// `forward:` entry: while the job is attached (`barge run`, `barge attach`),
// 127.0.0.1:local_port on barge's machine reaches port remote_port of node
// `rank`, over the session to its host (runner/controller/forwards.h).
struct ForwardSpec {
  int local_port = 0;
  int remote_port = 0;
  int rank = 0;
  // `barge forward --socket PATH`: a unix socket (mode 0600) instead of
  // 127.0.0.1:local_port.
  std::string socket_path;
};

// `array:` (runner/array/): one member job per row of a CSV or JSON-lines
// file, or per combination of a matrix's values. Exactly one of `file` and
// `matrix` is set.
struct ArraySpec {
  std::string file;  // local file, expanded; "" with a matrix
  // Column name → its values, in the order the job file lists them.
  std::vector<std::pair<std::string, std::vector<std::string>>> matrix;
};

// `host_groups:` entry (runner/array/): a pool of hosts that job array rows
// naming it in their `host_group` column draw their hosts from, reached
// with the group's own ssh settings.
struct HostGroup {
  std::string name;
  std::vector<cluster::Host> hosts;  // Host::line counts in hosts_file when that is set
  std::string hosts_file;            // as errors name it; empty = listed in the job file
  // The job's `ssh:` (config file defaults included) with the keys the
  // group's own `ssh:` sets laid over it: what the group's members use.
  SshSettings ssh;
  std::vector<std::string> ssh_keys;  // the keys the group's `ssh:` sets, in table order
};

// health.gpus: how preflight judges the GPUs of hosts where the job asks
// for GPUs (runner/remote/gpu_health.h).
// dcgm: basic, then DCGM's quick diagnostic on the job's GPUs.
enum class GpuHealthLevel { kBasic, kDcgm, kOff };
inline constexpr auto kGpuHealthLevelNames = std::to_array<EnumName<GpuHealthLevel>>(
    {{GpuHealthLevel::kBasic, "basic"}, {GpuHealthLevel::kDcgm, "dcgm"}, {GpuHealthLevel::kOff, "off"}});
static_assert(ListsEveryValueInOrder(kGpuHealthLevelNames));

// network.rdma: whether the job's containers get the hosts' RDMA devices
// (runner/remote/rdma.h): off; auto (where a host has them, else sockets
// with a note); required (a host without them fails preflight).
enum class RdmaUse { kOff, kAuto, kRequired };
inline constexpr auto kRdmaUseNames = std::to_array<EnumName<RdmaUse>>(
    {{RdmaUse::kOff, "off"}, {RdmaUse::kAuto, "auto"}, {RdmaUse::kRequired, "required"}});
static_assert(ListsEveryValueInOrder(kRdmaUseNames));

// `network:` — the plumbing of the job's collective network.
struct NetworkSpec {
  RdmaUse rdma = RdmaUse::kOff;
};

// `health:` — the GPU health gate at preflight.
struct HealthSpec {
  GpuHealthLevel gpus = GpuHealthLevel::kBasic;
  // Xids older than this (by the kernel log's clock) are not counted.
  std::chrono::milliseconds xid_window{std::chrono::hours(24)};
  // The programs asked, on each host.
  std::string nvidia_smi = "nvidia-smi";
  std::string dcgmi = "dcgmi";
  // The same rules while the job runs, every `every` (nullopt: not run):
  // runner/controller/gpu_watch.h.
  std::optional<std::chrono::milliseconds> every;
  // health.xids: Xid codes over the defaults (gpu::XidPolicy).
  std::vector<int> xids_fatal;
  std::vector<int> xids_warning;
  std::vector<int> xids_ignore;
  // A host with more host-caused failures than this in `host_window`, by
  // its failure record on the host, is out (runner/remote/host_record.h).
  int host_failures = 1;
  std::chrono::milliseconds host_window{std::chrono::hours(24)};
};

// `slurm:` — the job's hosts are a Slurm allocation of this shape, asked
// for at `barge run` (runner/controller/slurm_run.h) and released at its end.
struct SlurmSpec {
  int nodes = 0;                      // hosts (Slurm nodes); required
  std::chrono::milliseconds time{0};  // the allocation's time limit; required
  std::string partition;              // "" = the cluster's default partition
  std::optional<int> gpus_per_node;   // --gpus-per-node; also each host's `gpus:`
  std::string account;                // --account; "" = none
  std::string qos;                    // --qos; "" = none
  // A submit host reached over SSH (the job's ssh: settings, but for the
  // user and port written with it: "[user@]host[:port]") where salloc,
  // squeue and scancel run; "" = this machine is a submit host.
  std::string login;
  std::optional<std::string> login_user;
  std::optional<int> login_port;
  std::optional<int> cpus_per_node;         // --cpus-per-task (one task a node)
  std::optional<std::string> mem_per_node;  // --mem, a size as written
  // Whole nodes (--exclusive): the containers run outside Slurm's cgroups,
  // so nothing else may share the node. false: shared nodes, where each
  // node's container gets exactly the allocation's share of its node as
  // Docker limits: --gpus with the GRES indices, --cpus with the CPU count,
  // --memory with Mem= (or mem_per_node where Slurm tracks no memory).
  bool exclusive = true;
  // How barge reaches the allocated nodes: over SSH (ssh:, the default), or
  // as Slurm job steps (srun --jobid --overlap -w NODE ..., started where
  // salloc ran) for clusters whose nodes refuse SSH.
  enum class Transport { kSsh, kSrun };
  Transport transport = Transport::kSsh;
  std::vector<std::string> extra;  // more salloc options, as written
  int line = 0;                    // of the `slurm:` key
};

// The address a Slurm job's host N (1-based) has until its allocation names
// the node: `barge plan` shows it where the address goes.
inline std::string SlurmNodePlaceholder(size_t n) { return "slurm-node-" + std::to_string(n); }

struct JobSpec {
  std::string file;      // the job file's path as given
  std::string base_dir;  // directory of the job file; relative paths resolve here
  std::string name;      // [A-Za-z0-9][A-Za-z0-9_.-]*, at most 63 chars
  std::string image;     // job-wide image; a role may override
  // Where each image was written, "FILE:LINE: KEY" ("job.yaml:3: image",
  // "job.yaml:9: roles.head.image"), for errors found on a host.
  std::map<std::string, std::string> image_written_at;
  std::optional<std::vector<std::string>> command;  // nullopt = image CMD
  container::ContainerOptions container;
  // Empty = one local host (the local Docker engine). Host::line counts in
  // hosts_file when that is set. Host::internal_address is left empty when
  // the file does not set it (cluster::InternalAddress supplies the default).
  std::vector<cluster::Host> hosts;
  // The file the hosts were read from, as error messages name it (joined to
  // the job file's directory as given); empty = listed in the job file.
  std::string hosts_file;
  // The hosts_command the hosts were read from (runner/jobfile/hosts_command.h),
  // as written; empty = none.
  std::string hosts_command;
  // True when hosts_command was run while reading the job (not taken from
  // a recorded output): `barge plan` says so.
  bool hosts_command_ran = false;
  std::string docker_command = "docker";  // job-wide; a host may override
  SshSettings ssh;
  // Keys "head" and/or "worker". Empty = every node runs the job's command,
  // rank 0 being the head.
  std::map<std::string, cluster::RoleSpec> roles;
  cluster::RendezvousOptions rendezvous;
  ImagePull image_pull = ImagePull::kMissing;
  OnWorkerExit on_worker_exit = OnWorkerExit::kFail;
  std::chrono::milliseconds stop_grace{std::chrono::seconds(10)};
  // The job ends as `timed_out` (graceful stop, teardown) once it has run
  // this long, counted from `barge run`'s start. nullopt = no limit.
  std::optional<std::chrono::milliseconds> timeout;
  // The hosts' watchdogs tear the job down when the controller has not
  // renewed its lease for this long (see runner/remote/watchdog.h).
  std::chrono::milliseconds lease{std::chrono::minutes(10)};
  // `wait:` — a host held by another job (runner/remote/reservation.h) is
  // waited for, this long at most, instead of failing the job at once.
  std::optional<std::chrono::milliseconds> wait;
  HealthSpec health;
  NetworkSpec network;
  std::vector<ArtifactSpec> artifacts;
  std::vector<ForwardSpec> forward;
  std::optional<WorkdirSpec> workdir;
  std::vector<FileSpec> files;
  TeardownHooks teardown;
  std::optional<RestartPolicy> restart;  // nullopt = a fault fails the job
  // Hosts that take a lost (or preempted) host's place at a restart, in
  // order; each takes over the nodes of the host it replaces.
  std::vector<cluster::Host> spare_hosts;
  std::optional<PreemptionSpec> preemption;
  std::vector<NotifySpec> notify;
  std::optional<StorageSpec> storage;
  std::optional<ProgressSpec> progress;
  std::optional<OnFailureSpec> on_failure;
  std::vector<SecretSpec> secrets;  // in the order the file lists them
  std::optional<RegistrySpec> registry;
  // `mpi:` — workers run the image's sshd and start first; the head runs
  // `command` (mpirun, horovodrun, deepspeed) and reaches them over SSH with
  // the job's own keys. files_dir is left empty (the runner sets it).
  std::optional<cluster::MpiOptions> mpi;
  // Job arrays (runner/array/): the rows, how many members run at once
  // (nullopt: as many as the pool of hosts fits), how often a failed member
  // is run again, and how many hosts each member takes from the pool
  // (nullopt: as many as its roles need).
  std::optional<ArraySpec> array;
  std::optional<int> parallel;
  int array_retries = 0;
  std::optional<int> hosts_per_member;
  // `host_groups:`, in the order the file lists them; empty = none.
  std::vector<HostGroup> host_groups;
  // `slurm:` — the hosts are an allocation of this shape; `hosts` then holds
  // one placeholder host per node (SlurmNodePlaceholder) until it is granted.
  std::optional<SlurmSpec> slurm;
};

}  // namespace barge::runner
