// What the ssh config file says about a host, read without connecting
// (for `barge plan`, which never connects).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "ssh/session_options.h"

namespace barge::ssh {

// The ssh config file Session::Connect reads for `options`:
// options.config_file, else HOME/.ssh/config if it exists (HOME = UserHome(),
// base/user_home.h), else none ("").
std::string ConfigFileFor(const SessionOptions& options);

struct ConfigHost {
  std::string config_file;  // the file read; "" = none
  std::string host_name;    // its HostName, else options.host
  std::vector<std::string> jump_hops;  // its ProxyJump hops, first first
  bool proxy_command = false;          // a ProxyCommand of its own
};

// Reads ConfigFileFor(options) for options.host as libssh does at connect
// (Include, Host and Match blocks), without connecting. Fails, naming the
// file, when the file cannot be read.
[[nodiscard]] Result<ConfigHost> LookUpConfigHost(const SessionOptions& options);

// OpenSSH's own reading of `config_file` for `host`: `ssh -G -F CONFIG
// HOST` (OpenSSH's client on PATH; nothing is connected, but the config's
// Match exec commands run), as lowercase keyword → its values, in order
// ("identityfile" may have several). Needed because libssh 0.10 matches the
// Host blocks that follow a HostName line against that new name instead of
// the alias, so a shared "Host gpu-*" block with User or IdentityFile after
// "Host gpu-1 / HostName 10.1.2.3" does not apply to gpu-1 there while it
// does in OpenSSH. Fails when `ssh` is not on PATH or refuses the config.
using OpenSshConfig = std::map<std::string, std::vector<std::string>>;
[[nodiscard]] Result<OpenSshConfig> OpenSshConfigFor(const std::string& config_file,
                                                     const std::string& host);
// The values of `output` as `ssh -G` prints them ("keyword value..." lines).
OpenSshConfig ParseOpenSshConfig(const std::string& output);
// `host` as OpenSSH's reading `g` has it: its hostname, and its proxyjump
// hops or proxycommand (replacing libssh's).
void ApplyOpenSshConfig(const OpenSshConfig& g, ConfigHost* host);

}  // namespace barge::ssh
