#include "cluster/plan.h"

#include <algorithm>

#include "cluster/gpu_slices.h"
#include "cluster/rendezvous.h"

namespace barge::cluster {

std::string ContainerName(const std::string& job_name, const std::string& job_id, int rank) {
  return "barge-" + job_name + "-" + job_id + "-" + std::to_string(rank);
}

std::string InternalAddress(const Host& host) {
  if (!host.internal_address.empty()) return host.internal_address;
  if (host.is_local()) return "127.0.0.1";
  return host.address;
}

namespace {

// MakePlan runs in stages, each a function below: the hosts' settled
// addresses; the layout (which slot carries which rank, each node's merged
// options, GPU slices and GPU counts); the MPI launcher's view of the nodes;
// one NodePlan per rank (identity, rendezvous env, network interface, RDMA,
// MPI, the user's env, host paths); the hosts in use; the launch stages.
// Every stage reads the input and what earlier stages settled, and none
// changes what an earlier one settled.

struct Slot {
  size_t host_index;
  int slot;
};

// Every container slot in inventory order, the head's slot moved first.
std::vector<Slot> OrderedSlots(const std::vector<Host>& hosts) {
  size_t head_host = 0;
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (hosts[i].role && *hosts[i].role == kHeadRole) {
      head_host = i;
      break;
    }
  }
  std::vector<Slot> slots;
  slots.push_back({head_host, 0});
  for (size_t i = 0; i < hosts.size(); ++i) {
    for (int s = 0; s < std::max(hosts[i].nodes, 1); ++s) {
      if (i == head_host && s == 0) continue;
      slots.push_back({i, s});
    }
  }
  return slots;
}

const RoleSpec* FindRole(const std::map<std::string, RoleSpec>& roles, const std::string& name) {
  auto it = roles.find(name);
  return it == roles.end() ? nullptr : &it->second;
}

// Where the job's nodes go and what each asked for, settled before any node
// is planned; the per-node stages only read it. Vectors are indexed by rank.
struct PlanLayout {
  const RoleSpec* head_role = nullptr;    // into PlanInput::roles; may be null
  const RoleSpec* worker_role = nullptr;  // likewise
  std::vector<Slot> slots;                // slots[0] is the head's
  std::vector<std::string> addresses;     // each node's internal address
  // Job-wide options, then the role's, then the host's; a sliced node's
  // `gpus` names its slice.
  std::vector<container::ContainerOptions> options;
  std::map<int, std::vector<int>> slices;  // GPU devices by rank, sliced nodes only
  std::vector<std::optional<int>> gpus;    // GPUs per node; nullopt: only a live host knows
  std::optional<int> total_gpus;           // their sum; nullopt when one is unknown
};

// The input's hosts, each without an internal_address given the one settled
// at run time (PlanInput::reached_addresses), if any.
std::vector<Host> SettledHosts(const PlanInput& in) {
  std::vector<Host> hosts = in.hosts;
  for (const auto& [h, address] : in.reached_addresses) {
    if (h < hosts.size() && hosts[h].internal_address.empty()) {
      hosts[h].internal_address = address;
    }
  }
  return hosts;
}

// The slots that carry a node, in rank order: the head's, then every other
// one, or the first roles.worker.count of them. Fails when that count is
// negative or more than the hosts carry besides the head.
Result<std::vector<Slot>> NodeSlots(const std::vector<Host>& hosts, const RoleSpec* worker_role) {
  std::vector<Slot> slots = OrderedSlots(hosts);
  size_t workers = slots.size() - 1;
  if (worker_role && worker_role->count) {
    if (*worker_role->count < 0) return Status::Error("roles.worker.count must not be negative");
    if (static_cast<size_t>(*worker_role->count) > workers) {
      return Status::Error("roles.worker.count is " + std::to_string(*worker_role->count) +
                           " but the hosts carry only " + std::to_string(workers) +
                           " nodes besides the head");
    }
    workers = *worker_role->count;
  }
  slots.resize(workers + 1);
  return slots;
}

// Each node's container options: job-wide, then its role's, then its
// host's.
std::vector<container::ContainerOptions> MergedOptions(const PlanInput& in, const PlanLayout& layout) {
  std::vector<container::ContainerOptions> merged;
  for (size_t rank = 0; rank < layout.slots.size(); ++rank) {
    const RoleSpec* role = rank == 0 ? layout.head_role : layout.worker_role;
    container::ContainerOptions options = in.container;
    if (role) options = container::Merge(options, role->container);
    merged.push_back(container::Merge(options, in.hosts[layout.slots[rank].host_index].container));
  }
  return merged;
}

// GPU slices: a node asking for a count on a host whose inventory says how
// many GPUs it has gets devices of its own (cluster/gpu_slices.h), avoiding
// those other jobs hold and those this job's nodes list. Returns the slices
// by rank and sets each sliced node's `gpus` in `options` to its devices.
// Fails, with `options` untouched, when a host has too few free GPUs.
Result<std::map<int, std::vector<int>>> SliceGpus(const PlanInput& in, const std::vector<Slot>& slots,
                                                  std::vector<container::ContainerOptions>* options) {
  std::vector<GpuClaim> claims;
  std::map<size_t, HostGpus> offered;
  for (size_t rank = 0; rank < slots.size(); ++rank) {
    const size_t h = slots[rank].host_index;
    const Host& host = in.hosts[h];
    const container::ContainerOptions& asked = (*options)[rank];
    if (!host.gpus || !asked.gpus) continue;
    HostGpus& o = offered[h];
    o.address = host.address;
    o.total = *host.gpus;
    if (auto held = in.held_gpus.find(h); held != in.held_gpus.end()) o.held = held->second;
    if (std::optional<int> count = GpuCount(*asked.gpus)) {
      claims.push_back(GpuClaim{static_cast<int>(rank), h, *count});
    } else {
      for (int d : GpuDeviceIndices(*asked.gpus)) o.listed.insert(d);
    }
  }
  if (claims.empty()) return std::map<int, std::vector<int>>{};
  Result<std::map<int, std::vector<int>>> got = AllocateGpuSlices(claims, offered);
  if (!got.ok()) return got.status();
  for (auto& [rank, devices] : *got) (*options)[rank].gpus = GpuDeviceValue(devices);
  return got;
}

// GPUs per node, by rank: a node's slice, else its host's GPUs from the
// inventory, else from the live host (PlanInput::detected_gpus), else
// nullopt (only a live host can tell).
std::vector<std::optional<int>> NodeGpuCounts(const PlanInput& in, const PlanLayout& layout) {
  std::vector<std::optional<int>> counts;
  for (size_t rank = 0; rank < layout.slots.size(); ++rank) {
    const size_t h = layout.slots[rank].host_index;
    if (auto it = layout.slices.find(static_cast<int>(rank)); it != layout.slices.end()) {
      counts.push_back(static_cast<int>(it->second.size()));
    } else if (in.hosts[h].gpus) {
      counts.push_back(in.hosts[h].gpus);
    } else if (auto found = in.detected_gpus.find(h); found != in.detected_gpus.end()) {
      counts.push_back(found->second);
    } else {
      counts.push_back(std::nullopt);
    }
  }
  return counts;
}

// The sum of the nodes' GPUs; nullopt when some node's count is unknown.
std::optional<int> TotalGpus(const std::vector<std::optional<int>>& counts) {
  std::optional<int> total = 0;
  for (const std::optional<int>& g : counts) {
    if (g && total) {
      *total += *g;
    } else {
      total.reset();
    }
  }
  return total;
}

// The layout stage: roles, slots, addresses (of the settled `hosts`),
// merged options, GPU slices and counts. Fails when the worker count does
// not fit the hosts (NodeSlots) or the GPUs asked for do not (SliceGpus).
Result<PlanLayout> MakeLayout(const PlanInput& in, const std::vector<Host>& hosts) {
  PlanLayout layout;
  layout.head_role = FindRole(in.roles, kHeadRole);
  layout.worker_role = FindRole(in.roles, kWorkerRole);
  Result<std::vector<Slot>> slots = NodeSlots(in.hosts, layout.worker_role);
  if (!slots.ok()) return slots.status();
  layout.slots = std::move(slots).value();
  for (const Slot& s : layout.slots) layout.addresses.push_back(InternalAddress(hosts[s.host_index]));
  layout.options = MergedOptions(in, layout);
  Result<std::map<int, std::vector<int>>> slices = SliceGpus(in, layout.slots, &layout.options);
  if (!slices.ok()) return slices.status();
  layout.slices = std::move(slices).value();
  layout.gpus = NodeGpuCounts(in, layout);
  layout.total_gpus = TotalGpus(layout.gpus);
  return layout;
}

// MPI: where each node's sshd listens (the job's port plus the node's slot
// on its host), what the launcher calls it (its address, or a name of its
// own where its host carries several nodes), and its slots
// (slots_per_node, else the node's GPUs, else a placeholder when only the
// live host knows them, else 1). Sets *has_placeholders for a placeholder.
std::vector<MpiNode> MpiNodes(const PlanInput& in, const PlanLayout& layout, bool* has_placeholders) {
  std::map<size_t, int> per_host;
  for (const Slot& s : layout.slots) ++per_host[s.host_index];
  std::vector<MpiNode> nodes;
  for (size_t rank = 0; rank < layout.slots.size(); ++rank) {
    const Slot& s = layout.slots[rank];
    const Host& host = in.hosts[s.host_index];
    MpiNode m;
    m.rank = static_cast<int>(rank);
    m.address = layout.addresses[rank];
    m.port = in.mpi->port + s.slot;
    m.name = per_host[s.host_index] > 1 ? "barge-rank-" + std::to_string(rank) : m.address;
    const container::ContainerOptions& options = layout.options[rank];
    if (in.mpi->slots_per_node) {
      m.slots = std::to_string(*in.mpi->slots_per_node);
    } else if (std::optional<int> g = layout.gpus[rank]; g && *g > 0) {
      m.slots = std::to_string(*g);
    } else if (options.gpus && !g) {
      m.slots = "<gpus of " + host.address + ">";
      *has_placeholders = true;
    } else {
      m.slots = "1";
    }
    nodes.push_back(std::move(m));
  }
  return nodes;
}

// The rendezvous input of node `rank`, whose merged options are `options`.
// With nodes disagreeing, the head's GPU count is what the *_GPUS_PER_NODE
// variables carry (torchrun's nproc_per_node is one number too); a node
// that asks for no GPUs sees "0" and a total of 0 where the counts are not
// known, and one that asks for some a placeholder (*has_placeholders set).
RendezvousInput RendezvousFor(const PlanInput& in, const PlanLayout& layout, int rank,
                              const std::string& role, const container::ContainerOptions& options,
                              bool* has_placeholders) {
  RendezvousInput r;
  r.job_id = in.job_id;
  r.job_name = in.job_name;
  r.role = role;
  r.rank = rank;
  r.node_addresses = layout.addresses;
  r.port = in.rendezvous.port;
  r.conventions = in.rendezvous.conventions;
  r.restart_count = in.restart_count;
  if (std::optional<int> gpus = layout.gpus[0]) {
    r.gpus_per_node = std::to_string(*gpus);
  } else if (!options.gpus) {
    r.gpus_per_node = "0";  // no GPUs asked for: none are visible
  } else {
    r.gpus_per_node = "<gpus of " + in.hosts[layout.slots[0].host_index].address + ">";
    *has_placeholders = true;
  }
  r.total_gpus = layout.total_gpus;
  if (!layout.total_gpus) {
    if (options.gpus) {
      *has_placeholders = true;
    } else {
      r.total_gpus = 0;
    }
  }
  return r;
}

// On the host's network, NCCL and Gloo pick an interface by themselves,
// often the wrong one (docker0, a management NIC): appends to `env` the one
// that carries the address the other nodes are told, NCCL_SOCKET_IFNAME in
// its exact-match form. Nothing for a node off the host's network or a host
// that could not tell; a placeholder (*has_placeholders set) for a host not
// asked yet.
void AddInterfaceEnv(const PlanInput& in, size_t host_index, const container::ContainerOptions& options,
                     container::KeyValues* env, bool* has_placeholders) {
  if (!options.network || *options.network != "host") return;
  std::string iface;
  if (auto it = in.host_ifaces.find(host_index); it != in.host_ifaces.end()) {
    iface = it->second;
  } else {
    iface = "<interface of " + in.hosts[host_index].address + ">";
    *has_placeholders = true;
  }
  if (!iface.empty()) {
    env->emplace_back("NCCL_SOCKET_IFNAME", "=" + iface);
    env->emplace_back("GLOO_SOCKET_IFNAME", iface);
  }
}

// RDMA for a node on host `host_index` (PlanInput::rdma): the InfiniBand
// devices, IPC_LOCK and an unlimited memlock in `options` (each unless
// already there) and NCCL_IB_HCA naming the host's active HCAs in `env`.
// Nothing on a host without any; a placeholder HCA list
// (*has_placeholders set) for a host not asked yet.
void AddRdma(const PlanInput& in, size_t host_index, container::ContainerOptions* options,
             container::KeyValues* env, bool* has_placeholders) {
  std::optional<std::string> hcas;
  if (auto it = in.host_rdma.find(host_index); it == in.host_rdma.end()) {
    hcas = "=<active HCAs of " + in.hosts[host_index].address + ">";
    *has_placeholders = true;
  } else if (!it->second.empty()) {
    hcas = "=";
    for (size_t i = 0; i < it->second.size(); ++i) *hcas += (i ? "," : "") + it->second[i];
  }
  if (!hcas) return;
  auto add = [](std::optional<std::vector<std::string>>& list, const std::string& v) {
    if (!list) list.emplace();
    if (std::find(list->begin(), list->end(), v) == list->end()) list->push_back(v);
  };
  add(options->devices, "/dev/infiniband");
  add(options->cap_add, "IPC_LOCK");
  if (!options->ulimits) options->ulimits.emplace();
  if (std::none_of(options->ulimits->begin(), options->ulimits->end(),
                   [](const auto& u) { return u.first == "memlock"; })) {
    options->ulimits->emplace_back("memlock", "-1");
  }
  env->emplace_back("NCCL_IB_HCA", *hcas);
}

// MPI for node `rank` of `mpi_nodes`: the launcher's env on every node; a
// worker runs only its sshd (validation refuses a worker command), with its
// own env, command and entrypoint; every node sees its own directory of
// keys and files at kMpiDir.
void AddMpi(const PlanInput& in, const std::vector<MpiNode>& mpi_nodes, size_t rank,
            container::ContainerOptions* options, container::ContainerSpec* c) {
  const MpiNode& m = mpi_nodes[rank];
  for (auto& kv : MpiEnv(mpi_nodes)) c->env.push_back(std::move(kv));
  if (rank != 0) {
    for (auto& kv : MpiWorkerEnv(m)) c->env.push_back(std::move(kv));
    c->command = MpiWorkerCommand(m);
    std::vector<std::string> run = MpiWorkerEntrypoint();
    if (options->run_options) run.insert(run.end(), options->run_options->begin(), options->run_options->end());
    options->run_options = std::move(run);
  }
  if (!options->volumes) options->volumes.emplace();
  options->volumes->push_back(in.mpi->files_dir + "/" + std::to_string(rank) + ":" + kMpiDir + ":ro");
}

// Moves the user's env from `options` into `env`, last, so that it can
// override a rendezvous value: a name already in `env` takes the user's
// value in its place, a new one is appended. `options->env` is empty after.
void ApplyUserEnv(container::ContainerOptions* options, container::KeyValues* env) {
  if (options->env) {
    for (const auto& kv : *options->env) {
      auto it = std::find_if(env->begin(), env->end(), [&](const auto& e) { return e.first == kv.first; });
      if (it != env->end()) {
        it->second = kv.second;
      } else {
        env->push_back(kv);
      }
    }
  }
  options->env.reset();
}

// Replaces the prefix PlanInput::host_path of every volume source and run
// option in `options` by host `host_index`'s own path, where one is known.
void RewriteHostPaths(const PlanInput& in, size_t host_index, container::ContainerOptions* options) {
  auto it = in.host_paths.find(host_index);
  if (in.host_path.empty() || it == in.host_paths.end()) return;
  auto rewrite = [&](std::optional<std::vector<std::string>>& words) {
    if (!words) return;
    for (std::string& w : *words) {
      if (w.starts_with(in.host_path)) w = it->second + w.substr(in.host_path.size());
    }
  };
  rewrite(options->volumes);
  rewrite(options->run_options);
}

// The node of rank `rank`: its place and slice, its container's name,
// image, command and labels, then its env and options, each stage adding
// its part in this order: rendezvous, network interface, RDMA, MPI
// (`mpi_nodes`, for an MPI job), the user's env, host paths. Sets
// *has_placeholders when a value only a live host can give is shown as a
// placeholder. Fails when neither the job nor the node's role names an
// image.
Result<NodePlan> MakeNode(const PlanInput& in, const PlanLayout& layout,
                          const std::vector<MpiNode>& mpi_nodes, size_t rank, bool* has_placeholders) {
  const Slot& s = layout.slots[rank];
  const bool is_head = rank == 0;
  NodePlan node;
  node.rank = static_cast<int>(rank);
  node.role = is_head ? kHeadRole : kWorkerRole;
  node.host_index = s.host_index;
  node.slot = s.slot;
  if (auto it = layout.slices.find(node.rank); it != layout.slices.end()) node.gpu_devices = it->second;

  container::ContainerSpec& c = node.container;
  c.name = ContainerName(in.job_name, in.job_id, node.rank);
  const RoleSpec* role = is_head ? layout.head_role : layout.worker_role;
  c.image = role && role->image ? *role->image : in.image;
  if (c.image.empty()) {
    return Status::Error("no image for the " + node.role + " (set image: at the top or in roles." +
                         node.role + ")");
  }
  c.command = role && role->command ? role->command : in.command;
  container::ContainerOptions options = layout.options[rank];
  c.labels = {{kJobLabel, in.job_id}, {kRoleLabel, node.role}, {kRankLabel, std::to_string(node.rank)}};
  c.labels.insert(c.labels.end(), in.extra_labels.begin(), in.extra_labels.end());

  c.env = RendezvousEnv(RendezvousFor(in, layout, node.rank, node.role, options, has_placeholders));
  AddInterfaceEnv(in, node.host_index, options, &c.env, has_placeholders);
  if (in.rdma) AddRdma(in, node.host_index, &options, &c.env, has_placeholders);
  if (in.mpi) AddMpi(in, mpi_nodes, rank, &options, &c);
  ApplyUserEnv(&options, &c.env);
  RewriteHostPaths(in, node.host_index, &options);
  c.options = std::move(options);
  return node;
}

// The hosts that carry at least one of `nodes`, in inventory order.
std::vector<size_t> UsedHosts(size_t host_count, const std::vector<NodePlan>& nodes) {
  std::vector<size_t> used;
  for (size_t h = 0; h < host_count; ++h) {
    if (std::any_of(nodes.begin(), nodes.end(), [&](const NodePlan& n) { return n.host_index == h; })) {
      used.push_back(h);
    }
  }
  return used;
}

// The gate of an MPI job's workers: their sshd up with the job's host key.
ReadinessProbe SshdReady() {
  ReadinessProbe sshd_ready;
  sshd_ready.kind = ReadinessProbe::Kind::kCommand;
  sshd_ready.command = MpiReadyCommand();
  sshd_ready.timeout = std::chrono::seconds(60);
  sshd_ready.description = "its sshd presenting the job's host key";
  return sshd_ready;
}

// The launch order of `node_count` nodes (at least one). Usually the head
// first, ready (`head_ready`) before any worker starts, then every worker.
// MPI: every worker's sshd up (SshdReady), then the head, whose launcher
// reaches them.
std::vector<LaunchStage> LaunchStages(size_t node_count, const ReadinessProbe& head_ready, bool mpi) {
  LaunchStage head{"head", {0}, head_ready};
  LaunchStage workers{"workers", {}, mpi ? SshdReady() : ReadinessProbe{}};
  for (size_t r = 1; r < node_count; ++r) workers.ranks.push_back(static_cast<int>(r));
  std::vector<LaunchStage> stages;
  if (!mpi) stages.push_back(std::move(head));
  if (node_count > 1) stages.push_back(std::move(workers));
  if (mpi) stages.push_back(std::move(head));
  return stages;
}

}  // namespace

Result<Plan> MakePlan(const PlanInput& in) {
  if (in.hosts.empty()) return Status::Error("the job has no hosts");
  Plan plan;
  plan.job_id = in.job_id;
  plan.job_name = in.job_name;
  plan.hosts = SettledHosts(in);
  Result<PlanLayout> layout = MakeLayout(in, plan.hosts);
  if (!layout.ok()) return layout.status();
  if (layout->head_role) plan.head_ready = layout->head_role->ready;
  if (in.mpi) plan.mpi_nodes = MpiNodes(in, *layout, &plan.has_placeholders);
  for (size_t rank = 0; rank < layout->slots.size(); ++rank) {
    Result<NodePlan> node = MakeNode(in, *layout, plan.mpi_nodes, rank, &plan.has_placeholders);
    if (!node.ok()) return node.status();
    plan.nodes.push_back(std::move(node).value());
  }
  plan.used_hosts = UsedHosts(in.hosts.size(), plan.nodes);
  plan.stages = LaunchStages(plan.nodes.size(), plan.head_ready, in.mpi.has_value());
  return plan;
}

}  // namespace barge::cluster
