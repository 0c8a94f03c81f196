// The address other nodes are told for a host named by a name (an ssh config
// alias, a DNS name): when it needs settling, the command that asks the host
// itself, and how its answer is read. The rule, in full, is in the README
// ("Hosts") and Controller::SettleAddresses (runner/controller/addresses.cc).
#pragma once

#include <map>
#include <string>

#include "cluster/inventory.h"
#include "cluster/plan.h"
#include "runner/jobfile/job_spec.h"

namespace barge::runner {

// A numeric IPv4 or IPv6 address (no brackets, no port).
bool IsIpAddress(const std::string& address);
// 127.0.0.0/8, ::1, or an IPv4-mapped loopback: an address no other host can
// use to reach this one.
bool IsLoopbackAddress(const std::string& address);

// A host whose internal address is settled at run time: remote, no
// internal_address in the inventory, and an address that is not an IP
// address (so an ssh config alias or a DNS name).
bool AddressSettledAtRunTime(const cluster::Host& host);

// The POSIX sh line that asks a host for its own address: prints
// "ssh $SSH_CONNECTION" (sshd's "client_addr client_port server_addr
// server_port": server_addr is the address the connection reached the host
// at), and with `route_to` not empty (a numeric address) also the output of
// `ip -o route get ROUTE_TO` (its "src" is the host's address toward it).
std::string AddressProbeCommand(const std::string& route_to);

// The POSIX sh line that lists a host's IPv4 interfaces: `ip -o -4 addr
// show` where there is `ip`, then "@route" and /proc/net/route (which every
// Linux host has: some, like a cloud GPU image, have no `ip`).
std::string InterfacesCommand();
// The interface that carries `address` (an IPv4 address of the host) in
// InterfacesCommand's output: the one `ip` lists it on, else the one of
// the most specific route whose network holds it; "" when neither tells.
std::string InterfaceOf(const std::string& output, const std::string& address);

// What AddressProbeCommand's output says; empty fields where it says nothing
// usable (no $SSH_CONNECTION, no `ip`, no route).
struct AddressProbe {
  std::string reached_at;    // server_addr of $SSH_CONNECTION
  std::string route_source;  // the "src" of `ip route get`
};
AddressProbe ParseAddressProbe(const std::string& output);

// For `barge plan`, which never connects: each used host whose address is
// settled at run time gets its ssh config HostName (read as the connection
// would read it: ssh.config_file, else ~/.ssh/config) in
// input->reached_addresses, so that the plan's env shows it instead of the
// alias. Returns, by host index, the note the plan prints for it: where the
// address came from, and that `barge run` settles it from the connection.
// A config file that cannot be read leaves that host as it is, with the
// reason in its note.
std::map<size_t, std::string> AddressesFromSshConfig(const JobSpec& spec,
                                                     cluster::PlanInput* input);

}  // namespace barge::runner
