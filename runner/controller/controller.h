// The Controller: runs one job from its plan to its exit code, phase by
// phase, each phase a part with its own state (job_context.h's JobPart)
// that gets in its constructor the job's context and exactly the rest it
// reads or changes (the host set, the attempt, the plan, the facts the plan
// is made from) and the parts it calls:
//   controller.cc    the flow of one job (Run, Execute, an attempt: Launch)
//   connections.h    Connections: connect, internal addresses (addresses.cc)
//   registry_login.h RegistryLogin: registry login and logout
//   preflight.h      Preflight: one round of checks per host, image push
//   holds.h          Holds: reservations on the hosts (taken by preflight)
//   leases.h         Leases: the watchdog's lease renewals and disarming
//   transfers.h      Transfers: files streamed or written to many hosts
//   uploads.h        Uploads: secrets, workdir, files (mpi.h: MPI's files)
//   stages.h         Stages: the launch stages and their readiness gates
//   node_streams.h   NodeStreams: log streams and exit reports (CLI, API:
//                    node_streams_api.cc)
//   faults.h         Faults: faults, restart policy, monitors
//   spares.cc        at a restart, spare hosts in replaced hosts' places
//   artifacts.h      Artifacts: artifact copies
//   teardown.h       Teardown: stop, remove, teardown hooks
//   verbs.cc, window.cc, hosts_verb.cc: the verbs on a job's hosts
// (down, reap, exec, attach, forward, top, hosts).
//
// Shape: every remote command belongs to a CommandGroup. A phase that waits
// for its commands keeps its group on its stack frame; what lives as long
// as an attempt (log streams, exit watches, monitors, artifact copies) is in
// the attempt's commands (attempt.h), what lives as long as the job (lease
// renewals) in the context's job_commands.
// Every per-host phase reports to the JobObserver (the status line, the
// store's phase spans, the event stream). The transport comes from a
// HostConnector and the loop from the caller, so that unit tests drive the
// controller with fake hosts (tests/support/fake_hosts.h) and several
// controllers may share a loop.
//
// Threading: the loop's thread only.
#pragma once

#include <functional>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cluster/plan.h"
#include "runner/controller/artifacts.h"
#include "runner/controller/attempt.h"
#include "runner/controller/connections.h"
#include "runner/controller/entry_points.h"
#include "runner/controller/faults.h"
#include "runner/controller/forwards.h"
#include "runner/controller/holds.h"
#include "runner/controller/host_connector.h"
#include "runner/controller/host_set.h"
#include "runner/controller/job_context.h"
#include "runner/controller/job_observer.h"
#include "runner/controller/job_state.h"
#include "runner/controller/leases.h"
#include "runner/controller/mpi.h"
#include "runner/controller/node_streams.h"
#include "runner/controller/preflight.h"
#include "runner/controller/registry_login.h"
#include "runner/controller/stages.h"
#include "runner/controller/teardown.h"
#include "runner/controller/transfers.h"
#include "runner/controller/uploads.h"
#include "runner/jobfile/job_spec.h"
#include "runner/remote/hosts_view.h"
#include "ssh/event_loop.h"

namespace barge::runner::internal {

// What a Controller owns and gives its parts, made before them: the job's
// context, the facts its plan is made from and the current plan, its hosts
// and its attempt.
struct JobOwner {
  JobOwner(const JobSpec& spec, const cluster::PlanInput& input, const ControllerOptions& options,
           ssh::EventLoop* loop, HostConnector* connector)
      : job_context_(spec, input.job_id, options, loop, connector),
        input_(input),
        attempt_(loop, &job_context_.redact) {}
  JobContext job_context_;
  cluster::PlanInput input_;
  cluster::Plan plan_;
  // Earlier attempts' plans: what their nodes pointed at stays valid.
  std::list<cluster::Plan> old_plans_;
  HostSet hosts_;
  Attempt attempt_;
};

class Controller : private JobOwner, private JobPart {
 public:
  // `loop`, `connector` and `observer` are not owned and must outlive the
  // controller.
  Controller(const JobSpec& spec, const cluster::PlanInput& input, const ControllerOptions& options,
             ssh::EventLoop* loop, HostConnector* connector, JobObserver* observer);
  ~Controller();

  int Run();
  // An interrupt (SIGINT, SIGTERM, SIGHUP, or a test): the first stops the
  // job gracefully, the second kills it. From the loop's thread.
  void Interrupt(int signo, bool announce = true);
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
  // runner/controller/hosts_verb.cc: `barge hosts`, every host's holds and
  // running barge containers, added to `views` (named with `label` after
  // each host when not empty).
  int ListHosts(const std::string& label, std::vector<fleet::HostView>* views);

