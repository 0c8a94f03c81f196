// One entry of `hosts:` or `spare_hosts:` written as a mapping (address, ssh settings, GPUs, nodes, role, container, vars).
#include "runner/jobfile/blocks.h"

namespace barge::runner::jobfile {

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

SeenKeys ReadHostEntry(const Entry& e, HostDraft& h) { return ReadMapping(e, kHostRules, h); }

}  // namespace barge::runner::jobfile
