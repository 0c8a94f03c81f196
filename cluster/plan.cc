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

}  // namespace

Result<Plan> MakePlan(const PlanInput& in) {
  if (in.hosts.empty()) return Status::Error("the job has no hosts");
  Plan plan;
  plan.job_id = in.job_id;
  plan.job_name = in.job_name;
  plan.hosts = in.hosts;
  for (const auto& [h, address] : in.reached_addresses) {
    if (h < plan.hosts.size() && plan.hosts[h].internal_address.empty()) {
      plan.hosts[h].internal_address = address;
    }
  }

  std::vector<Slot> slots = OrderedSlots(in.hosts);
  const RoleSpec* head_role = FindRole(in.roles, kHeadRole);
  const RoleSpec* worker_role = FindRole(in.roles, kWorkerRole);
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
  if (head_role) plan.head_ready = head_role->ready;

  std::vector<std::string> addresses;
  for (const Slot& s : slots) addresses.push_back(InternalAddress(plan.hosts[s.host_index]));

  // Each node's container options: job-wide, then its role's, then its
  // host's.
  std::vector<container::ContainerOptions> merged;
  for (size_t rank = 0; rank < slots.size(); ++rank) {
    const RoleSpec* role = rank == 0 ? head_role : worker_role;
    container::ContainerOptions options = in.container;
    if (role) options = container::Merge(options, role->container);
    merged.push_back(container::Merge(options, in.hosts[slots[rank].host_index].container));
  }

  // GPU slices: a node asking for a count on a host whose inventory says
  // how many GPUs it has gets devices of its own (cluster/gpu_slices.h).
  std::map<int, std::vector<int>> slices;
  {
    std::vector<GpuClaim> claims;
    std::map<size_t, HostGpus> offered;
    for (size_t rank = 0; rank < slots.size(); ++rank) {
      const size_t h = slots[rank].host_index;
      const Host& host = in.hosts[h];
      if (!host.gpus || !merged[rank].gpus) continue;
      HostGpus& o = offered[h];
      o.address = host.address;
      o.total = *host.gpus;
      if (auto held = in.held_gpus.find(h); held != in.held_gpus.end()) o.held = held->second;
      if (std::optional<int> count = GpuCount(*merged[rank].gpus)) {
        claims.push_back(GpuClaim{static_cast<int>(rank), h, *count});
      } else {
        for (int d : GpuDeviceIndices(*merged[rank].gpus)) o.listed.insert(d);
      }
    }
    if (!claims.empty()) {
      Result<std::map<int, std::vector<int>>> got = AllocateGpuSlices(claims, offered);
      if (!got.ok()) return got.status();
      slices = std::move(got).value();
      for (auto& [rank, devices] : slices) merged[rank].gpus = GpuDeviceValue(devices);
    }
  }

  // GPUs per node: a node's slice, else its host's GPUs from the inventory,
  // else from the live host, else a placeholder. With nodes disagreeing,
  // the head's count is what the *_GPUS_PER_NODE variables carry (torchrun's
  // nproc_per_node is one number too).
  auto gpus_of = [&](size_t h) -> std::optional<int> {
    if (in.hosts[h].gpus) return in.hosts[h].gpus;
    auto it = in.detected_gpus.find(h);
    if (it != in.detected_gpus.end()) return it->second;
    return std::nullopt;
  };
  auto node_gpus = [&](size_t rank) -> std::optional<int> {
    if (auto it = slices.find(static_cast<int>(rank)); it != slices.end()) {
      return static_cast<int>(it->second.size());
    }
    return gpus_of(slots[rank].host_index);
  };
  std::optional<int> total = 0;
  for (size_t rank = 0; rank < slots.size(); ++rank) {
    std::optional<int> g = node_gpus(rank);
    if (g && total) {
      *total += *g;
    } else {
      total.reset();
    }
  }

  // MPI: where each node's sshd listens, what the launcher calls it, and
  // its slots (slots_per_node, else the host's GPUs, else 1).
  if (in.mpi) {
    std::map<size_t, int> per_host;
    for (const Slot& s : slots) ++per_host[s.host_index];
    for (size_t rank = 0; rank < slots.size(); ++rank) {
      const Slot& s = slots[rank];
      const Host& host = in.hosts[s.host_index];
      MpiNode m;
      m.rank = static_cast<int>(rank);
      m.address = addresses[rank];
      m.port = in.mpi->port + s.slot;
      m.name = per_host[s.host_index] > 1 ? "barge-rank-" + std::to_string(rank) : m.address;
      const container::ContainerOptions& options = merged[rank];
      if (in.mpi->slots_per_node) {
        m.slots = std::to_string(*in.mpi->slots_per_node);
      } else if (std::optional<int> g = node_gpus(rank); g && *g > 0) {
        m.slots = std::to_string(*g);
      } else if (options.gpus && !g) {
        m.slots = "<gpus of " + host.address + ">";
        plan.has_placeholders = true;
      } else {
        m.slots = "1";
      }
      plan.mpi_nodes.push_back(std::move(m));
    }
  }

  for (size_t rank = 0; rank < slots.size(); ++rank) {
    const Slot& s = slots[rank];
    const bool is_head = rank == 0;
    NodePlan node;
    node.rank = static_cast<int>(rank);
    node.role = is_head ? kHeadRole : kWorkerRole;
    node.host_index = s.host_index;
    node.slot = s.slot;
    if (auto it = slices.find(node.rank); it != slices.end()) node.gpu_devices = it->second;

    container::ContainerSpec& c = node.container;
    c.name = ContainerName(in.job_name, in.job_id, node.rank);
    const RoleSpec* role = is_head ? head_role : worker_role;
    c.image = role && role->image ? *role->image : in.image;
    if (c.image.empty()) {
      return Status::Error("no image for the " + node.role + " (set image: at the top or in roles." +
                           node.role + ")");
    }
    c.command = role && role->command ? role->command : in.command;
    container::ContainerOptions options = merged[rank];
    c.labels = {{kJobLabel, in.job_id}, {kRoleLabel, node.role}, {kRankLabel, std::to_string(node.rank)}};
    c.labels.insert(c.labels.end(), in.extra_labels.begin(), in.extra_labels.end());

    RendezvousInput r;
    r.job_id = in.job_id;
    r.job_name = in.job_name;
    r.role = node.role;
    r.rank = node.rank;
    r.node_addresses = addresses;
    r.port = in.rendezvous.port;
    r.conventions = in.rendezvous.conventions;
    r.restart_count = in.restart_count;
    std::optional<int> gpus = node_gpus(0);
    if (gpus) {
      r.gpus_per_node = std::to_string(*gpus);
    } else if (!options.gpus) {
      r.gpus_per_node = "0";  // no GPUs asked for: none are visible
    } else {
      r.gpus_per_node = "<gpus of " + in.hosts[slots[0].host_index].address + ">";
      plan.has_placeholders = true;
    }
    r.total_gpus = total;
    if (!total) {
      if (options.gpus) {
        plan.has_placeholders = true;
      } else {
        r.total_gpus = 0;
      }
    }
    c.env = RendezvousEnv(r);
    // On the host's network, NCCL and Gloo pick an interface by themselves,
    // often the wrong one (docker0, a management NIC): the one that carries
    // the address the other nodes are told.
    if (options.network && *options.network == "host") {
      std::string iface;
      if (auto it = in.host_ifaces.find(node.host_index); it != in.host_ifaces.end()) {
        iface = it->second;
      } else {
        iface = "<interface of " + in.hosts[node.host_index].address + ">";
        plan.has_placeholders = true;
      }
      if (!iface.empty()) {
        c.env.emplace_back("NCCL_SOCKET_IFNAME", "=" + iface);
        c.env.emplace_back("GLOO_SOCKET_IFNAME", iface);
      }
    }
    if (in.rdma) {
      std::optional<std::string> hcas;
      if (auto it = in.host_rdma.find(node.host_index); it == in.host_rdma.end()) {
        hcas = "=<active HCAs of " + in.hosts[node.host_index].address + ">";
        plan.has_placeholders = true;
      } else if (!it->second.empty()) {
        hcas = "=";
        for (size_t i = 0; i < it->second.size(); ++i) *hcas += (i ? "," : "") + it->second[i];
      }
      if (hcas) {
        auto add = [](std::optional<std::vector<std::string>>& list, const std::string& v) {
          if (!list) list.emplace();
          if (std::find(list->begin(), list->end(), v) == list->end()) list->push_back(v);
        };
        add(options.devices, "/dev/infiniband");
        add(options.cap_add, "IPC_LOCK");
        if (!options.ulimits) options.ulimits.emplace();
        if (std::none_of(options.ulimits->begin(), options.ulimits->end(),
                         [](const auto& u) { return u.first == "memlock"; })) {
          options.ulimits->emplace_back("memlock", "-1");
        }
        c.env.emplace_back("NCCL_IB_HCA", *hcas);
      }
    }
    if (in.mpi) {
      // Workers run only their sshd (validation refuses a worker command);
      // every node sees its own directory of keys and files at kMpiDir.
      const MpiNode& m = plan.mpi_nodes[rank];
      for (auto& kv : MpiEnv(plan.mpi_nodes)) c.env.push_back(std::move(kv));
      if (!is_head) {
        for (auto& kv : MpiWorkerEnv(m)) c.env.push_back(std::move(kv));
        c.command = MpiWorkerCommand(m);
        std::vector<std::string> run = MpiWorkerEntrypoint();
        if (options.run_options) run.insert(run.end(), options.run_options->begin(), options.run_options->end());
        options.run_options = std::move(run);
      }
      if (!options.volumes) options.volumes.emplace();
      options.volumes->push_back(in.mpi->files_dir + "/" + std::to_string(rank) + ":" + kMpiDir + ":ro");
    }
    // The user's env comes last so that it can override a rendezvous value.
    if (options.env) {
      for (const auto& kv : *options.env) {
        auto it = std::find_if(c.env.begin(), c.env.end(),
                               [&](const auto& e) { return e.first == kv.first; });
        if (it != c.env.end()) {
          it->second = kv.second;
        } else {
          c.env.push_back(kv);
        }
      }
    }
    options.env.reset();
    if (auto it = in.host_paths.find(node.host_index); !in.host_path.empty() && it != in.host_paths.end()) {
      auto rewrite = [&](std::optional<std::vector<std::string>>& words) {
        if (!words) return;
        for (std::string& w : *words) {
          if (w.starts_with(in.host_path)) w = it->second + w.substr(in.host_path.size());
        }
      };
      rewrite(options.volumes);
      rewrite(options.run_options);
    }
    c.options = std::move(options);
    plan.nodes.push_back(std::move(node));
  }

  for (size_t h = 0; h < in.hosts.size(); ++h) {
    if (std::any_of(plan.nodes.begin(), plan.nodes.end(),
                    [&](const NodePlan& n) { return n.host_index == h; })) {
      plan.used_hosts.push_back(h);
    }
  }
  if (in.mpi) {
    // MPI: every worker's sshd up with the job's host key, then the head,
    // whose launcher reaches them.
    if (plan.nodes.size() > 1) {
      ReadinessProbe sshd_ready;
      sshd_ready.kind = ReadinessProbe::Kind::kCommand;
      sshd_ready.command = MpiReadyCommand();
      sshd_ready.timeout = std::chrono::seconds(60);
      sshd_ready.description = "its sshd presenting the job's host key";
      LaunchStage workers{"workers", {}, sshd_ready};
      for (size_t r = 1; r < plan.nodes.size(); ++r) workers.ranks.push_back(static_cast<int>(r));
      plan.stages.push_back(std::move(workers));
    }
    plan.stages.push_back(LaunchStage{"head", {0}, plan.head_ready});
    return plan;
  }
  // The head first, ready before any worker starts; then every worker.
  plan.stages.push_back(LaunchStage{"head", {0}, plan.head_ready});
  if (plan.nodes.size() > 1) {
    LaunchStage workers{"workers", {}, ReadinessProbe{}};
    for (size_t r = 1; r < plan.nodes.size(); ++r) workers.ranks.push_back(static_cast<int>(r));
    plan.stages.push_back(std::move(workers));
  }
  return plan;
}

}  // namespace barge::cluster
