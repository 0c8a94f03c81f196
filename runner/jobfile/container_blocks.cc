// The container, host-entry, readiness, role, ssh, rendezvous and teardown blocks.
#include "runner/jobfile/blocks.h"

namespace barge::runner::jobfile {

// ---------------------------------------------------------------------------
// The blocks.

constexpr KeyRule<ContainerOptions> kContainerRules[] = {
    {"shm_size",
     {.type = KeyType::kSize, .description = "Size of the container's /dev/shm (docker run --shm-size)"}, [](const Entry& e, ContainerOptions& o) { o.shm_size = ReadSize(e); }},
    {"cap_add",
     {.type = KeyType::kStringList, .description = "Linux capabilities to add (docker run --cap-add), e.g. [SYS_ADMIN]"},
     [](const Entry& e, ContainerOptions& o) { o.cap_add = ReadStringList(e, CheckCapability); }},
    {"gpus",
     {.type = KeyType::kJson, .description = "GPUs for the container: all, a count, or a list of device ids (docker run --gpus)", .schema = R"({"anyOf": [{"type": "string"}, {"type": "integer", "minimum": 1, "maximum": 1024}, {"type": "array", "minItems": 1, "items": {"type": ["string", "integer"]}}]})"}, [](const Entry& e, ContainerOptions& o) { o.gpus = ReadGpus(e); }},
    {"ipc",
     {.type = KeyType::kString, .description = "IPC namespace mode (docker run --ipc): host, private, shareable, container:NAME"}, [](const Entry& e, ContainerOptions& o) { o.ipc = ReadChecked(e, CheckIpcMode); }},
    {"network",
     {.type = KeyType::kString, .description = "Network mode (docker run --network): host, bridge, none, or a network name"},
     [](const Entry& e, ContainerOptions& o) { o.network = ReadChecked(e, CheckNetworkMode); }},
    {"memory",
     {.type = KeyType::kSize, .description = "Memory limit (docker run --memory)"}, [](const Entry& e, ContainerOptions& o) { o.memory = ReadSize(e); }},
    {"cpus",
     {.type = KeyType::kString, .description = "CPU limit, in CPUs' worth of time (docker run --cpus), e.g. 4 or 1.5"},
     [](const Entry& e, ContainerOptions& o) { o.cpus = ReadChecked(e, CheckCpus); }},
    {"ulimits",
     {.type = KeyType::kStringMap, .description = "ulimits by name (docker run --ulimit NAME=VALUE), e.g. memlock: -1"}, [](const Entry& e, ContainerOptions& o) { o.ulimits = ReadUlimits(e); }},
    {"devices",
     {.type = KeyType::kStringList, .description = "Host devices to add (docker run --device), e.g. /dev/fuse"},
     [](const Entry& e, ContainerOptions& o) { o.devices = ReadStringList(e, CheckDeviceSpec); }},
    {"volumes",
     {.type = KeyType::kStringList, .description = "Bind mounts HOST_PATH:CONTAINER_PATH[:ro] (absolute paths)"},
     [](const Entry& e, ContainerOptions& o) { o.volumes = ReadStringList(e, CheckVolumeSpec); }},
    {"env",
     {.type = KeyType::kStringMap, .description = "Environment variables NAME: value"}, [](const Entry& e, ContainerOptions& o) { o.env = ReadEnv(e); }},
    {"run_options",
     {.type = KeyType::kStringList, .description = "Extra docker run arguments, passed as given"},
     [](const Entry& e, ContainerOptions& o) { o.run_options = ReadStringList(e, nullptr); }},
};
std::vector<KeyInfo> ContainerKeys() { return Describe(kContainerRules); }

void ReadContainer(const Entry& e, ContainerOptions& out) { ReadMapping(e, kContainerRules, out); }

constexpr std::string_view kHeadOnly[] = {"head"};

constexpr KeyRule<HostDraft> kHostRules[] = {
    {"address",
     {.type = KeyType::kString, .description = "Host name or IP address to reach over SSH, or local for the local Docker engine", .required = true},
     [](const Entry& e, HostDraft& h) {
       h.address = e;
       if (auto a = ReadChecked(e, CheckHostAddress)) h.host.address = *a;
     }},
    {"internal_address",
     {.type = KeyType::kString, .description = "The address other nodes are told for this host (MASTER_ADDR, BARGE_NODE_IPS, ...). Default: address when it is an IP address; for an ssh config alias or DNS name, the IP address its SSH connection reached, settled at run time"},
     [](const Entry& e, HostDraft& h) {
       std::optional<std::string> a = ReadChecked(e, CheckHostAddress);
       if (a && *a == cluster::kLocalAddress) {
         e.Error("'local' is not an address other nodes can reach");
       } else if (a) {
         h.host.internal_address = *a;
       }
     }},
    {"user",
     {.type = KeyType::kString, .description = "SSH user (default: ssh.user, config.yaml, ~/.ssh/config)"},
     [](const Entry& e, HostDraft& h) {
       h.ssh_settings.push_back(e);
       h.host.user = ReadChecked(e, CheckUserName);
     }},
    {"port",
     {.type = KeyType::kInteger, .description = "SSH port (default: ssh.port, config.yaml, ~/.ssh/config, 22)"},
     [](const Entry& e, HostDraft& h) {
       h.ssh_settings.push_back(e);
       h.host.port = ReadPort(e);
     }},
    {"identity_file",
     {.type = KeyType::kString, .description = "SSH private key file"},
     [](const Entry& e, HostDraft& h) {
       h.ssh_settings.push_back(e);
       h.host.identity_file = ReadReadableFile(e, "identity file");
     }},
    {"proxy_jump",
     {.type = KeyType::kString, .description = "Jump hosts to reach this host through, as ssh -J takes them: [user@]host[:port],... (default: ssh.proxy_jump, else the ssh config's ProxyJump)"},
     [](const Entry& e, HostDraft& h) {
       h.ssh_settings.push_back(e);
       h.host.proxy_jump = ReadProxyJump(e);
     }},
    {"gpus",
     {.type = KeyType::kInteger, .description = "Number of GPUs on the host (default: asked at preflight). A node asking for a GPU count here gets free devices of its own (--gpus '\"device=0,1\"')"},
     [](const Entry& e, HostDraft& h) {
       if (auto n = ReadInteger(e, 0, 1024, "a GPU count")) h.host.gpus = static_cast<int>(*n);
     }},
    {"nodes",
     {.type = KeyType::kInteger, .description = "Containers (nodes) to run on this host", .default_value = "1"},
     [](const Entry& e, HostDraft& h) {
       h.nodes = e;
       if (auto n = ReadInteger(e, 1, 1024, "a number of nodes"))
         h.host.nodes = static_cast<int>(*n);
     }},
    {"docker_command",
     {.type = KeyType::kString, .description = "The docker command on this host (default: the job's docker_command)"},
     [](const Entry& e, HostDraft& h) {
       h.host.docker_command = ReadChecked(e, CheckDockerCommand);
     }},
    {"role",
     {.type = KeyType::kEnum, .description = "head: this host carries the head (rank 0)", .choices = kHeadOnly},
     [](const Entry& e, HostDraft& h) {
       std::optional<std::string> role = ReadScalar(e, "'head'");
       if (role && *role != cluster::kHeadRole) {
         e.Error("invalid role " + QuoteValue(*role) +
                 ": only 'head' can be set here (the other hosts carry the workers)");
       } else if (role) {
         h.role = e;
         h.host.role = *role;
       }
     }},
    {"container",
     {.type = KeyType::kBlock, .description = "Container options for this host's nodes", .keys = ContainerKeys}, [](const Entry& e, HostDraft& h) { ReadContainer(e, h.host.container); }},
    {"vars",
     {.type = KeyType::kStringMap, .description = "Per-host variables, which teardown hooks read as \"$BARGE_VAR_NAME\""},
     [](const Entry& e, HostDraft& h) {
       std::optional<KeyValues> vars = ReadKeyValues(
           e,
           [](const Entry& item) {
             if (!IsIdentifier(item.key.Scalar())) {
               item.KeyError("invalid variable name " + QuoteValue(item.key.Scalar()) +
                             " (letters, digits and '_', not starting with a digit)");
               return false;
             }
             return true;
           },
           [](const Entry&, const std::string&) { return true; });
       if (vars) h.host.vars.insert(vars->begin(), vars->end());
     }},
};
std::vector<KeyInfo> HostKeys() { return Describe(kHostRules); }

constexpr KeyRule<ReadyDraft> kReadyRules[] = {
    {"tcp_port",
     {.type = KeyType::kInteger, .description = "Ready once this TCP port accepts connections"},
     [](const Entry& e, ReadyDraft& r) {
       r.kinds.push_back(e);
       r.probe.kind = cluster::ReadinessProbe::Kind::kTcpPort;
       if (auto port = ReadPort(e)) r.probe.tcp_port = *port;
     }},
    {"log",
     {.type = KeyType::kString, .description = "Ready once a log line matches this regular expression"},
     [](const Entry& e, ReadyDraft& r) {
       r.kinds.push_back(e);
       r.probe.kind = cluster::ReadinessProbe::Kind::kLog;
       std::optional<std::string> pattern = ReadNonEmpty(e, "a regular expression");
       if (!pattern) return;
       if (pattern->size() > 1000) {
         e.Error("regular expression longer than 1000 characters");
         return;
       }
       try {
         std::regex compiled(*pattern, std::regex::ECMAScript);
         r.probe.log_regex = *pattern;
       } catch (const std::regex_error& error) {
         e.Error("invalid regular expression " + QuoteValue(*pattern) + ": " + error.what());
       }
     }},
    {"command",
     {.type = KeyType::kString, .description = "Ready once this shell command, run in the container, exits 0"},
     [](const Entry& e, ReadyDraft& r) {
       r.kinds.push_back(e);
       r.probe.kind = cluster::ReadinessProbe::Kind::kCommand;
       if (auto command = ReadNonEmpty(e, "a shell command")) r.probe.command = *command;
     }},
    {"timeout",
     {.type = KeyType::kDuration, .description = "How long to wait for readiness", .default_value = "120s"},
     [](const Entry& e, ReadyDraft& r) {
       if (auto d = ReadDuration(e, /*allow_zero=*/false)) r.probe.timeout = *d;
     }},
};
std::vector<KeyInfo> ReadyKeys() { return Describe(kReadyRules); }

void ReadReady(const Entry& e, cluster::ReadinessProbe& out) {
  ReadyDraft draft;
  ReadMapping(e, kReadyRules, draft);
  if (draft.kinds.size() > 1) {
    std::string names;
    for (const Entry& k : draft.kinds) names += (names.empty() ? "" : " and ") + k.key.Scalar();
    draft.kinds[1].KeyError("give one of tcp_port, log or command, not " + names);
    return;
  }
  if (draft.kinds.empty() && e.value.IsMap()) {
    e.KeyError(
        "give one of tcp_port, log or command (without 'ready:' the head is ready once "
        "its container runs)");
    return;
  }
  out = draft.probe;
}

constexpr KeyRule<RoleDraft> kHeadRules[] = {
    {"image",
     {.type = KeyType::kString, .description = "Image of the head (default: the job's image)"},
     [](const Entry& e, RoleDraft& r) {
       r.image = e;
       r.role.image = ReadChecked(e, CheckImageOrArrayTemplate);
     }},
    {"command",
     {.type = KeyType::kCommand, .description = "Command of the head (default: the job's command)"}, [](const Entry& e, RoleDraft& r) { r.role.command = ReadCommand(e); }},
    {"container",
     {.type = KeyType::kBlock, .description = "Container options of the head", .keys = ContainerKeys}, [](const Entry& e, RoleDraft& r) { ReadContainer(e, r.role.container); }},
    {"ready",
     {.type = KeyType::kBlock, .description = "Readiness probe: the workers start once the head is ready (one of tcp_port, log, command)", .keys = ReadyKeys}, [](const Entry& e, RoleDraft& r) { ReadReady(e, r.role.ready); }},
    {"count", {}, nullptr, "only role 'worker' has a count; there is always exactly one head"},
};
std::vector<KeyInfo> HeadKeys() { return Describe(kHeadRules); }

constexpr KeyRule<RoleDraft> kWorkerRules[] = {
    {"image",
     {.type = KeyType::kString, .description = "Image of the workers (default: the job's image)"},
     [](const Entry& e, RoleDraft& r) {
       r.image = e;
       r.role.image = ReadChecked(e, CheckImageOrArrayTemplate);
     }},
    {"command",
     {.type = KeyType::kCommand, .description = "Command of the workers (default: the job's command)"},
     [](const Entry& e, RoleDraft& r) {
       r.command = e;
       r.role.command = ReadCommand(e);
     }},
    {"container",
     {.type = KeyType::kBlock, .description = "Container options of the workers", .keys = ContainerKeys}, [](const Entry& e, RoleDraft& r) { ReadContainer(e, r.role.container); }},
    {"count",
     {.type = KeyType::kJson, .description = "Number of workers, or rest (every node but the head)", .default_value = "rest", .schema = R"({"anyOf": [{"type": "integer", "minimum": 0, "maximum": 100000}, {"type": "string"}]})"},
     [](const Entry& e, RoleDraft& r) {
       if (e.value.IsScalar() && e.value.Scalar() == "rest") return;  // count stays nullopt
       std::optional<std::string> s = ReadScalar(e, "a number of workers or 'rest'");
       long long n;
       if (s && (!ParseInteger(*s, &n) || n < 0 || n > 100000)) {
         e.Error("expected a number of workers (0 or more) or 'rest', got " + QuoteValue(*s));
       } else if (s) {
         r.role.count = static_cast<int>(n);
         r.count = e;
       }
     }},
    {"ready", {}, nullptr, "only the head has a readiness probe ('ready')"},
};
std::vector<KeyInfo> WorkerKeys() { return Describe(kWorkerRules); }

constexpr auto kHostKeyChecking = NamesOf(ssh::kHostKeyCheckingNames);


constexpr KeyRule<SshSettings> kSshRules[] = {
    {"known_hosts",
     {.type = KeyType::kString, .description = "known_hosts file (default: ~/.ssh/known_hosts)"},
     [](const Entry& e, SshSettings& s) {
       if (auto path = ReadPath(e)) s.known_hosts = *path;
     }},
    {"config_file",
     {.type = KeyType::kString, .description = "ssh config file (default: ~/.ssh/config)"},
     [](const Entry& e, SshSettings& s) {
       if (auto path = ReadReadableFile(e, "ssh config file")) s.config_file = *path;
     }},
    {"host_key_checking",
     {.type = KeyType::kEnum, .description = "How unknown host keys are treated", .default_value = NameOf(ssh::kHostKeyCheckingNames, ssh::HostKeyChecking::kStrict), .choices = kHostKeyChecking},
     [](const Entry& e, SshSettings& s) {
       if (auto v = ReadEnum(e, ssh::kHostKeyCheckingNames)) s.host_key_checking = *v;
     }},
    {"connect_timeout",
     {.type = KeyType::kDuration, .description = "Time allowed to connect and log in", .default_value = "10s"},
     [](const Entry& e, SshSettings& s) {
       if (auto d = ReadDuration(e, /*allow_zero=*/false)) s.connect_timeout = *d;
     }},
    {"dead_after",
     {.type = KeyType::kDuration, .description = "A host that answers nothing for this long is lost", .default_value = "10s"},
     [](const Entry& e, SshSettings& s) {
       if (auto d = ReadDuration(e, /*allow_zero=*/false)) s.dead_after = *d;
     }},
    {"engine_timeout",
     {.type = KeyType::kDuration, .description = "Bound on each Docker engine call (preflight, probes)", .default_value = "20s"},
     [](const Entry& e, SshSettings& s) {
       if (auto d = ReadDuration(e, /*allow_zero=*/false)) s.engine_timeout = *d;
     }},
    {"engine_misses",
     {.type = KeyType::kInteger, .description = "Engine calls in a row with no answer before a host is lost, 1 to 100", .default_value = "3"},
     [](const Entry& e, SshSettings& s) {
       if (auto n = ReadInteger(e, 1, 100, "a number of engine calls")) s.engine_misses = static_cast<int>(*n);
     }},
    {"user",
     {.type = KeyType::kString, .description = "SSH user for hosts that set none"}, [](const Entry& e, SshSettings& s) { s.user = ReadChecked(e, CheckUserName); }},
    {"port",
     {.type = KeyType::kInteger, .description = "SSH port for hosts that set none"}, [](const Entry& e, SshSettings& s) { s.port = ReadPort(e); }},
    {"identity_file",
     {.type = KeyType::kString, .description = "SSH private key for hosts that set none"},
     [](const Entry& e, SshSettings& s) {
       s.identity_file = ReadReadableFile(e, "identity file");
     }},
    {"proxy_jump",
     {.type = KeyType::kString, .description = "Jump hosts for hosts that set none, as ssh -J takes them: [user@]host[:port],... (replaces the ssh config's ProxyJump)"},
     [](const Entry& e, SshSettings& s) {
       if (auto hops = ReadProxyJump(e)) s.proxy_jump = *hops;
     }},
    {"parallel_connects",
     {.type = KeyType::kInteger, .description = "SSH handshakes at once, 1 to 4096", .default_value = "32"},
     [](const Entry& e, SshSettings& s) {
       if (auto n = ReadInteger(e, 1, 4096, "a number of SSH handshakes at once"))
         s.parallel_connects = static_cast<int>(*n);
     }},
};
std::vector<KeyInfo> SshKeys() { return Describe(kSshRules); }

using cluster::kConventions;

constexpr KeyRule<cluster::RendezvousOptions> kRendezvousRules[] = {
    {"port",
     {.type = KeyType::kInteger, .description = "The head's rendezvous port (MASTER_PORT, ...)", .default_value = "29500"},
     [](const Entry& e, cluster::RendezvousOptions& r) {
       if (auto port = ReadPort(e)) r.port = *port;
     }},
    {"env",
     {.type = KeyType::kEnumList, .description = "Rendezvous variable conventions to set (default: all)", .choices = kConventions},
     [](const Entry& e, cluster::RendezvousOptions& r) {
       if (!ExpectList(e, "conventions (" + JoinWords(kConventions, " or ") + ")")) return;
       std::vector<std::string> conventions;
       for (size_t i = 0; i < e.value.size(); ++i) {
         Entry item = e.Element(e.value[i], i);
         std::optional<std::string> c = ReadEnum(item, kConventions);
         if (!c) continue;
         if (std::find(conventions.begin(), conventions.end(), *c) != conventions.end()) {
           item.Error(QuoteValue(*c) + " is listed twice");
           continue;
         }
         conventions.push_back(*c);
       }
       r.conventions = conventions;
     }},
};
std::vector<KeyInfo> RendezvousKeys() { return Describe(kRendezvousRules); }

constexpr KeyRule<TeardownDraft> kTeardownRules[] = {
    {"host_command",
     {.type = KeyType::kString, .description = "Shell command run on each host over SSH at teardown"},
     [](const Entry& e, TeardownDraft& t) {
       t.hooks.host_command = ReadNonEmpty(e, "a shell command");
       if (t.hooks.host_command) t.commands.push_back(e);
     }},
    {"local_command",
     {.type = KeyType::kString, .description = "Shell command run here, once per host, at teardown"},
     [](const Entry& e, TeardownDraft& t) {
       t.hooks.local_command = ReadNonEmpty(e, "a shell command");
       if (t.hooks.local_command) t.commands.push_back(e);
     }},
};
std::vector<KeyInfo> TeardownKeys() { return Describe(kTeardownRules); }

SeenKeys ReadHostEntry(const Entry& e, HostDraft& h) { return ReadMapping(e, kHostRules, h); }
SeenKeys ReadHead(const Entry& e, RoleDraft& r) { return ReadMapping(e, kHeadRules, r); }
SeenKeys ReadWorker(const Entry& e, RoleDraft& r) { return ReadMapping(e, kWorkerRules, r); }
SeenKeys ReadSsh(const Entry& e, SshSettings& s) { return ReadMapping(e, kSshRules, s); }

SeenKeys ReadRendezvous(const Entry& e, cluster::RendezvousOptions& r) { return ReadMapping(e, kRendezvousRules, r); }
SeenKeys ReadTeardown(const Entry& e, TeardownDraft& t) { return ReadMapping(e, kTeardownRules, t); }

}  // namespace barge::runner::jobfile
