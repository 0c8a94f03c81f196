// How to reach and authenticate one SSH host.
#pragma once

#include <array>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "base/enum_names.h"

namespace barge::ssh {

enum class HostKeyChecking {
  kStrict,     // unknown or changed host key: refuse (the default)
  kAcceptNew,  // unknown key: record it in known_hosts; changed key: refuse
  kOff,        // accept anything; callers print a warning on every run
};
// As the job file's ssh.host_key_checking spells them.
inline constexpr auto kHostKeyCheckingNames = std::to_array<EnumName<HostKeyChecking>>(
    {{HostKeyChecking::kStrict, "strict"}, {HostKeyChecking::kAcceptNew, "accept-new"},
     {HostKeyChecking::kOff, "off"}});
static_assert(ListsEveryValueInOrder(kHostKeyCheckingNames));

// Options set here take precedence over ~/.ssh/config, as `ssh -o` does.
// Unset optionals fall back to ~/.ssh/config, then to libssh's defaults.
struct SessionOptions {
  std::string host;  // address or ~/.ssh/config Host alias
  std::optional<int> port;
  std::optional<std::string> user;
  std::optional<std::string> identity_file;  // "~" already expanded
  // known_hosts file to verify against (and to append to with kAcceptNew).
  // Empty = ~/.ssh/known_hosts.
  std::string known_hosts_file;
  // ssh config file to read. Empty = ~/.ssh/config (if present).
  std::string config_file;
  HostKeyChecking host_key_checking = HostKeyChecking::kStrict;
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(10)};
  // Jump hosts, first first, each "[user@]host[:port]" (IPv6 in brackets).
  // Non-empty: replaces the ssh config's ProxyJump (and ProxyCommand) for
  // this host, as `ssh -J` does; the connection goes through them exactly
  // as through a config's ProxyJump (ssh/jump_tunnel.h).
  std::vector<std::string> proxy_jump;
};

}  // namespace barge::ssh
