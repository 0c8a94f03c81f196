#include "ssh/jump_tunnel.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "ssh/known_hosts.h"
#include "ssh/quote.h"

namespace barge::ssh {
namespace {

// OpenSSH's messages on one line, without the @ frame of its warnings; at
// most the last ~2000 bytes.
std::string OneLine(const std::string& text) {
  std::string out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    size_t first = line.find_first_not_of("@ \t\r");
    if (first == std::string::npos) continue;
    size_t last = line.find_last_not_of("@ \t\r");
    out += (out.empty() ? "" : " ") + line.substr(first, last - first + 1);
  }
  constexpr size_t kMax = 2000;
  if (out.size() > kMax) out = "..." + out.substr(out.size() - kMax);
  return out;
}

std::string JoinWords(const std::vector<std::string>& words, const char* separator) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : separator) + w;
  return out;
}

// `path` made absolute against the current directory.
std::string AbsolutePath(const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  char cwd[4096];
  if (getcwd(cwd, sizeof cwd) == nullptr) return path;
  return std::string(cwd) + "/" + path;
}

// The first executable `name` on $PATH; empty if there is none.
std::string FindOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path && *path ? path : "/usr/local/bin:/usr/bin:/bin";
  for (size_t i = 0; i <= dirs.size();) {
    size_t j = dirs.find(':', i);
    if (j == std::string::npos) j = dirs.size();
    std::string candidate = (j > i ? dirs.substr(i, j - i) : ".") + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    i = j + 1;
  }
  return "";
}

// A value for an OpenSSH config file: double-quoted, with `%` doubled where
// OpenSSH expands %-tokens. Empty if it cannot be written (a quote,
// backslash or line break in it).
std::string ConfigValue(const std::string& value, bool expands_percent) {
  if (value.find_first_of("\"\\\r\n") != std::string::npos) return "";
  std::string out = "\"";
  for (char c : value) {
    out += c;
    if (c == '%' && expands_percent) out += '%';
  }
  return out + "\"";
}

std::string ConfigFileIn(const std::string& dir) { return dir + "/config"; }
std::string ErrorFileIn(const std::string& dir) { return dir + "/stderr"; }

}  // namespace

std::optional<std::vector<std::string>> ProxyJumpHops(const std::string& proxy_command) {
  std::vector<std::string> words;
  for (size_t i = 0; i < proxy_command.size();) {
    size_t j = proxy_command.find(' ', i);
    if (j == std::string::npos) j = proxy_command.size();
    if (j > i) words.push_back(proxy_command.substr(i, j - i));
    i = j + 1;
  }
  if (words.empty() || words[0] != "ssh") return std::nullopt;
  size_t w = 1;
  auto flag = [&](const char* name) -> std::string {
    if (w + 1 >= words.size() || words[w] != name) return "";
    w += 2;
    return words[w - 1];
  };
  const std::string user = flag("-l");
  const std::string port = flag("-p");
  const std::string rest = flag("-J");
  if (words.size() != w + 3 || words[w] != "-W" || words[w + 1] != "'[%h]:%p'") {
    return std::nullopt;
  }
  const std::string& host = words[w + 2];
  std::vector<std::string> hops;
  hops.push_back((user.empty() ? "" : user + "@") +
                 (host.find(':') == std::string::npos ? host : "[" + host + "]") +
                 (port.empty() ? "" : ":" + port));
  for (size_t i = 0; !rest.empty() && i <= rest.size();) {
    size_t j = rest.find(',', i);
    if (j == std::string::npos) j = rest.size();
    if (j > i) hops.push_back(rest.substr(i, j - i));
    i = j + 1;
  }
  return hops;
}

std::string ExpandKnownHostsPath(const std::string& configured, const std::string& home) {
  if (configured.empty()) return home + "/.ssh/known_hosts";
  std::string out;
  for (size_t i = 0; i < configured.size(); ++i) {
    if (i == 0 && configured[0] == '~' && (configured.size() == 1 || configured[1] == '/')) {
      out += home;
    } else if (configured[i] == '%' && i + 1 < configured.size() && configured[i + 1] == 'd') {
      out += home + "/.ssh";
      ++i;
    } else if (configured[i] == '%' && i + 1 < configured.size() && configured[i + 1] == '%') {
      out += '%';
      ++i;
    } else {
      out += configured[i];
    }
  }
  return out;
}

Result<std::string> JumpClientConfig(const std::vector<std::string>& hops,
                                     const SessionOptions& options,
                                     const std::string& known_hosts,
                                     const std::string& ssh_config) {
  const std::string via = "ProxyJump " + JoinWords(hops, ",");
  const char* strict = "yes";
  std::string hosts_file = known_hosts;
  if (options.host_key_checking == HostKeyChecking::kAcceptNew) strict = "accept-new";
  if (options.host_key_checking == HostKeyChecking::kOff) {
    strict = "no";
    hosts_file = "/dev/null";  // off records nothing
  }
  // Shorter than libssh's own timeout, so that a jump host that does not
  // answer is reported as such before libssh gives up on the whole chain.
  const long hop_timeout_s =
      std::max<long>(1, static_cast<long>(options.connect_timeout.count() * 2 / 3 / 1000));
  const std::string hosts_value = ConfigValue(AbsolutePath(hosts_file), true);
  const std::string include_value = ConfigValue(AbsolutePath(ssh_config), false);
  const std::string identity_value =
      options.identity_file ? ConfigValue(AbsolutePath(*options.identity_file), true) : "";
  if (hosts_value.empty() || include_value.empty() ||
      (options.identity_file && identity_value.empty())) {
    return Status::Error(via +
                         ": a known_hosts, ssh config or identity file path with a quote, "
                         "backslash or line break cannot be passed to OpenSSH's ssh");
  }
  std::string config =
      "# Written by barge for one connection through " + via +
      "; removed once connected.\n"
      "Host *\n"
      "  BatchMode yes\n"
      "  StrictHostKeyChecking " + strict + "\n"
      "  UserKnownHostsFile " + hosts_value + "\n"
      "  ConnectTimeout " + std::to_string(hop_timeout_s) + "\n"
      "  ControlMaster no\n"
      "  ControlPath none\n"
      "  LogLevel ERROR\n";
  if (!ssh_config.empty()) config += "Include " + include_value + "\n";
  if (options.identity_file) config += "Host *\n  IdentityFile " + identity_value + "\n";
  return config;
}

