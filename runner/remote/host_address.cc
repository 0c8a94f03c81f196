#include "runner/remote/host_address.h"

#include <arpa/inet.h>

#include <cstdint>
#include <cstdlib>
#include <optional>
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

std::string InterfacesCommand() {
  return "PATH=\"$PATH:/usr/sbin:/sbin\" ip -o -4 addr show 2>/dev/null; echo @route; cat /proc/net/route 2>/dev/null";
}

namespace {

// 10.77.0.2 as a host-order number; nullopt when not dotted IPv4.
std::optional<uint32_t> Ipv4(const std::string& a) {
  in_addr in{};
  if (inet_pton(AF_INET, a.c_str(), &in) != 1) return std::nullopt;
  return ntohl(in.s_addr);
}

// /proc/net/route's hex fields: the address's bytes (network order) read
// as a little-endian number, as every host barge runs on (x86-64, arm64)
// prints them; swapped back here to the address as a number.
std::optional<uint32_t> RouteHex(const std::string& hex) {
  if (hex.size() != 8) return std::nullopt;
  char* end = nullptr;
  const unsigned long v = std::strtoul(hex.c_str(), &end, 16);
  if (end == nullptr || *end != '\0') return std::nullopt;
  return __builtin_bswap32(static_cast<uint32_t>(v));
}

}  // namespace

std::string InterfaceOf(const std::string& output, const std::string& address) {
  const std::optional<uint32_t> want = Ipv4(address);
  if (!want) return "";
  std::istringstream in(output);
  std::string line;
  bool routes = false;
  std::string best;
  int best_bits = -1;
  while (std::getline(in, line)) {
    if (line == "@route") {
      routes = true;
      continue;
    }
    std::istringstream f(line);
    if (!routes) {
      // "4: eth0    inet 192.0.2.2/24 brd ... scope global eth0\ ..."
      std::string index, name, family, cidr;
      if (!(f >> index >> name >> family >> cidr) || family != "inet") continue;
      const std::string a = cidr.substr(0, cidr.find('/'));
      if (a == address) return name;
      continue;
    }
    // "eth0	000200C0	00000000	0001	0	0	0	00FFFFFF	..."
    std::string iface, dest, gateway, flags, refcnt, use, metric, mask;
    if (!(f >> iface >> dest >> gateway >> flags >> refcnt >> use >> metric >> mask) || iface == "Iface") continue;
    const std::optional<uint32_t> d = RouteHex(dest), m = RouteHex(mask);
    if (!d || !m || (*want & *m) != *d) continue;
    const int bits = __builtin_popcount(*m);
    if (bits > best_bits) {
      best_bits = bits;
      best = iface;
    }
  }
  return best;
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
