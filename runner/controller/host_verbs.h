// HostVerbs: what acts on a recorded job's hosts without running it, apart
// from the Controller that runs a job. Each verb makes the job's plan from
// its file, connects to the hosts it needs itself (its own sessions, its own
// loop: nothing here can block a running job's controller) and returns the
// verb's exit code:
//   host_verbs.cc  down of an orphaned job, reap, exec, attach to an orphan
//   window.cc      exec -i/-it, forward, top
//   hosts_verb.cc  hosts
// The entry points (entry_points.h) make one per verb.
//
// Threading: the loop's thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cluster/plan.h"
#include "runner/controller/artifacts.h"
#include "runner/controller/connections.h"
#include "runner/controller/entry_points.h"
#include "runner/controller/faults.h"
#include "runner/controller/forwarding.h"
#include "runner/controller/holds.h"
#include "runner/controller/host_connector.h"
#include "runner/controller/job_context.h"
#include "runner/controller/job_observer.h"
#include "runner/controller/job_owner.h"
#include "runner/controller/leases.h"
#include "runner/controller/node_streams.h"
#include "runner/controller/teardown.h"
#include "runner/jobfile/job_spec.h"
#include "runner/remote/hosts_view.h"
#include "ssh/event_loop.h"

namespace barge::runner::internal {

class HostVerbs : private JobOwner, private JobPart {
 public:
  // `loop`, `connector` and `observer` are not owned and must outlive the
  // verbs.
  HostVerbs(const JobSpec& spec, const cluster::PlanInput& input, const ControllerOptions& options,
            ssh::EventLoop* loop, HostConnector* connector, JobObserver* observer);
  ~HostVerbs();

  // An interrupt (SIGINT, SIGTERM, SIGHUP): the verb stops waiting.
  void Interrupt() { ++ctx_.interrupts; }

  // `barge down` of a job whose controller is gone: connects to the job's
  // hosts, removes every container labelled with the job, runs the teardown
  // hooks, and records the job as cancelled.
  int TearDownOrphan();
  // `barge reap`: on every host of the job, removes each barge-labelled
  // container whose job `is_live` says is not running; prints each.
  int Reap(const std::function<bool(const std::string&)>& is_live);
  // `barge exec`: runs `argv` in the container of node `rank` (docker exec),
  // streaming its output; returns its exit code.
  int ExecInNode(int rank, const std::vector<std::string>& argv);
  // `barge attach` to a job whose controller is gone: streams every node's
  // output from the hosts again, from the last line its log file kept
  // (`kept_through_ns` by rank; none = from the start), appending to the
  // files, until every node's stream ends or an interrupt. No line is
  // repeated: Docker's timestamps at or before the kept one are dropped.
  // The kept files' lines since `restarted_at_ns` (the job's last restart,
  // from its store; all when nullopt) are counted and exactly that many
  // skipped per stream of the engine's whole log (node_streams_api.cc's gap
  // design); `kept_through_ns` (lines stamped after it) only where a
  // node's file cannot be read.
  int AttachOrphan(const std::map<int, int64_t>& kept_through_ns,
                   std::optional<int64_t> restarted_at_ns = std::nullopt);
  // window.cc: `barge exec -i/-it`, `barge forward`, `barge top` (see
  // runner/controller/entry_points.h's entry points).
  int ExecInteractive(int rank, const std::vector<std::string>& argv, bool tty);
  int Forward(const std::vector<ForwardSpec>& forwards);
  int Top(const TopOptions& top);
  // hosts_verb.cc: `barge hosts`, every host's holds and running barge
  // containers, added to `views` (named with `label` after each host when
  // not empty).
  int ListHosts(const std::string& label, std::vector<HostView>* views);
  // The shell that forgives `hs`'s failure record (`barge hosts --forgive`).
  std::string ForgiveCommand(const HostState& hs) const;

 private:
  // The job's plan; the store opened when `with_store`. False after saying
  // why not.
  bool Prepare(bool with_store);
  // Every host of the job's file connects, not only those its plan uses.
  void UseEveryHost();
  // For the verbs on one node (exec): the rank checked, its host alone
  // connected; nullptr after saying why not.
  HostState* ConnectToNode(int rank);

  // The parts the verbs call, each given what it reads and changes.
  Faults faults_{&job_context_, &hosts_, &attempt_, &plan_};
  Connections connections_{&job_context_, &hosts_, &planner_, &faults_};
  Holds holds_{&job_context_, &hosts_, &planner_};
  Leases leases_{&job_context_, &hosts_, &plan_, &holds_};
  NodeStreams streams_{&job_context_, &attempt_, &faults_};
  Artifacts artifacts_{&job_context_, &attempt_, &plan_};
  Teardown teardown_{&job_context_, &hosts_, &attempt_, &plan_, &artifacts_};
  // Last: destroyed before the hosts it serves through.
  Forwarding forwarding_{&job_context_, &hosts_, &plan_};
};

}  // namespace barge::runner::internal
