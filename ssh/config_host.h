// What the ssh config file says about a host, read without connecting
// (for `barge plan`, which never connects).
#pragma once

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

}  // namespace barge::ssh
