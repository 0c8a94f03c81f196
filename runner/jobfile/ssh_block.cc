// `ssh:` (the job's, a host group's): how hosts are reached and when one is lost.
#include "runner/jobfile/blocks.h"

namespace barge::runner::jobfile {

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

SeenKeys ReadSsh(const Entry& e, SshSettings& s) { return ReadMapping(e, kSshRules, s); }

}  // namespace barge::runner::jobfile
