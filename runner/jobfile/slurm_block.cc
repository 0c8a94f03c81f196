// `slurm:` — the job's hosts are a Slurm allocation (runner/controller/slurm_run.h).
#include <regex>

#include "runner/jobfile/blocks.h"

namespace barge::runner::jobfile {

namespace {

constexpr std::string_view kSlurmBooleans[] = {"true", "false"};
constexpr std::string_view kTransports[] = {"ssh", "srun"};

// A partition, account or QOS: Slurm's names (a comma list of partitions
// included), never shell text.
Status CheckSlurmName(std::string_view v) {
  static const std::regex kName("[A-Za-z0-9_.-]+(,[A-Za-z0-9_.-]+)*");
  if (!std::regex_match(v.begin(), v.end(), kName)) {
    return Status::Error("must be a Slurm name (letters, digits, _ . -; a comma list for several partitions)");
  }
  return Status::Ok();
}

// The salloc options barge sets itself: the job's shape is its keys.
constexpr std::pair<std::string_view, std::string_view> kOwnOptions[] = {
    {"--nodes", "slurm.nodes"},         {"-N", "slurm.nodes"},
    {"--time", "slurm.time"},           {"-t", "slurm.time"},
    {"--job-name", "from the job's id and name"}, {"-J", "from the job's id and name"},
    {"--no-shell", "always"},           {"--partition", "slurm.partition"},
    {"-p", "slurm.partition"},          {"--account", "slurm.account"},
    {"-A", "slurm.account"},            {"--qos", "slurm.qos"},
    {"-q", "slurm.qos"},                {"--exclusive", "slurm.exclusive"},
    {"--gpus-per-node", "slurm.gpus_per_node"},
    {"--cpus-per-task", "slurm.cpus_per_node"}, {"-c", "slurm.cpus_per_node"},
    {"--mem", "slurm.mem_per_node"},
};

Status CheckExtraOption(std::string_view v) {
  if (v.empty()) return Status::Error("must not be empty");
  if (v.find_first_of(std::string_view("\n\r\0", 3)) != std::string_view::npos) {
    return Status::Error("must be one line");
  }
  for (const auto& [option, key] : kOwnOptions) {
    if (v == option || (v.starts_with(option) && option.starts_with("--") && v.size() > option.size() &&
                        v[option.size()] == '=') ||
        (!option.starts_with("--") && v.starts_with(option) && v.size() > option.size())) {
      return Status::Error(std::string(option) + " is set by barge (" + std::string(key) + ")");
    }
  }
  return Status::Ok();
}

constexpr KeyRule<SlurmSpec> kSlurmRules[] = {
    {"nodes",
     {.type = KeyType::kInteger, .description = "How many nodes to allocate: one host each, the head on the first", .required = true},
     [](const Entry& e, SlurmSpec& s) {
       if (auto n = ReadInteger(e, 1, kMaxNodes, "a number of nodes")) s.nodes = static_cast<int>(*n);
     }},
    {"time",
     {.type = KeyType::kDuration, .description = "The allocation's time limit (salloc --time, rounded up to whole minutes): Slurm ends it then, whatever barge does", .required = true},
     [](const Entry& e, SlurmSpec& s) {
       if (auto t = ReadDuration(e, /*allow_zero=*/false)) s.time = *t;
     }},
    {"partition",
     {.type = KeyType::kString, .description = "The partition (default: the cluster's default partition)"},
     [](const Entry& e, SlurmSpec& s) {
       if (auto v = ReadChecked(e, CheckSlurmName)) s.partition = *v;
     }},
    {"gpus_per_node",
     {.type = KeyType::kInteger, .description = "GPUs on each node (salloc --gpus-per-node); also each host's gpus: in the plan"},
     [](const Entry& e, SlurmSpec& s) {
       if (auto n = ReadInteger(e, 0, 1024, "a number of GPUs")) s.gpus_per_node = static_cast<int>(*n);
     }},
    {"cpus_per_node",
     {.type = KeyType::kInteger, .description = "CPUs on each node (salloc --cpus-per-task, one task a node); with exclusive: false, each container's --cpus is what Slurm gave"},
     [](const Entry& e, SlurmSpec& s) {
       if (auto n = ReadInteger(e, 1, 65536, "a number of CPUs")) s.cpus_per_node = static_cast<int>(*n);
     }},
    {"mem_per_node",
     {.type = KeyType::kSize, .description = "Memory on each node (salloc --mem, in whole MiB); with exclusive: false, each container's --memory is what Slurm gave (this, where Slurm tracks no memory)"},
     [](const Entry& e, SlurmSpec& s) {
       if (auto v = ReadSize(e)) s.mem_per_node = *v;
     }},
    {"account",
     {.type = KeyType::kString, .description = "The account charged (salloc --account)"},
     [](const Entry& e, SlurmSpec& s) {
       if (auto v = ReadChecked(e, CheckSlurmName)) s.account = *v;
     }},
    {"qos",
     {.type = KeyType::kString, .description = "The quality of service (salloc --qos)"},
     [](const Entry& e, SlurmSpec& s) {
       if (auto v = ReadChecked(e, CheckSlurmName)) s.qos = *v;
     }},
    {"login",
     {.type = KeyType::kString, .description = "A submit host, [user@]host[:port], reached over SSH (with the job's ssh: settings otherwise) where salloc, squeue and scancel run (default: this machine)"},
     [](const Entry& e, SlurmSpec& s) {
       std::optional<std::string> v = ReadNonEmpty(e, "[user@]host[:port]");
       if (!v) return;
       Result<SshTarget> target = ParseSshTarget(*v, "login host");
       if (!target.ok()) {
         e.Error(target.status().message());
         return;
       }
       s.login = target->host;
       s.login_user = target->user;
       s.login_port = target->port;
     }},
    {"exclusive",
     {.type = KeyType::kBoolean, .description = "Whole nodes (salloc --exclusive). false: nodes shared with other jobs; each container then gets the allocation's share of its node as Docker limits (--gpus with Slurm's GPU indices, --cpus, --memory), since containers run outside Slurm's cgroups", .default_value = "true"},
     [](const Entry& e, SlurmSpec& s) {
       if (auto v = ReadEnum(e, kSlurmBooleans)) s.exclusive = *v == "true";
     }},
    {"transport",
     {.type = KeyType::kEnum, .description = "How barge reaches the allocated nodes: ssh (with the job's ssh: settings), or srun (Slurm job steps started where salloc runs, for nodes that refuse SSH; no forward:, exec -it or Engine API there)", .default_value = "ssh", .choices = kTransports},
     [](const Entry& e, SlurmSpec& s) {
       if (auto v = ReadEnum(e, kTransports)) {
         s.transport = *v == "srun" ? SlurmSpec::Transport::kSrun : SlurmSpec::Transport::kSsh;
       }
     }},
    {"extra",
     {.type = KeyType::kStringList, .description = "More salloc options, one per item (e.g. --constraint=a100); not those the keys above set"},
     [](const Entry& e, SlurmSpec& s) {
       if (auto v = ReadStringList(e, CheckExtraOption)) s.extra = *v;
     }},
};

}  // namespace

std::vector<KeyInfo> SlurmKeys() { return Describe(kSlurmRules); }

void ReadSlurm(const Entry& e, JobDraft& d) {
  SlurmSpec s;
  s.line = e.key.Mark().line + 1;
  if (!e.value.IsMap()) {
    e.Error("expected a mapping with nodes: and time: (e.g. {partition: gpu, nodes: 4, time: 2h}), got " +
            TypeName(e.value));
    d.host_errors = true;
    return;
  }
  const size_t errors_before = e.src->errors->size();
  SeenKeys seen = ReadMapping(e, kSlurmRules, s);
  for (const char* key : {"nodes", "time"}) {
    if (!seen.contains(key)) {
      e.KeyError(std::string("needs '") + key + "'" +
                 (std::string_view(key) == "time" ? " (the allocation's time limit, e.g. time: 2h)"
                                                  : " (how many nodes to allocate)"));
    }
  }
  d.slurm = e;
  if (e.src->errors->size() != errors_before) {
    d.host_errors = true;
    return;
  }
  d.spec.slurm = s;
}

// The keys that name hosts another way cannot come with `slurm:`; the
// allocation's nodes become the job's hosts: one placeholder host per node
// until it is granted.
void CheckSlurm(JobDraft& d, const SeenKeys& seen) {
  if (!d.slurm) return;
  for (const char* other : {"hosts", "hosts_file", "hosts_command", "host_groups", "spare_hosts"}) {
    if (seen.contains(other)) {
      seen.at(other).KeyError(std::string("not with 'slurm:' (line ") + std::to_string(d.slurm->key.Mark().line + 1) +
                              "): the allocation's nodes are the job's hosts");
      d.host_errors = true;
    }
  }
  if (!d.spec.slurm || d.host_errors) return;
  // On shared nodes a container gets exactly the GPUs Slurm gave its node:
  // asking for GPUs there means asking Slurm for them.
  const SlurmSpec& slurm = *d.spec.slurm;
  const bool wants_gpus = d.spec.container.gpus || (d.head.present && d.head.role.container.gpus) ||
                          (d.worker.present && d.worker.role.container.gpus);
  if (!slurm.exclusive && wants_gpus && slurm.gpus_per_node.value_or(0) == 0) {
    d.slurm->KeyError("with exclusive: false a container gets only the GPUs Slurm gives its node, and "
                      "container.gpus asks for GPUs: set slurm.gpus_per_node");
    d.host_errors = true;
    return;
  }
  d.hosts_given = true;
  for (int i = 1; i <= d.spec.slurm->nodes; ++i) {
    HostDraft h;
    h.entry = *d.slurm;
    h.host.address = SlurmNodePlaceholder(static_cast<size_t>(i));
    h.host.gpus = d.spec.slurm->gpus_per_node;
    h.host.line = d.spec.slurm->line;
    d.hosts.push_back(std::move(h));
  }
}

}  // namespace barge::runner::jobfile