std::string JumpProxyCommand(const std::string& ssh, const std::string& dir,
                             const std::vector<std::string>& hops, const std::string& host,
                             unsigned int port, const std::string& setsid) {
  // The last hop is ssh's destination; the ones before it its -J list.
  std::vector<std::string> argv;
  if (!setsid.empty()) argv.push_back(setsid);
  argv.insert(argv.end(), {ssh, "-F", ConfigFileIn(dir)});
  if (hops.size() > 1) {
    argv.push_back("-J");
    argv.push_back(JoinWords(std::vector<std::string>(hops.begin(), hops.end() - 1), ","));
  }
  argv.push_back("-W");
  argv.push_back("[" + host + "]:" + std::to_string(port));
  const std::string& last = hops.back();
  argv.push_back(last.rfind("ssh://", 0) == 0 ? last : "ssh://" + last);
  const std::string command = ShellJoin(argv) + " 2>>" + ShellQuote(ErrorFileIn(dir));
  // libssh expands %-tokens in a ProxyCommand: keep every % literal.
  std::string out;
  for (char c : command) {
    out += c;
    if (c == '%') out += '%';
  }
  return out;
}

std::string DescribeJumpFailure(const std::string& ssh_stderr, const std::string& known_hosts) {
  if (auto changed = ParseOpenSshChangedKey(ssh_stderr)) {
    std::vector<KnownHostsLine> old_lines;
    std::vector<std::string> files = changed->files;
    if (files.empty()) files.push_back(known_hosts);
    for (const std::string& file : files) {
      for (KnownHostsLine& line : FindKnownHostsLines(file, changed->name)) {
        old_lines.push_back(std::move(line));
      }
    }
    return "jump host " + changed->name + ": " +
           ChangedHostKeyMessage(changed->name, changed->key_type, changed->fingerprint, old_lines,
                                 files.front());
  }
  std::string said = "OpenSSH's ssh for the jump hosts says: " + OneLine(ssh_stderr);
  if (said.find("host key is known for") != std::string::npos) {
    said += " Check the jump host's key with its administrator and add it to " + known_hosts +
            ", or set host_key_checking: accept-new.";
  }
  return said;
}

Result<std::unique_ptr<JumpTunnel>> JumpTunnel::Make(const std::vector<std::string>& hops,
                                                     const std::string& host, unsigned int port,
                                                     const SessionOptions& options,
                                                     const std::string& known_hosts,
                                                     const std::string& ssh_config) {
  const std::string via = "ProxyJump " + JoinWords(hops, ",");
  const std::string ssh = FindOnPath("ssh");
  if (ssh.empty()) {
    return Status::Error(via + " needs OpenSSH's client (ssh) on PATH, and there is none");
  }
  const char* tmp = std::getenv("TMPDIR");
  std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/barge-jump-XXXXXX";
  if (mkdtemp(dir.data()) == nullptr) {
    return Status::Error(via + ": cannot make a directory " + dir + ": " + std::strerror(errno));
  }
  // From here on, its destructor removes the directory on every return.
  std::unique_ptr<JumpTunnel> tunnel(new JumpTunnel(dir, JoinWords(hops, ",")));

  auto config = JumpClientConfig(hops, options, known_hosts, ssh_config);
  if (!config.ok()) return config.status();
  {
    std::ofstream out(tunnel->config_file());
    out << *config;
    if (!out.flush()) {
      return Status::Error(via + ": cannot write " + tunnel->config_file());
    }
  }
  // Without setsid (not util-linux) a Ctrl-C also ends the tunnel; the
  // host's watchdog then removes its containers when the lease runs out.
  tunnel->proxy_command_ = JumpProxyCommand(ssh, tunnel->dir_, hops, host, port,
                                            FindOnPath("setsid"));
  return tunnel;
}

JumpTunnel::~JumpTunnel() {
  unlink(config_file().c_str());
  unlink(error_file().c_str());
  rmdir(dir_.c_str());
}

std::string JumpTunnel::ErrorOutput() const {
  std::ifstream in(error_file());
  std::string out(64 * 1024, '\0');
  in.read(out.data(), static_cast<std::streamsize>(out.size()));
  out.resize(static_cast<size_t>(in.gcount()));
  return out;
}

std::string JumpTunnel::config_file() const { return ConfigFileIn(dir_); }
std::string JumpTunnel::error_file() const { return ErrorFileIn(dir_); }

}  // namespace barge::ssh
