#include "ssh/config_host.h"

#include <sys/stat.h>

#include <memory>

#include <libssh/libssh.h>

#include "base/user_home.h"
#include "ssh/jump_tunnel.h"

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

std::string ConfigFileFor(const SessionOptions& options) {
  if (!options.config_file.empty()) return options.config_file;
  const std::string home = UserHome();
  if (!home.empty() && FileExists(home + "/.ssh/config")) return home + "/.ssh/config";
  return "";
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
  return out;
}

}  // namespace barge::ssh
