#include "runner/remote/host_address.h"

#include <arpa/inet.h>

#include <sstream>
#include <vector>

#include "ssh/config_host.h"
#include "ssh/quote.h"

namespace barge::runner {

bool IsIpAddress(const std::string& address) {
  unsigned char buffer[sizeof(struct in6_addr)];
  return inet_pton(AF_INET, address.c_str(), buffer) == 1 ||
         inet_pton(AF_INET6, address.c_str(), buffer) == 1;
}

bool IsLoopbackAddress(const std::string& address) {
  unsigned char v4[4];
  if (inet_pton(AF_INET, address.c_str(), v4) == 1) return v4[0] == 127;
  struct in6_addr v6;
  if (inet_pton(AF_INET6, address.c_str(), &v6) != 1) return false;
  if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
  return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
}

bool AddressSettledAtRunTime(const cluster::Host& host) {
  return !host.is_local() && host.internal_address.empty() && !IsIpAddress(host.address);
}

std::string AddressProbeCommand(const std::string& route_to) {
  // printf, not echo: the value is the host's, not ours.
  std::string line = "printf 'ssh %s\\n' \"$SSH_CONNECTION\"";
  if (!route_to.empty()) {
    // `ip` lives in /usr/sbin or /sbin on some systems, off a user's PATH.
    line += "; PATH=\"$PATH:/usr/sbin:/sbin\" ip -o route get " + ssh::ShellQuote(route_to) +
            " 2>&1";
  }
  return line;
}

AddressProbe ParseAddressProbe(const std::string& output) {
  AddressProbe probe;
  std::istringstream lines(output);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string word; words >> word;) w.push_back(word);
    if (w.size() == 5 && w[0] == "ssh" && probe.reached_at.empty() && IsIpAddress(w[3])) {
      probe.reached_at = w[3];
      continue;
    }
    for (size_t i = 0; i + 1 < w.size(); ++i) {
      if (w[i] == "src" && IsIpAddress(w[i + 1]) && probe.route_source.empty()) {
        probe.route_source = w[i + 1];
      }
    }
  }
  return probe;
}

std::map<size_t, std::string> AddressesFromSshConfig(const JobSpec& spec,
                                                     cluster::PlanInput* input) {
  std::map<size_t, std::string> notes;
  for (size_t h = 0; h < input->hosts.size(); ++h) {
    const cluster::Host& host = input->hosts[h];
    if (!AddressSettledAtRunTime(host)) continue;
    ssh::SessionOptions options;
    options.host = host.address;
    options.config_file = spec.ssh.config_file;
    Result<ssh::ConfigHost> found = ssh::LookUpConfigHost(options);
    if (!found.ok()) {
      notes[h] = "internal address: settled at run time from the connection (" +
                 found.status().message() + ")";
      continue;
    }
    const std::string how =
        !found->jump_hops.empty() || found->proxy_command
            ? "the address the host says it was reached at through " +
                  (found->proxy_command ? std::string("its ProxyCommand")
                                        : "ProxyJump " + found->jump_hops.front()) +
                  " ($SSH_CONNECTION on it)"
            : "the address its SSH connection reaches";
    if (found->host_name == host.address) {
      notes[h] = "internal address: settled at run time: " + how + " (" +
                 (found->config_file.empty() ? std::string("no ssh config")
                                             : "no HostName for it in " + found->config_file) +
                 "; the plan shows the name)";
      continue;
    }
    input->reached_addresses[h] = found->host_name;
    notes[h] = "internal address: " + found->host_name + ", the HostName of ssh config alias " +
               host.address + " in " + found->config_file + "; settled at run time: " + how;
  }
  return notes;
}

}  // namespace barge::runner
