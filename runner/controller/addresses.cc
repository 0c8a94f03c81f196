// addresses: the internal address of every host named by a name (an ssh
// config alias, a DNS name), settled from its connection right after
// connect, so that no node is ever told an alias only the controller's ssh
// config knows.
#include <map>
#include <string>
#include <vector>

#include "runner/controller/connections.h"
#include "runner/controller/job_state.h"
#include "runner/remote/host_address.h"

namespace barge::runner::internal {

Status Connections::SettleAddresses(const std::vector<size_t>& which) {
  struct Settling {
    HostState* host = nullptr;
    std::string address;
    std::string how;  // for the message: how the address was found
  };
  std::map<size_t, Settling> settling;  // by host index
  for (size_t h : which) {
    auto it = hosts_.by_index.find(h);
    if (it == hosts_.by_index.end() || !it->second->exec) continue;
    if (!AddressSettledAtRunTime(planner_.facts().hosts[h])) continue;
    Settling s;
    s.host = it->second.get();
    s.address = s.host->exec->reached_address();
    if (!s.address.empty()) s.how = "the address its SSH connection reached";
    settling[h] = s;
  }
  if (settling.empty()) return Status::Ok();

  // Every command's callback captures this frame: the group drops them if
  // the wait ends early.
  CommandGroup group(&ctx_.loop, &ctx_.redact);
  std::map<size_t, std::string> failed;  // by host index: why
  const auto deadline = [&] { return Now() + ctx_.spec.ssh.connect_timeout + seconds(10); };
  auto wait = [&] {
    bool done = RunUntil([&] { return group.idle() || ctx_.interrupts > 0; }, deadline());
    group.Cancel();
    return done && ctx_.interrupts == 0;
  };

  // 1. Through jump hosts or a ProxyCommand there is no socket of our own
  // to the host: it says where it was reached ($SSH_CONNECTION).
  for (auto& [h, s] : settling) {
    if (!s.address.empty()) continue;
    Settling* slot = &s;
    const size_t index = h;
    group.Run(*s.host->exec, AddressProbeCommand(""), [&, slot, index](const Outcome& o) {
      AddressProbe probe = ParseAddressProbe(o.out);
      if (o.ok() && !probe.reached_at.empty()) {
        slot->address = probe.reached_at;
        slot->how = "the address it was reached at through its jump host ($SSH_CONNECTION on it)";
      } else {
        failed[index] = "cannot tell this host's address (it is reached through a jump host or "
                        "ProxyCommand, and $SSH_CONNECTION on it says " +
                        (o.ok() ? "nothing usable" : o.Reason()) +
                        "); set internal_address for it";
      }
    });
  }
  if (!wait()) return Status::Error("interrupted while settling the hosts' addresses");

  // The usable (not loopback) internal address of host `h`, settled or
  // given; empty if it has none yet.
  auto usable = [&](size_t h) -> std::string {
    std::string a;
    if (auto s = settling.find(h); s != settling.end()) {
      a = s->second.address;
    } else if (auto r = planner_.facts().reached_addresses.find(h); r != planner_.facts().reached_addresses.end()) {
      a = r->second;
    } else if (!planner_.facts().hosts[h].is_local()) {
      a = cluster::InternalAddress(planner_.facts().hosts[h]);
    }
    return IsIpAddress(a) && !IsLoopbackAddress(a) ? a : "";
  };
  const size_t head = plan_.nodes.empty() ? 0 : plan_.nodes[0].host_index;

  // 2. A loopback address serves no other host: the host's own address
  // toward the head (the head's: toward the first other host).
  for (auto& [h, s] : settling) {
    if (failed.count(h) || !IsLoopbackAddress(s.address)) continue;
    std::string toward = h != head ? usable(head) : "";
    for (size_t other : plan_.used_hosts) {
      if (!toward.empty()) break;
      if (other != h) toward = usable(other);
    }
    if (toward.empty()) continue;  // every host is on this one's loopback
    Settling* slot = &s;
    const size_t index = h;
    group.Run(*s.host->exec, AddressProbeCommand(toward), [&, slot, index, toward](const Outcome& o) {
      AddressProbe probe = ParseAddressProbe(o.out);
      if (!probe.route_source.empty() && !IsLoopbackAddress(probe.route_source)) {
        slot->how = "its source address toward " + toward + " (`ip route get` on it; it was reached at " +
                    slot->address + ", a loopback address)";
        slot->address = probe.route_source;
      } else {
        failed[index] = "it was reached at " + slot->address +
                        ", a loopback address the other hosts cannot use, and `ip route get " +
                        toward + "` on it did not say its address toward them (" +
                        Trim(o.out.empty() ? o.Reason() : o.out) + "); set internal_address for it";
      }
    });
  }
  if (!wait()) return Status::Error("interrupted while settling the hosts' addresses");

  std::string said;
  int shown = 0;
  for (auto& [h, s] : settling) {
    if (failed.count(h)) continue;
    planner_.Reached(h, s.address);
    s.host->inventory.internal_address = s.address;
    if (shown++ < 8) said += std::string(said.empty() ? "" : "; ") + s.host->name + " is " + s.address + " (" + s.how + ")";
  }
  if (shown > 8) said += "; and " + std::to_string(shown - 8) + " more";
  if (!said.empty()) Say("internal address: " + said);
  if (failed.empty()) return Status::Ok();
  std::string msg = "cannot settle the internal address of:";
  for (const auto& [h, why] : failed) {
    hosts_.connect_errors[h] = why;
    msg += "\n  " + hosts_.by_index[h]->name + ": " + why;
  }
  return Status::Error(msg);
}

}  // namespace barge::runner::internal
