// Holds: the controller's side of the reservations on the hosts
// (runner/remote/reservation.h). Preflight takes every host's holds in its
// one round trip; SecureHolds then decides: all taken, or release
// everything and fail with the busy table, or (--wait, `wait:`) release
// everything and try again until every host is free or the limit passes.
// The job's holds go at its final teardown (with its containers) or at its
// end (ReleaseHolds), and with its watchdog when the lease lapses.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "container/docker_api.h"
#include "runner/controller/host_set.h"
#include "runner/controller/job_context.h"
#include "runner/controller/planner.h"
#include "runner/remote/holds_api.h"
#include "runner/remote/reservation.h"

namespace barge::runner::internal {

// A host's part in the reservations: what it answered to the job's last
// try at its holds, and whether the job may hold something there now.
struct HostHolds {
  std::optional<HoldReply> reply;
  bool holding = false;
  // Its ticket (its place in the host's line) is on the host's engine:
  // placed by JoinQueue, gone with RemoveTickets or ReleaseHolds.
  bool in_line = false;
  // Its place in line (the second it began to wait, by its hosts' clocks:
  // PlaceInLine), once JoinQueue put its ticket on the host: a
  // ticket put back keeps it.
  std::optional<long long> ticket_since;
};

class Holds : private JobPart {
 public:
  // GPUs other jobs hold are facts for `planner` (not owned).
  Holds(JobContext* ctx, HostSet* hosts, Planner* planner) : JobPart(ctx), hosts_(*hosts), planner_(*planner) {}

  // The shell that takes the job's holds on `hs` (preflight runs it in its
  // script). `ticket_since`: the job is waiting since then (its lease is
  // kept on the host between tries, its ticket is there, and it takes no
  // hold where an earlier job's ticket stands: reservation.h's "Queue").
  std::string TakeHoldsLine(const HostState& hs,
                            std::optional<long long> ticket_since = std::nullopt) const;
  // Takes the job's holds on `hosts` again (its GPU holds go first; its
  // lease stays): after GpuGate took GPUs out, so that no hold is on one.
  // Fails when a host did not answer or its engine failed; whether the
  // host is the job's is SecureHolds' to decide.
  Status TakeAgain(const std::vector<HostState*>& hosts);
  // Reads the host's answer into hs.hold; a problem for preflight's table
  // when the engine failed (a busy host is not a problem: SecureHolds).
  std::string NoteHolds(HostState& hs, const std::string& text, int exit);
  std::string NoteHolds(HostState& hs, HoldReply reply, bool failed);
  // The same holds taken through the host's Engine API `api`
  // (runner/remote/holds_api.h), `now` being the host's clock.
  ApiHoldJob ApiHoldJobFor(HostState& hs, container::DockerApi* api, long long now) const;
  // After preflight: Ok when every host is the job's; otherwise releases
  // every hold the job got and fails with the busy table, or waits (--wait,
  // `wait:`), trying every host again after a random 1-3 s, until all are
  // free or the limit passes. A waiting job's tickets are on every host
  // before it says (and its record shows) that it waits.
  Status SecureHolds();
  // The same for one host that preflight took holds on while the job runs
  // (a spare, a lost host checked again): Ok when it is the job's (its GPU
  // slices adopted); otherwise releases the job's holds there and fails
  // naming the holder.
  Status SecureHoldsOn(HostState& hs);
  // Removes the job's holds wherever it may hold one: every current host
  // and every retired one (replaced by a spare) that is still reachable.
  void ReleaseHolds();
  // The shell that puts back on `hs` the job's lease and what else of its
  // place there the engine lost (its holds, by name: the GPUs it holds, no
  // new choice; or its ticket while it waits), when they were removed
  // behind its back (`docker container prune`). What is still there is
  // kept. Prints what TakeHoldsScript prints (ParseHoldReply).
  std::string PutBackLine(const HostState& hs) const;
  // Reads a put back's answer into hs.holds (its listing: the new lease's
  // ID for the next renewal); the other jobs' holds that now stand on what
  // the job held there (taken while its lease was gone), none when it has
  // it all back.
  std::vector<Hold> NotePutBack(HostState& hs, const std::string& text);

 private:
  HostSet& hosts_;
  Planner& planner_;  // the facts and the current plan
  const cluster::Plan& plan_ = planner_.plan();
  // What the job holds on `hs` (RequestFor its nodes there), never
  // on a GPU the health gate took out.
  HoldRequest HoldRequestFor(const HostState& hs) const;
  // What a put back asks on `hs`: HoldRequestFor, but a GPU count asks for
  // the very GPUs the job held there (its last listing), not a new choice.
  HoldRequest PutBackRequest(const HostState& hs) const;
  // Runs `script(hs)` (a hold taking) on every host of `hosts` at once and
  // notes each answer (NoteHolds); the problems by host.
  std::map<HostState*, std::string> RunTakes(const std::vector<HostState*>& hosts,
                                             const std::function<std::string(HostState&)>& script);
  // The hosts whose holds conflict with the job's, by name.
  std::vector<BusyHost> BusyHosts();
  // The job's nodes on `hs` get the GPU devices the job holds there.
  Status AdoptHeldGpus(HostState& hs);
  void ReleaseHoldsOn(const std::vector<HostState*>& hosts);
  // Before a waiting job says it waits and between its tries: its ticket
  // (place `ticket_since`) is made on every host that lacks it, and only
  // then do its holds go (its lease and ticket stay), host by host.
  void JoinQueue(long long ticket_since);
  // The waiting is over (the job has its holds): its tickets go.
  void RemoveTickets();
};

}  // namespace barge::runner::internal
