// The top-level keys of a job file, the checks across blocks, and ReadJob.
#include <algorithm>
#include <cctype>

#include "runner/jobfile/blocks.h"

namespace barge::runner::jobfile {

constexpr KeyRule<cluster::MpiOptions> kMpiRules[] = {
    {"slots_per_node",
     {.type = KeyType::kInteger, .description = "Slots per node in the hostfile (default: the node's GPU count, else 1)"},
     [](const Entry& e, cluster::MpiOptions& m) {
       if (auto n = ReadInteger(e, 1, 1024, "a number of slots (1 to 1024)"))
         m.slots_per_node = static_cast<int>(*n);
     }},
    {"port",
     {.type = KeyType::kInteger, .description = "Port of the workers' in-container sshd; a host's further nodes take the next ports", .default_value = "2222"},
     [](const Entry& e, cluster::MpiOptions& m) {
       if (auto port = ReadPort(e)) m.port = *port;
     }},
};
std::vector<KeyInfo> MpiKeys() { return Describe(kMpiRules); }

Status CheckProgram(std::string_view v) {
  if (v.empty()) return Status::Error("must name a program");
  if (v.find_first_of(std::string_view("\n\r\0", 3)) != std::string_view::npos) {
    return Status::Error("must be one line");
  }
  return Status::Ok();
}

namespace {

// health.xids: lists of Xid codes (the kernel log's 1 to 5 digits).
std::optional<std::vector<int>> ReadXidList(const Entry& e) {
  if (!ExpectList(e, "Xid codes")) return std::nullopt;
  std::vector<int> out;
  for (size_t i = 0; i < e.value.size(); ++i) {
    Entry item = e.Element(e.value[i], i);
    std::optional<long long> code = ReadInteger(item, 1, 99999, "an Xid code");
    if (!code) return std::nullopt;
    out.push_back(static_cast<int>(*code));
  }
  return out;
}

constexpr std::string_view kXidListSchema =
    R"({"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": 99999}})";
constexpr KeyRule<HealthSpec> kXidRules[] = {
    {"fatal",
     {.type = KeyType::kJson, .description = "Xid codes that are fatal for their GPU (default 48, 64, 74, 79, 95, 119, 120, 154)", .schema = kXidListSchema},
     [](const Entry& e, HealthSpec& h) {
       if (auto v = ReadXidList(e)) h.xids_fatal = *v;
     }},
    {"warning",
     {.type = KeyType::kJson, .description = "Xid codes that are said and change nothing (default 92, 94)", .schema = kXidListSchema},
     [](const Entry& e, HealthSpec& h) {
       if (auto v = ReadXidList(e)) h.xids_warning = *v;
     }},
    {"ignore",
     {.type = KeyType::kJson, .description = "Xid codes not counted at all (codes in no list and not in the defaults are not counted either)", .schema = kXidListSchema},
     [](const Entry& e, HealthSpec& h) {
       if (auto v = ReadXidList(e)) h.xids_ignore = *v;
     }},
};
std::vector<KeyInfo> XidKeys() { return Describe(kXidRules); }

void ReadXids(const Entry& e, HealthSpec& h) {
  SeenKeys seen = ReadMapping(e, kXidRules, h);
  // A code in two lists: which one wins would be a guess.
  const std::pair<const char*, const std::vector<int>*> lists[] = {
      {"fatal", &h.xids_fatal}, {"warning", &h.xids_warning}, {"ignore", &h.xids_ignore}};
  for (size_t a = 0; a < 3; ++a) {
    for (size_t b = a + 1; b < 3; ++b) {
      for (int code : *lists[b].second) {
        if (std::find(lists[a].second->begin(), lists[a].second->end(), code) == lists[a].second->end()) continue;
        seen.at(lists[b].first).Error("Xid " + std::to_string(code) + " is also listed in '" + lists[a].first + "'");
        return;
      }
    }
  }
}

}  // namespace

constexpr KeyRule<HealthSpec> kHealthRules[] = {
    {"every",
     {.type = KeyType::kDuration, .description = "The same checks while the job runs, this often, on every host where the job has GPUs (a fatal finding ends the attempt: gpu_unhealthy); default: not while it runs"},
     [](const Entry& e, HealthSpec& h) {
       if (auto d = ReadDuration(e, /*allow_zero=*/false)) h.every = *d;
     }},
    {"xids",
     {.type = KeyType::kBlock, .description = "Which Xids count and how, over the defaults, code by code (at the start and while the job runs)", .keys = XidKeys},
     ReadXids},
    {"gpus",
     {.type = KeyType::kEnum, .description = "How preflight judges the GPUs of hosts where the job asks for GPUs: basic (the driver's query, row remapping, the kernel log's Xids), dcgm (basic, then DCGM's quick diagnostic, dcgmi diag -r 1, on the job's GPUs) or off", .default_value = NameOf(kGpuHealthLevelNames, GpuHealthLevel::kBasic), .choices = kGpuHealthLevel},
     [](const Entry& e, HealthSpec& h) {
       if (auto v = ReadEnum(e, kGpuHealthLevelNames)) h.gpus = *v;
     }},
    {"xid_window",
     {.type = KeyType::kDuration, .description = "Xid events older than this (by the kernel log's clock) do not count", .default_value = "24h"},
     [](const Entry& e, HealthSpec& h) {
       if (auto t = ReadDuration(e, /*allow_zero=*/false)) h.xid_window = *t;
     }},
    {"host_failures",
     {.type = KeyType::kInteger, .description = "A host whose failure record (kept on the host, shared by every barge user of it) has more host-caused failures than this in health.host_window is out of the job's choice (a spare takes its place); a GPU with a fatal entry there is out of what its host offers", .default_value = "1"},
     [](const Entry& e, HealthSpec& h) {
       if (auto v = ReadInteger(e, 0, 1000)) h.host_failures = static_cast<int>(*v);
     }},
    {"host_window",
     {.type = KeyType::kDuration, .description = "How far back a host's failure record counts (at most 30d: the record keeps nothing older)", .default_value = "24h"},
     [](const Entry& e, HealthSpec& h) {
       if (auto t = ReadDuration(e, /*allow_zero=*/false)) {
         if (*t > std::chrono::hours(24 * 30)) {
           e.Error("at most 30d: a host's failure record keeps nothing older");
         } else {
           h.host_window = *t;
         }
       }
     }},
    {"nvidia_smi",
     {.type = KeyType::kString, .description = "The nvidia-smi program on the hosts (a path or a name on the login shell's PATH)", .default_value = "nvidia-smi"},
     [](const Entry& e, HealthSpec& h) {
       if (auto v = ReadChecked(e, CheckProgram)) h.nvidia_smi = *v;
     }},
    {"dcgmi",
     {.type = KeyType::kString, .description = "The dcgmi program on the hosts, for health.gpus: dcgm (a path or a name on the login shell's PATH)", .default_value = "dcgmi"},
     [](const Entry& e, HealthSpec& h) {
       if (auto v = ReadChecked(e, CheckProgram)) h.dcgmi = *v;
     }},
};
std::vector<KeyInfo> HealthKeys() { return Describe(kHealthRules); }

SeenKeys ReadConfigHealth(const Entry& e, HealthSpec& h) {
  SeenKeys seen = ReadMapping(e, kHealthRules, h);
  for (auto it = seen.begin(); it != seen.end();) {
    if (it->first == "host_failures" || it->first == "host_window") {
      ++it;
      continue;
    }
    it->second.KeyError("only health.host_failures and health.host_window have a default in config.yaml");
    it = seen.erase(it);
  }
  return seen;
}

constexpr KeyRule<NetworkSpec> kNetworkRules[] = {
    {"rdma",
     {.type = KeyType::kEnum, .description = "InfiniBand/RoCE for every node: auto gives the containers of hosts that have an active HCA /dev/infiniband, memlock unlimited, IPC_LOCK and NCCL_IB_HCA (others use sockets, said); required refuses a host without one at preflight; off", .default_value = NameOf(kRdmaUseNames, RdmaUse::kOff), .choices = kRdmaUse},
     [](const Entry& e, NetworkSpec& n) {
       if (auto v = ReadEnum(e, kRdmaUseNames)) n.rdma = *v;
     }},
};
std::vector<KeyInfo> NetworkKeys() { return Describe(kNetworkRules); }

// What push and push-direct mean, for image_pull's invalid-value message.
constexpr std::string_view kImagePullPushNote =
    "push sends this machine's image once, relayed host to host; push-direct sends it from this machine to each host";

constexpr KeyRule<JobDraft> kJobRules[] = {
    {"name",
     {.type = KeyType::kString, .description = "The job's name: letters, digits, _ . - (at most 63)", .required = true},
     [](const Entry& e, JobDraft& d) {
       if (auto name = ReadChecked(e, CheckJobName)) d.spec.name = *name;
     }},
    {"image",
     {.type = KeyType::kString, .description = "Image every node runs (a role may set its own)"},
     [](const Entry& e, JobDraft& d) {
       d.image_written = true;
       if (auto image = ReadChecked(e, CheckImageOrArrayTemplate)) {
         d.spec.image = *image;
         d.spec.image_written_at[*image] = e.src->name + ":" + std::to_string(e.key.Mark().line + 1) + ": " + e.path;
       }
     }},
    {"command",
     {.type = KeyType::kCommand, .description = "Command every node runs (default: the image's CMD); a string runs with sh -c"}, [](const Entry& e, JobDraft& d) { d.spec.command = ReadCommand(e); }},
    {"container",
     {.type = KeyType::kBlock, .description = "Container options for every node", .keys = ContainerKeys}, [](const Entry& e, JobDraft& d) { ReadContainer(e, d.spec.container); }},
    {"hosts",
     {.type = KeyType::kBlockList, .description = "Hosts to run on: addresses, or mappings with address (default: the local engine)", .keys = HostKeys, .scalar_too = true},
     [](const Entry& e, JobDraft& d) {
       if (!d.hosts_given) ReadHostList(e, d);  // else: both given, an error
     }},
    {"hosts_file",
     {.type = KeyType::kString, .description = "A YAML file holding the list of hosts (instead of hosts)"}, ReadHostsFile},
    {"hosts_command",
     {.type = KeyType::kString, .description = "A shell command run here at validation (at most 60 s) that prints the hosts: one address per line, or a JSON list of host entries (instead of hosts); recorded with the job, never run again by down, exec, attach or rerun"},
     ReadHostsCommand},
    {"trust_hosts_command",
     {.type = KeyType::kBoolean, .description = "The hosts_command's output may set docker_command and container options of its hosts, which run as code on them: set it only when the command and what it reads are yours", .default_value = "false"},
     [](const Entry& e, JobDraft& d) {
       if (auto v = ReadEnum(e, kBooleans)) d.trust_hosts_command = *v == "true";
     }},
    {"slurm",
     {.type = KeyType::kBlock, .description = "The hosts are a Slurm allocation of this shape, asked for at run and released at the job's end (instead of hosts)", .keys = SlurmKeys},
     ReadSlurm},
    {"docker_command",
     {.type = KeyType::kString, .description = "The docker command on the hosts", .default_value = "docker"},
     [](const Entry& e, JobDraft& d) {
       if (auto c = ReadChecked(e, CheckDockerCommand)) d.spec.docker_command = *c;
     }},
    {"ssh",
     {.type = KeyType::kBlock, .description = "SSH settings for every host", .keys = SshKeys}, [](const Entry& e, JobDraft& d) {
       for (const auto& [key, entry] : ReadSsh(e, d.spec.ssh)) d.ssh_keys.insert(key);
     }},
    {"roles",
     {.type = KeyType::kBlock, .description = "Per-role settings: head and worker", .keys = RoleKeys}, [](const Entry& e, JobDraft& d) { ReadRoles(e, d); }},
    {"rendezvous",
     {.type = KeyType::kBlock, .description = "Rendezvous environment (MASTER_ADDR, RANK, WORLD_SIZE, ...)", .keys = RendezvousKeys},
     [](const Entry& e, JobDraft& d) { ReadRendezvous(e, d.spec.rendezvous); }},
    {"image_pull",
     {.type = KeyType::kEnum, .description = "When hosts pull the image; push copies it from here (sent once, relayed host to host), push-direct from here to each host", .default_value = NameOf(kImagePullNames, ImagePull::kMissing), .choices = kImagePull},
     [](const Entry& e, JobDraft& d) {
       if (auto v = ReadEnum(e, kImagePullNames, kImagePullPushNote)) d.spec.image_pull = *v;
     }},
    {"on_worker_exit",
     {.type = KeyType::kEnum, .description = "Whether a worker that exits non-zero fails the job", .default_value = NameOf(kOnWorkerExitNames, OnWorkerExit::kFail), .choices = kOnWorkerExit},
     [](const Entry& e, JobDraft& d) {
       if (auto v = ReadEnum(e, kOnWorkerExitNames)) d.spec.on_worker_exit = *v;
     }},
    {"stop_grace",
     {.type = KeyType::kDuration, .description = "Time between the stop signal and SIGKILL", .default_value = "10s"},
     [](const Entry& e, JobDraft& d) {
       if (auto grace = ReadDuration(e, /*allow_zero=*/true)) d.spec.stop_grace = *grace;
     }},
    {"timeout",
     {.type = KeyType::kDuration, .description = "The job ends as timed_out after running this long (default: no limit)"},
     [](const Entry& e, JobDraft& d) {
       if (auto t = ReadDuration(e, /*allow_zero=*/false)) d.spec.timeout = *t;
     }},
    {"lease",
     {.type = KeyType::kDuration, .description = "Hosts' watchdogs tear the job down when barge has not renewed it for this long", .default_value = "10m"},
     [](const Entry& e, JobDraft& d) {
       if (auto t = ReadDuration(e, /*allow_zero=*/false)) d.spec.lease = *t;
     }},
    {"wait",
     {.type = KeyType::kDuration, .description = "Wait this long at most for hosts held by other jobs instead of failing (default: fail at once)"},
     [](const Entry& e, JobDraft& d) {
       if (auto t = ReadDuration(e, /*allow_zero=*/false)) d.spec.wait = *t;
     }},
    {"health",
     {.type = KeyType::kBlock, .description = "The GPU health gate at preflight: an unhealthy GPU is taken out of what its host offers, an unhealthy host never starts a container", .keys = HealthKeys},
     [](const Entry& e, JobDraft& d) {
       for (const auto& [key, entry] : ReadMapping(e, kHealthRules, d.spec.health)) d.health_keys.insert(key);
     }},
    {"network",
     {.type = KeyType::kBlock, .description = "The collective network's plumbing: RDMA devices and NCCL_IB_HCA per host (the socket interface is set by itself)", .keys = NetworkKeys},
     [](const Entry& e, JobDraft& d) { ReadMapping(e, kNetworkRules, d.spec.network); }},
    {"artifacts",
     {.type = KeyType::kBlockList, .description = "Paths copied back from containers", .keys = ArtifactKeys}, ReadArtifacts},
    {"forward",
     {.type = KeyType::kBlockList, .description = "Ports of nodes reached at 127.0.0.1 while the job is attached: 8265, \"16006:6006\" or {port: 8888, node: 1}", .keys = ForwardKeys, .scalar_too = true}, ReadForward},
    {"workdir",
     {.type = KeyType::kBlock, .description = "A local directory shipped to every host and mounted in every container", .keys = WorkdirKeys, .scalar_too = true}, ReadWorkdir},
    {"files",
     {.type = KeyType::kBlockList, .description = "Local files shipped to every host, mounted read-only", .keys = FileKeys}, ReadFiles},
    {"teardown",
     {.type = KeyType::kBlock, .description = "Hooks run at teardown", .keys = TeardownKeys}, [](const Entry& e, JobDraft& d) { ReadTeardown(e, d.teardown); }},
    {"restart",
     {.type = KeyType::kBlock, .description = "Whole-job restarts after a fault", .keys = RestartKeys},
     [](const Entry& e, JobDraft& d) {
       RestartPolicy policy;
       ReadRestart(e, policy);
       d.spec.restart = policy;
     }},
    {"spare_hosts",
     {.type = KeyType::kBlockList, .description = "Hosts that take a lost host's place at a restart", .keys = HostKeys, .scalar_too = true}, ReadSpareHosts},
    {"preemption",
     {.type = KeyType::kBlock, .description = "A command that says a host is going away", .keys = PreemptionKeys},
     [](const Entry& e, JobDraft& d) {
       PreemptionSpec p;
       SeenKeys seen = ReadPreemption(e, p);
       if (!seen.contains("command")) {
         e.KeyError("needs 'command': a shell command whose success means the host is going away");
         return;
       }
       if (!p.command.empty()) d.spec.preemption = p;
     }},
    {"progress",
     {.type = KeyType::kBlock, .description = "What progress looks like while the job runs; none for as long as it says is a hang", .keys = ProgressKeys},
     [](const Entry& e, JobDraft& d) { ReadProgress(e, d.spec); }},
    {"on_failure",
     {.type = KeyType::kBlock, .description = "What a failed job leaves for a look before its teardown", .keys = OnFailureKeys},
     [](const Entry& e, JobDraft& d) { ReadOnFailure(e, d.spec); }},
    {"secrets",
     {.type = KeyType::kBlockMap, .description = "Secrets NAME: {file: PATH} or {env: VARIABLE}; never written to the store or the plan", .keys = SecretKeys}, ReadSecrets},
    {"registry",
     {.type = KeyType::kBlock, .description = "Registry to log in to before pulling", .keys = RegistryKeys}, ReadRegistry},
    {"storage",
     {.type = KeyType::kBlock, .description = "The object store (AWS S3 or S3-compatible) that s3:// destinations of artifacts and logs go to", .keys = StorageKeys}, ReadStorage},
    {"notify",
     {.type = KeyType::kBlockList, .description = "Webhooks the job's events are POSTed to (JSON with a text field; signed with a secret)", .keys = NotifyKeys}, ReadNotify},
    {"mpi",
     {.type = KeyType::kBlock, .description = "An MPI job: workers run the image's sshd and start first, then the head runs command (mpirun, horovodrun, deepspeed) and reaches them over SSH with the job's own keys", .keys = MpiKeys},
     [](const Entry& e, JobDraft& d) {
       cluster::MpiOptions mpi;
       ReadMapping(e, kMpiRules, mpi);
       d.mpi = e;
       d.spec.mpi = mpi;
     }},
    {"array",
     {.type = KeyType::kBlock, .description = "A job array: one member job per row of a file or per combination of a matrix, each on its own hosts from the inventory (barge run --array FILE does the same)", .keys = ArrayKeys},
     [](const Entry& e, JobDraft& d) {
       ArraySpec a;
       SeenKeys seen = ReadArrayBlock(e, a);
       if (seen.contains("file") == seen.contains("matrix")) {
         e.KeyError("give either 'file' or 'matrix'");
         return;
       }
       d.spec.array = a;
     }},
    {"parallel",
     {.type = KeyType::kInteger, .description = "A job array: at most this many members at once (default: as many as the hosts fit)"},
     [](const Entry& e, JobDraft& d) {
       if (auto n = ReadInteger(e, 1, 100000, "a number of members")) d.spec.parallel = static_cast<int>(*n);
     }},
    {"array_retries",
     {.type = KeyType::kInteger, .description = "A job array: how often a failed member runs again", .default_value = "0"},
     [](const Entry& e, JobDraft& d) {
       if (auto n = ReadInteger(e, 0, 100, "a number of retries")) d.spec.array_retries = static_cast<int>(*n);
     }},
    {"hosts_per_member",
     {.type = KeyType::kInteger, .description = "A job array: hosts each member takes from the inventory (default: as many as its roles need)"},
     [](const Entry& e, JobDraft& d) {
       if (auto n = ReadInteger(e, 1, 100000, "a number of hosts")) d.spec.hosts_per_member = static_cast<int>(*n);
     }},
    {"host_groups",
     {.type = KeyType::kBlockMap, .description = "A job array: named pools of hosts, each with its own ssh settings; a row's host_group column picks the pool its member draws from (rows without one use the job's hosts)", .keys = HostGroupKeys},
     ReadHostGroups},
};
std::vector<KeyInfo> JobKeys() { return Describe(kJobRules); }

// ---------------------------------------------------------------------------
// Checks across blocks, once everything is read.

void CheckHosts(JobDraft& d) {
  std::map<std::pair<std::string, int>, const HostDraft*> seen;
  const HostDraft* head = nullptr;
  std::vector<const HostDraft*> all;
  for (const HostDraft& h : d.hosts) all.push_back(&h);
  for (const HostDraft& h : d.spares) all.push_back(&h);
  for (const HostDraft* hp : all) {
    const HostDraft& h = *hp;
    if (h.host.is_local()) {
      for (const Entry& e : h.ssh_settings) {
        e.KeyError("not used with address 'local' (the local engine needs no SSH)");
      }
    }
    if (h.address && !h.host.address.empty()) {
      std::string address = h.host.address;
      std::transform(address.begin(), address.end(), address.begin(),
                     [](unsigned char c) { return std::tolower(c); });
      int port = h.host.is_local() ? 0 : h.host.port.value_or(d.spec.ssh.port.value_or(22));
      auto [it, inserted] = seen.emplace(std::make_pair(address, port), &h);
      if (!inserted) {
        const std::string first = "line " + std::to_string(it->second->host.line);
        if (h.host.is_local()) {
          h.address->Error("the local engine is listed twice (first at " + first +
                           "); use 'nodes:' to run several containers on it");
        } else {
          h.address->Error("host '" + h.host.address + "' port " + std::to_string(port) +
                           " is listed twice (first at " + first +
                           "); use 'nodes:' to run several containers on one host");
        }
      }
    }
    if (h.role) {
      if (head != nullptr) {
        h.role->Error("a second head; " + head->entry.path + " (line " +
                      std::to_string(head->host.line) + ") is the head already");
      } else {
        head = &h;
      }
    }
  }
}

// Host groups: SSH hosts only, one head at most per group, no host in two
// groups (or in a group and the job's hosts: two pools would hand it to two
// members at once), and enough hosts in each for one member.
void CheckHostGroups(JobDraft& d) {
  struct Where {
    std::string pool;  // "group 'a'" or "hosts"
    std::string file;
    int line = 0;
  };
  std::map<std::pair<std::string, int>, Where> seen;
  auto key_of = [](const cluster::Host& h, std::optional<int> default_port) {
    std::string address = h.address;
    std::transform(address.begin(), address.end(), address.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    return std::make_pair(address, h.port.value_or(default_port.value_or(22)));
  };
  for (const HostDraft& h : d.hosts) {
    if (h.host.is_local() || h.host.address.empty()) continue;
    seen.emplace(key_of(h.host, d.spec.ssh.port), Where{"hosts", h.entry.src->name, h.host.line});
  }
  const int workers = d.worker.role.count.value_or(-1);
  for (GroupDraft& g : d.groups) {
    const std::string pool = "group '" + g.group.name + "'";
    const std::optional<int> port = g.ssh_keys.contains("port") ? g.group.ssh.port : d.spec.ssh.port;
    const HostDraft* head = nullptr;
    int nodes = 0;
    for (const HostDraft& h : g.hosts) {
      nodes += h.host.nodes;
      if (h.address && h.host.is_local()) {
        h.address->Error("the local engine cannot be in a host group (rows without a host_group "
                         "use the job's own hosts)");
        g.host_errors = true;
        continue;
      }
      if (h.role) {
        if (head != nullptr) {
          h.role->Error("a second head in " + pool + "; " + head->entry.path + " (line " +
                        std::to_string(head->host.line) + ") is its head already");
        } else {
          head = &h;
        }
      }
      if (!h.address || h.host.address.empty()) continue;
      const auto key = key_of(h.host, port);
      auto [it, inserted] = seen.emplace(key, Where{pool, h.entry.src->name, h.host.line});
      if (!inserted) {
        h.address->Error("host '" + h.host.address + "' port " + std::to_string(key.second) +
                         " is in " + it->second.pool + " already (" + it->second.file + " line " +
                         std::to_string(it->second.line) + "); a host belongs to one pool");
      }
    }
    if (g.host_errors || g.hosts.empty()) continue;
    if (d.spec.hosts_per_member &&
        static_cast<size_t>(*d.spec.hosts_per_member) > g.hosts.size()) {
      g.entry.KeyError(pool + " has " + std::to_string(g.hosts.size()) +
                       " host(s), but each member takes hosts_per_member: " +
                       std::to_string(*d.spec.hosts_per_member));
    } else if (!d.spec.hosts_per_member && workers >= 0 && nodes < workers + 1) {
      g.entry.KeyError(pool + " provides " + std::to_string(nodes) + " node(s), but a member's head and " +
                       std::to_string(workers) + " worker(s) need " + std::to_string(workers + 1) +
                       " (add hosts to the group, or raise a host's 'nodes:')");
    }
  }
}

// The image of every role that will run, and enough nodes for the workers.
void CheckRolesAgainstNodes(JobDraft& d, const Entry& root) {
  // A host entry with errors counts as its default single node; the count
  // check then stays silent, as it could only guess.
  int total = 0;
  for (const HostDraft& h : d.hosts) total += h.host.nodes;
  if (!d.hosts_given) total = 1;  // the local engine
  const int workers = d.worker.role.count.value_or(std::max(total - 1, 0));
  if (d.worker.count && workers > total - 1 && !d.host_errors) {
    d.worker.count->Error(std::to_string(workers) + " workers and the head need " +
                          std::to_string(workers + 1) + " nodes, but the hosts provide " +
                          std::to_string(total) +
                          " (add hosts, raise a host's 'nodes:', or use count: rest)");
  }
  if (d.image_written) return;  // right, or wrong and reported already
  std::vector<std::string_view> missing;
  if (!d.head.role.image && !d.head.image) missing.push_back("roles.head");
  if (workers > 0 && !d.worker.role.image && !d.worker.image) missing.push_back("roles.worker");
  if (missing.empty()) return;
  std::string message = "missing; set 'image:' at the top";
  if (d.head.present || d.worker.present) {
    message += " or in " + JoinWords(missing, " and ");
  }
  root.src->Error(root.key.Mark(), "image", message + " (e.g. image: debian:12)");
}

// An MPI job: host network everywhere (each worker's sshd listens on its
// host's address, and the ranks talk across hosts), no worker command (the
// workers run sshd), no spare hosts (the head's known_hosts names every
// worker's address).
void CheckMpi(JobDraft& d) {
  if (!d.mpi) return;
  const Entry& mpi = *d.mpi;
  if (d.worker.command) {
    d.worker.command->KeyError(
        "an MPI job's workers run only their sshd, which barge starts; the job's command "
        "runs on the head (e.g. mpirun --hostfile $BARGE_MPI_HOSTFILE ...) and starts the ranks on the "
        "workers itself");
  }
  if (!d.spec.spare_hosts.empty() || !d.spares.empty()) {
    mpi.KeyError("spare_hosts cannot be used with mpi: yet (the head's hostfile and known_hosts "
                 "name every worker)");
  }
  auto network_of = [&](const HostDraft* h, const RoleDraft& role) -> std::string {
    if (h && h->host.container.network) return *h->host.container.network;
    if (role.role.container.network) return *role.role.container.network;
    return d.spec.container.network.value_or("bridge (Docker's default)");
  };
  std::vector<std::string> wrong;
  auto check = [&](const HostDraft* h, const RoleDraft& role, const std::string& where) {
    const std::string net = network_of(h, role);
    if (net != "host") wrong.push_back(where + (where == "the workers" ? " have" : " has") + " network " + net);
  };
  check(nullptr, d.head, "the head");
  check(nullptr, d.worker, "the workers");
  for (const HostDraft& h : d.hosts) {
    if (h.host.container.network) check(&h, d.head, h.entry.path);
  }
  if (!wrong.empty()) {
    std::string why;
    for (const std::string& w : wrong) why += (why.empty() ? "" : "; ") + w;
    mpi.KeyError("an MPI job needs container.network: host (each worker's sshd listens on its "
                 "host's address and the ranks reach each other across hosts): " + why);
  }
}

// Teardown hooks may use {host.address}, {host.internal_address} and
// {job.id} (validated values); a host's vars are read from
// "$BARGE_VAR_NAME" (runner/remote/teardown_hooks.h), never pasted into the
// hook's text. Other braces are left alone.
void CheckTeardownPlaceholders(const JobDraft& d) {
  static constexpr std::string_view kPlaceholders[] = {"{host.address}", "{host.internal_address}", "{job.id}"};
  static constexpr std::string_view kVar = "BARGE_VAR_";
  for (const Entry& e : d.teardown.commands) {
    const std::string& command = e.value.Scalar();
    // Hooks are shell text run on the hosts or here: no array row value in
    // it (a hook runs once per host, not per member, all the same).
    if (std::string why = ArrayPlaceholderInShell({"sh", "-c", command}, /*string_form=*/true); !why.empty()) {
      e.Error(why);
      continue;
    }
    bool failed = false;
    for (size_t open = command.find('{'); open != std::string::npos && !failed;
         open = command.find('{', open + 1)) {
      size_t close = command.find('}', open);
      if (close == std::string::npos) break;
      std::string placeholder = command.substr(open, close - open + 1);
      std::string_view inner = std::string_view(placeholder).substr(1, placeholder.size() - 2);
      if (!inner.starts_with("host.") && !inner.starts_with("job.")) continue;
      if (placeholder == "{host.address}" || placeholder == "{host.internal_address}" ||
          placeholder == "{job.id}") {
        continue;
      }
      failed = true;
      if (inner.starts_with("host.vars.") && IsIdentifier(inner.substr(10))) {
        // A var's value comes from the job file or a hosts_command's JSON:
        // pasted into text the user quoted themselves, it could run as code.
        e.Error(placeholder + " would paste a host's value into the hook's shell text: write \"$" +
                std::string(kVar) + std::string(inner.substr(10)) + "\" instead (barge sets it for the hook)");
        continue;
      }
      std::string message = "unknown placeholder " + placeholder + " (expected " +
                            JoinWords(kPlaceholders, " or ") + ", or \"$" + std::string(kVar) + "NAME\" for a host's vars)";
      if (auto close_match = ClosestMatch(placeholder, kPlaceholders)) {
        message += "; did you mean " + *close_match + "?";
      } else if (inner.starts_with("host.") && IsIdentifier(inner.substr(5))) {
        // {host.instance_id}: a per-host value lives under vars.
        message += "; did you mean \"$" + std::string(kVar) + std::string(inner.substr(5)) + "\"?";
      }
      e.Error(message);
    }
    if (failed) continue;
    // Every var the hook reads is set on every host (an unset one would run
    // the hook with an empty value: a terminate call without its instance).
    for (size_t at = command.find(kVar); at != std::string::npos; at = command.find(kVar, at + 1)) {
      if (at > 0 && (std::isalnum(static_cast<unsigned char>(command[at - 1])) || command[at - 1] == '_')) continue;
      size_t end = at + kVar.size();
      while (end < command.size() && (std::isalnum(static_cast<unsigned char>(command[end])) || command[end] == '_')) ++end;
      const std::string name = command.substr(at + kVar.size(), end - at - kVar.size());
      if (name.empty()) continue;
      const std::string shown = "$" + std::string(kVar) + name;
      if (!d.hosts_given) {
        e.Error(shown + " needs hosts with 'vars:' (this job runs on the local engine)");
        break;
      }
      bool missing = false;
      for (const HostDraft& h : d.hosts) {
        if (!h.host.vars.contains(name)) {
          e.Error(shown + " is not set in " + h.entry.path + ".vars (line " + std::to_string(h.host.line) + ")");
          missing = true;
          break;
        }
      }
      if (missing) break;
    }
  }
}

// A hosts_command's output is an inventory other people or tools may write
// (terraform output, a cloud API): it names hosts, their ports, users and
// vars, but may set what runs as code on the hosts (docker_command, the
// container options: volumes, capabilities, run_options) only when the job
// file says `trust_hosts_command: true`.
void CheckHostsCommandKeys(const JobDraft& d) {
  if (d.command_source == nullptr || d.trust_hosts_command) return;
  for (const HostDraft& h : d.hosts) {
    if (h.entry.src != d.command_source || !h.entry.value.IsMap()) continue;
    for (auto it = h.entry.value.begin(); it != h.entry.value.end(); ++it) {
      const std::string key = it->first.IsScalar() ? it->first.Scalar() : "";
      if (key != "docker_command" && key != "container") continue;
      h.entry.Child(it->first, it->second)
          .KeyError("a hosts_command's output may not set " + key +
                    " (it runs as code on the host); set trust_hosts_command: true in the job file if the "
                    "command and what it reads are yours");
    }
  }
}

void ReadJob(const Source& src, const YAML::Node& root, JobDraft& d) {
  const Entry top{&src, root, root, ""};
  if (!root.IsMap()) {
    top.Error("expected a mapping of job keys (name:, image:, hosts:, ...), got " + TypeName(root));
    return;
  }
  SeenKeys seen = ReadMapping(top, kJobRules, d);
  if (!seen.contains("name")) {
    src.Error(root.Mark(), "name", "missing; every job needs a name (e.g. name: train)");
  }
  if (seen.contains("hosts") && seen.contains("hosts_file")) {
    seen.at("hosts_file").KeyError("give either 'hosts' or 'hosts_file', not both");
    d.host_errors = true;
  }
  if (seen.contains("hosts_command")) {
    for (const char* other : {"hosts", "hosts_file"}) {
      if (seen.contains(other)) {
        seen.at("hosts_command").KeyError(std::string("give either '") + other +
                                          "' or 'hosts_command', not both");
        d.host_errors = true;
      }
    }
  }
  CheckHostsCommandKeys(d);
  CheckSlurm(d, seen);
  CheckHosts(d);
  CheckHostGroups(d);
  CheckRolesAgainstNodes(d, top);
  CheckTeardownPlaceholders(d);
  CheckSecretsAgainstEnv(d);
  CheckMpi(d);
  CheckS3NeedsStorage(d, seen);
  if (d.head.present) d.spec.roles[cluster::kHeadRole] = d.head.role;
  if (d.worker.present) d.spec.roles[cluster::kWorkerRole] = d.worker.role;
  for (const RoleDraft* r : {&d.head, &d.worker}) {
    if (r->image && r->role.image) {
      d.spec.image_written_at[*r->role.image] =
          r->image->src->name + ":" + std::to_string(r->image->key.Mark().line + 1) + ": " + r->image->path;
    }
  }
  for (HostDraft& h : d.hosts) d.spec.hosts.push_back(std::move(h.host));
  for (HostDraft& h : d.spares) d.spec.spare_hosts.push_back(std::move(h.host));
  for (GroupDraft& g : d.groups) {
    for (HostDraft& h : g.hosts) g.group.hosts.push_back(std::move(h.host));
    for (const KeyInfo& k : SshKeys()) {
      if (g.ssh_keys.contains(std::string(k.key))) g.group.ssh_keys.emplace_back(k.key);
    }
    if (g.hosts_read) d.group_hosts_read.push_back(std::move(*g.hosts_read));
    d.spec.host_groups.push_back(std::move(g.group));
  }
  d.spec.teardown = d.teardown.hooks;
}

}  // namespace barge::runner::jobfile
