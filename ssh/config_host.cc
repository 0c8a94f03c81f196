#include "ssh/config_host.h"

#include <sys/stat.h>
#include <sys/wait.h>

#include <cctype>
#include <cstdio>
#include <memory>
#include <sstream>

#include <libssh/libssh.h>

#include "base/user_home.h"
#include "ssh/jump_tunnel.h"
#include "ssh/quote.h"

namespace barge::ssh {
namespace {

bool FileExists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

std::string GetString(ssh_session session, ssh_options_e option) {
  char* value = nullptr;
  if (ssh_options_get(session, option, &value) != SSH_OK || value == nullptr) return "";
  std::string out = value;
  ssh_string_free_char(value);
  return out;
}

}  // namespace

void ApplyOpenSshConfig(const OpenSshConfig& g, ConfigHost* host) {
  auto first = [&](const char* key) -> std::string {
    auto it = g.find(key);
    return it == g.end() || it->second.empty() ? "" : it->second.front();
  };
  if (std::string name = first("hostname"); !name.empty()) host->host_name = name;
  const std::string jump = first("proxyjump");
  const std::string command = first("proxycommand");
  host->jump_hops.clear();
  host->proxy_command = false;
  if (!jump.empty() && jump != "none") {
    for (size_t i = 0; i <= jump.size();) {
      size_t j = jump.find(',', i);
      if (j == std::string::npos) j = jump.size();
      if (j > i) host->jump_hops.push_back(jump.substr(i, j - i));
      i = j + 1;
    }
  } else if (!command.empty() && command != "none") {
    host->proxy_command = true;
  }
}

std::string ConfigFileFor(const SessionOptions& options) {
  if (!options.config_file.empty()) return options.config_file;
  const std::string home = UserHome();
  if (!home.empty() && FileExists(home + "/.ssh/config")) return home + "/.ssh/config";
  return "";
}

OpenSshConfig ParseOpenSshConfig(const std::string& output) {
  OpenSshConfig out;
  std::istringstream lines(output);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string key, value;
    if (!(words >> key)) continue;
    for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::getline(words >> std::ws, value);
    while (!value.empty() && (value.back() == '\r' || value.back() == ' ')) value.pop_back();
    out[key].push_back(value);
  }
  return out;
}

Result<OpenSshConfig> OpenSshConfigFor(const std::string& config_file, const std::string& host) {
  const std::string command = ShellJoin({"ssh", "-G", "-F", config_file, "--", host}) +
                              " </dev/null 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return Status::Error("cannot run " + command);
  std::string output;
  char buffer[4096];
  for (size_t n; (n = fread(buffer, 1, sizeof buffer, pipe)) > 0;) output.append(buffer, n);
  const int status = pclose(pipe);
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Status::Error("OpenSSH's `ssh -G` cannot read " + config_file + " for " + host + ": " +
                         output.substr(0, 500));
  }
  return ParseOpenSshConfig(output);
}

Result<ConfigHost> LookUpConfigHost(const SessionOptions& options) {
  ConfigHost out;
  out.config_file = ConfigFileFor(options);
  out.host_name = options.host;
  if (out.config_file.empty()) return out;
  if (!FileExists(out.config_file)) {
    return Status::Error(options.host + ": ssh config file " + out.config_file + " does not exist");
  }
  std::unique_ptr<ssh_session_struct, void (*)(ssh_session)> session(ssh_new(), ssh_free);
  if (!session) return Status::Error(options.host + ": cannot create an ssh session");
  if (ssh_options_set(session.get(), SSH_OPTIONS_HOST, options.host.c_str()) != SSH_OK ||
      ssh_options_parse_config(session.get(), out.config_file.c_str()) != SSH_OK) {
    return Status::Error(options.host + ": cannot read ssh config file " + out.config_file + ": " +
                         ssh_get_error(session.get()));
  }
  if (std::string name = GetString(session.get(), SSH_OPTIONS_HOST); !name.empty()) {
    out.host_name = name;
  }
  const std::string proxy = GetString(session.get(), SSH_OPTIONS_PROXYCOMMAND);
  if (auto hops = ProxyJumpHops(proxy)) {
    out.jump_hops = *hops;
  } else {
    out.proxy_command = !proxy.empty();
  }
  if (out.host_name != options.host) {
    // An alias: OpenSSH's matching (OpenSshConfigFor) where it can be had.
    if (auto g = OpenSshConfigFor(out.config_file, options.host); g.ok()) {
      ApplyOpenSshConfig(*g, &out);
    }
  }
  return out;
}

}  // namespace barge::ssh
