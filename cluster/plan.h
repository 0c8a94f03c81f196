// The Plan: pure data computed from a job, saying which container runs on
// which host with which rank, role, flags and rendezvous environment.
// `barge plan` prints it; `barge run` executes it. Computing it touches
// nothing.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"
#include "cluster/inventory.h"
#include "cluster/mpi.h"
#include "cluster/roles.h"
#include "container/container_spec.h"

namespace barge::cluster {

// What the plan needs to know of a job (runner's JobSpec, minus transport).
struct PlanInput {
  std::string job_id;
  std::string job_name;
  std::string image;                                // job-wide default
  std::optional<std::vector<std::string>> command;  // job-wide default
  container::ContainerOptions container;            // job-wide default
  std::vector<Host> hosts;                          // at least one
  std::map<std::string, RoleSpec> roles;            // may be empty
  RendezvousOptions rendezvous;
  // More labels on every node's container, after barge's own (a slurm:
  // job's barge.slurm_job, for a node's Slurm epilog).
  container::KeyValues extra_labels;
  int restart_count = 0;
  // GPUs per host, by host index, when known from a live host (preflight).
  // Overrides nothing: the inventory's `gpus` wins when set.
  std::map<size_t, int> detected_gpus;
  // `mpi:`: workers run sshd and start first; the head runs the command.
  std::optional<MpiOptions> mpi;
  // Internal addresses settled at run time from the connections (by host
  // index), for hosts named by a name and without internal_address
  // (runner/remote/host_address.h). MakePlan fills each such host's
  // internal_address from here.
  std::map<size_t, std::string> reached_addresses;
  // GPU indices other jobs hold, by host index (from the hosts'
  // reservations). A node asking for a GPU count on a host whose inventory
  // sets `gpus` gets free devices of its own (cluster/gpu_slices.h).
  std::map<size_t, std::set<int>> held_gpus;
  // A path prefix that differs by host (the runner's job directory on each
  // host, whose name is drawn when the host is set up): every volume source
  // and run option of a node that starts with `host_path` has that prefix
  // replaced by `host_paths[its host index]` where one is known; the plan
  // shows `host_path` itself where none is (`barge plan`).
  std::string host_path;
  std::map<size_t, std::string> host_paths;
  // The interface that carries each host's internal address, found at
  // preflight, by host index. Nodes on the host's network get
  // NCCL_SOCKET_IFNAME (NCCL's exact-match form, "=IFACE") and
  // GLOO_SOCKET_IFNAME set to it, unless the job sets them. An entry ""
  // (the host could not tell) sets nothing; a host with no entry shows a
  // placeholder (`barge plan`).
  std::map<size_t, std::string> host_ifaces;
  // RDMA (a job's `network: {rdma: auto|required}`): every node on a host
  // whose entry names active HCAs gets `--device /dev/infiniband`,
  // `--ulimit memlock=-1`, `--cap-add IPC_LOCK` and NCCL_IB_HCA naming
  // exactly those HCAs ("=mlx5_0,mlx5_1"), unless the job sets it. An empty
  // entry (the host has none) adds nothing; a host with no entry shows the
  // flags with a placeholder HCA list (`barge plan`).
  bool rdma = false;
  std::map<size_t, std::vector<std::string>> host_rdma;
};

struct NodePlan {
  int rank = 0;
  std::string role;       // kHeadRole or kWorkerRole
  size_t host_index = 0;  // into Plan::hosts
  int slot = 0;           // 0-based index among this job's nodes on that host
  // The host's GPU indices this node was given (its slice), ascending, when
  // it asked for a count on a host with `gpus` in the inventory; then
  // container.options.gpus is GpuDeviceValue of them. Empty otherwise.
  std::vector<int> gpu_devices;
  container::ContainerSpec container;
};

// One step of the launch, as data: start `ranks` in parallel, then wait
// until `gate` holds for each of them before the next stage starts.
// "head, readiness, workers" is one plan; MPI's "workers' sshd, then the
// head" another.
struct LaunchStage {
  std::string name;        // "head", "workers"
  std::vector<int> ranks;  // in rank order
  ReadinessProbe gate;     // kRunning: the container started is enough
};

struct Plan {
  std::string job_id;
  std::string job_name;
  // The input's hosts, all of them, each with the internal address settled
  // at run time (PlanInput::reached_addresses) filled in.
  std::vector<Host> hosts;
  std::vector<NodePlan> nodes;  // in rank order; nodes[0] is the head
  ReadinessProbe head_ready;
  // The launch order; every node is in exactly one stage.
  std::vector<LaunchStage> stages;
  // Hosts that carry at least one node, in inventory order.
  std::vector<size_t> used_hosts;
  // True when some env value is a placeholder only a live host can fill.
  bool has_placeholders = false;
  // An MPI job's nodes as its launcher reaches them, in rank order; empty
  // for any other job.
  std::vector<MpiNode> mpi_nodes;
};

// Container names and labels barge gives every container of a job.
std::string ContainerName(const std::string& job_name, const std::string& job_id, int rank);
inline constexpr const char* kJobLabel = "barge.job";
inline constexpr const char* kRoleLabel = "barge.role";
inline constexpr const char* kRankLabel = "barge.rank";
// On a slurm: job's containers: the Slurm job id of the allocation they run in.
inline constexpr const char* kSlurmJobLabel = "barge.slurm_job";

// The internal address of a host: its internal_address, else its address;
// for the local engine, 127.0.0.1. (For a host named by a name, `barge run`
// settles internal_address from the connection before it plans.)
std::string InternalAddress(const Host& host);

// Fails (without side effects) when the input is inconsistent, e.g. more
// workers asked for than hosts can carry, or more GPUs than a host has free.
[[nodiscard]] Result<Plan> MakePlan(const PlanInput& in);

}  // namespace barge::cluster
