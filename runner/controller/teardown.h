// Teardown: once the attempt is over, stop what still runs (docker stop,
// or kill after a second interrupt), let the log streams drain, copy the
// artifacts a last time, remove every container of the attempt on every
// reachable host (on the last teardown with the job's holds and the
// watchdog's disarming), then (when the job is over) run the teardown
// hooks. What goes where is a TeardownPlan (teardown_plan.h), made from
// the attempt's nodes and hosts; Teardown executes it.
#pragma once

#include <string>
#include <vector>

#include "runner/controller/artifacts.h"
#include "runner/controller/attempt.h"
#include "runner/controller/host_set.h"
#include "runner/controller/job_context.h"
#include "runner/controller/teardown_plan.h"

namespace barge::runner::internal {

class Teardown : private JobPart {
 public:
  Teardown(JobContext* ctx, HostSet* hosts, Attempt* attempt, const cluster::Plan* plan, Artifacts* artifacts)
      : JobPart(ctx), hosts_(*hosts), attempt_(*attempt), plan_(*plan), artifacts_(*artifacts) {}

  // Stops and removes the attempt's containers on every reachable host,
  // with a last copy of the artifacts. `final`: the job is over, so the
  // teardown hooks run too.
  void Run(bool graceful, bool final = true);
  void RunTeardownHooks();

 private:
  HostSet& hosts_;
  Attempt& attempt_;
  const cluster::Plan& plan_;  // the current plan (the Controller makes it)
  // teardown.cc: one Run's plan, its hosts, which have stopped and which
  // are being removed, and its command groups.
  struct Execution;

  // The hosts of the attempt's nodes, each once, in the order they joined
  // the job (their ids).
  std::vector<HostState*> HostsOfTheAttempt() const;
  // The plan's facts: of the attempt's nodes (on `hosts`), of `hosts`, and
  // of the job and this teardown.
  std::vector<TeardownNode> NodeFacts(const std::vector<HostState*>& hosts) const;
  std::vector<TeardownHost> HostFacts(const std::vector<HostState*>& hosts) const;
  TeardownRules Rules(bool graceful, bool final) const;

  // Starts the plan's stops; each host's ends its kStop phase.
  void StartStops(Execution& ex);
  // Runs the loop until every node has drained and every stop has ended,
  // starting each pipelined removal as soon as its host is ready.
  void WaitForStops(Execution& ex);
  void StartReadyRemovals(Execution& ex);
  // Starts the removal on one host; the first also moves the progress
  // line from the stops to the removal.
  void StartRemoval(Execution& ex, const TeardownRemoval& removal);
  // Starts every removal not started yet, and runs the loop while they
  // keep ending.
  void RemoveTheRest(Execution& ex);
  // The node no longer runs nor streams its log (or was never started, or
  // its host is lost); AllDrained: every node of the attempt.
  static bool Drained(const NodeState* n);
  bool AllDrained() const;
  // Hosts stopped or being removed, and nodes drained: how far it has got.
  size_t Moved(const Execution& ex) const;

  // `hook` (a teardown `kind`) for `host`, run on `where`; its outcome said.
  void RunHook(CommandGroup& group, ssh::Executor& where, const std::string& kind, const std::string& hook,
               const HostState& host);

  // `docker stop -t GRACE NAMES` through the Engine API: one call per
  // container in `group`; `done` once all have answered (the first
  // failure, or success).
  void StopWithApi(CommandGroup& group, HostState& hs, const std::vector<std::string>& names,
                   int grace_seconds, CommandGroup::Done done);
  // The removal through the Engine API: every name or ID in `names` goes
  // (one already gone is fine); when one would not and `sweep`, everything
  // labelled with the job goes by a listing instead; then `then_line` (a
  // shell command line, e.g. the watchdog's disarming) runs when not
  // empty. `done` gets the removal's outcome, its exit unknown when
  // `then_line` could not run.
  void RemoveWithApi(CommandGroup& group, HostState& hs, const std::vector<std::string>& names, bool sweep,
                     const std::string& then_line, CommandGroup::Done done);

  Artifacts& artifacts_;
};

}  // namespace barge::runner::internal