 private:
  // The job after its record exists: everything from connect to teardown.
  int Execute();
  // One launch of the job (an attempt) on the current hosts: plans again
  // (with the restart count), runs the launch stages, and runs until the
  // head exits, a fault, an interrupt or the timeout. Returns a failure
  // only when the launch itself failed.
  Status Launch();
  // Prints `message`, keeps it for the job's final record, returns `code`.
  int Fail(const std::string& message, int code) {
    Say(message);
    final_detail_ = ctx_.redact(message);
    return code;
  }
  // While the head runs: asks ControllerOptions::outside_check every
  // outside_every, until it answers (outside_end_) or the job ends.
  void WatchOutside();
  // Makes the plan (and opens the store when `with_store`); false after
  // printing why not.
  bool Prepare(bool with_store);
  // A NodeState per node of the plan, in attempt_.nodes; the log sink's view of them.
  std::vector<LogSink::Node> MakeNodeStates();
  // For the verbs on one node (exec): the rank checked, its host alone
  // connected; nullptr after saying why not.
  HostState* ConnectToNode(int rank);
  // spares.cc: the GPU health gate after preflight (gpu_gate.h); a host it
  // puts out is replaced by the next spare host that passes preflight and
  // the gate (the output says why). Fails with the gate's table when a host
  // is out and no spare is left.
  Status GateGpus();
  // spares.cc: the next spare host that connects and passes preflight, in
  // host `h`'s place (its nodes, role and line); false when none is left.
  // `after` runs on it once preflighted (holds, uploads at a restart).
  bool PlaceSpare(size_t h, const std::string& why, const std::function<Status(HostState&)>& after);
  // spares.cc: `old` (when reachable) is left for a spare: its watchdog
  // disarmed and/or the job's holds there released, neither waited for.
  void LeaveHost(HostState* old, bool disarm, bool release);
  // spares.cc: at a restart, a spare host in place of every host marked
  // `replace`, or the same host checked again (reconnected, preflighted,
  // leftovers of the job removed, no preemption notice). Fails when a
  // host has neither.
  Status ReplaceHosts();
  // window.cc: binds every local port of `forwards` (forwards_ holds them);
  // fails on a rank the plan lacks or a busy port, naming the entry.
  Status BindForwards(const std::vector<ForwardSpec>& forwards, const std::string& what);
  // Serves every bound forward over its node's host session, in `group`
  // (the container's address is asked for where the network is not the
  // host's); prints "forwarding http://127.0.0.1:L -> rank R port P" as each
  // starts. `on_fatal` runs when one cannot go on.
  void ServeForwards(CommandGroup& group, std::function<void(const Status&)> on_fatal);

  // The parts, each given what it reads and changes and the parts it calls.
  Faults faults_{&job_context_, &hosts_, &attempt_, &plan_};
  Connections connections_{&job_context_, &hosts_, &plan_, &input_, &faults_};
  RegistryLogin login_{&job_context_, &hosts_, &plan_};
  Holds holds_{&job_context_, &hosts_, &plan_, &input_};
  Leases leases_{&job_context_, &hosts_, &plan_, &holds_};
  Transfers transfers_{&job_context_};
  GpuGate gpu_gate_{&job_context_, &plan_, &input_, &holds_};
  Preflight preflight_{&job_context_, &hosts_, &plan_, &input_, &holds_, &leases_, &transfers_, &gpu_gate_};
  Mpi mpi_{&job_context_, &hosts_, &plan_, &input_, &transfers_};
  Uploads uploads_{&job_context_, &plan_, &transfers_, &mpi_};
  NodeStreams streams_{&job_context_, &attempt_, &faults_};
  Stages stages_{&job_context_, &attempt_, &plan_, &faults_, &streams_};
  Artifacts artifacts_{&job_context_, &attempt_, &plan_};
  Teardown teardown_{&job_context_, &hosts_, &attempt_, &plan_, &artifacts_};

  std::string final_detail_;
  const Clock::time_point started_ = ctx_.loop.Now();
  bool timed_out_ = false;
  // ControllerOptions::outside_check's answer, once it ended the job.
  std::optional<ControllerOptions::OutsideEnd> outside_end_;
  size_t next_spare_ = 0;  // ctx_.spec.spare_hosts taken so far
  // forward: (window.cc). Last: destroyed before the hosts it serves through.
  std::unique_ptr<window::JobForwards> forwards_;
};

}  // namespace barge::runner::internal
