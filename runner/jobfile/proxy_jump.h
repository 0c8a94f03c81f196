// `ssh.proxy_jump` (and a host's `proxy_jump`): the jump hosts a job's SSH
// connections go through, written as OpenSSH's ProxyJump / `ssh -J` is:
// "[user@]host[:port],..." (an IPv6 host in brackets: "[fe80::1]:2200").
// Set in the job file, it replaces the ssh config's ProxyJump for those
// hosts, as `ssh -J` does, and is used exactly like one
// (ssh::SessionOptions::proxy_jump, ssh/jump_tunnel.h).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace barge::runner {

// One SSH destination written "[user@]host[:port]" (an IPv6 host in
// brackets: "[fe80::1]:2200"): a jump host, the Slurm login host.
struct SshTarget {
  std::optional<std::string> user;
  std::string host;
  std::optional<int> port;
};
// Fails, naming it as `what` ("jump host 'x'"), for a bad user, host
// (CheckHostAddress; "local" is refused) or port (1-65535), or an unclosed '['.
[[nodiscard]] Result<SshTarget> ParseSshTarget(std::string_view text, std::string_view what);

// At most this many hops.
inline constexpr size_t kMaxJumpHops = 8;

// The hops of `list`, first first, each as written ("alice@bastion:2222").
// Fails, naming the hop, for an empty list or hop, a bad user, host
// (runner/jobfile/job_values.h CheckHostAddress; "local" is refused) or port
// (1-65535), an unclosed '[', or more than kMaxJumpHops hops.
[[nodiscard]] Result<std::vector<std::string>> ParseProxyJump(std::string_view list);

}  // namespace barge::runner
