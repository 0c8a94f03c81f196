// The hosts a job runs on, as the job file (or its hosts_file) lists them.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "container/container_spec.h"

namespace barge::cluster {

// The address that means "the local Docker engine, no SSH".
inline constexpr const char* kLocalAddress = "local";

struct Host {
  std::string address;           // SSH address or ~/.ssh/config alias; or "local"
  std::string internal_address;  // what other nodes use to reach it; default = address
  std::optional<std::string> user;
  std::optional<int> port;
  std::optional<std::string> identity_file;  // "~" already expanded
  // Jump hosts for this host, first first ("[user@]host[:port]"); nullopt =
  // the job's ssh.proxy_jump.
  std::optional<std::vector<std::string>> proxy_jump;
  std::optional<int> gpus;                   // GPUs on this host, if known
  int nodes = 1;                             // containers of this job on this host
  std::optional<std::string> docker_command;  // e.g. "sudo -n docker"
  std::optional<std::string> role;            // "head" marks the head's host
  container::ContainerOptions container;      // per-host overrides
  std::map<std::string, std::string> vars;    // free-form values for hooks
  int line = 0;                               // 1-based line in the job file

  bool is_local() const { return address == kLocalAddress; }
};

}  // namespace barge::cluster
