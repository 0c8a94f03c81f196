// Connections: one executor per host through the HostConnector, in
// parallel, each host with a new HostState and a new host id, and the
// internal address of every host named by a name (addresses.cc).
#pragma once

#include <vector>

#include "runner/controller/faults.h"
#include "runner/controller/host_set.h"
#include "runner/controller/job_context.h"
#include "runner/controller/planner.h"

namespace barge::runner::internal {

class Connections : private JobPart {
 public:
  // A lost connection is a fault (`faults`, not owned).
  // The hosts' facts it learns (reached addresses, job directories) go to
  // `planner` (not owned).
  Connections(JobContext* ctx, HostSet* hosts, Planner* planner, Faults* faults)
      : JobPart(ctx), hosts_(*hosts), planner_(*planner), faults_(*faults) {}

  // Connects to the hosts of `which` (host indices of the plan), each with a
  // new HostState in the host set (a previous one is kept in its retired)
  // and a new host id. Why a host could not be reached is in
  // the host set's connect_errors too.
  Status Connect(const std::vector<size_t>& which);
  Status Connect() { return Connect(plan_.used_hosts); }

 private:
  HostSet& hosts_;
  Planner& planner_;
  const cluster::Plan& plan_ = planner_.plan();  // the current plan
  // addresses.cc: settles the internal address (what other nodes are told)
  // of every connected host of `which` that is named by a name and has no
  // internal_address (runner/remote/host_address.h), into
  // the planner (Planner::Reached) and the host's inventory entry:
  //  1. the address its connection reached (the peer of the session's TCP
  //     socket); through jump hosts or a ProxyCommand, where there is no such
  //     socket, the address the host says it was reached at (the server side
  //     of $SSH_CONNECTION, asked with one short command);
  //  2. if that is a loopback address (no other host can use it) and the job
  //     has another host with a usable address, the host's source address
  //     toward it (`ip route get`: toward the head, or for the head toward
  //     the first other host), asked with one more command.
  // Says on stderr which address each such host got and how. A host whose
  // address cannot be settled gets its reason in hosts_.connect_errors; the
  // result is then an error naming those hosts.
  Status SettleAddresses(const std::vector<size_t>& which);

  Faults& faults_;
  int next_host_id_ = 1;
};

}  // namespace barge::runner::internal
