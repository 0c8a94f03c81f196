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
//   diagnostics.h    Diagnostics: a failed attempt's bundle, before teardown
//   forwarding.h     Forwarding: `forward:` served while the job runs
//   progress_watch.h ProgressWatch: a hang (`progress:`) while it runs
//   keep.h           Keep: a failed job kept for a look (`on_failure:`)
//   gpu_watch.h      GpuWatch: GPU health and utilisation while it runs
//   slurm_allocation.h SlurmAllocation: a slurm: job's allocation, first,
//                    its nodes the hosts; watched while the job runs,
//                    released at the end
// The verbs on a recorded job's hosts (down, reap, exec, attach, forward,
// top, hosts) are host_verbs.h's, apart from the Controller.
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
#include "runner/controller/forwarding.h"
#include "runner/controller/connections.h"
#include "runner/controller/diagnostics.h"
#include "runner/controller/entry_points.h"
#include "runner/controller/faults.h"
#include "runner/controller/forwards.h"
#include "runner/controller/gpu_watch.h"
#include "runner/controller/holds.h"
#include "runner/controller/host_connector.h"
#include "runner/controller/host_records.h"
#include "runner/controller/host_set.h"
#include "runner/controller/job_context.h"
#include "runner/controller/job_owner.h"
#include "runner/controller/job_observer.h"
#include "runner/controller/job_state.h"
#include "runner/controller/keep.h"
#include "runner/controller/leases.h"
#include "runner/controller/mpi.h"
#include "runner/controller/node_streams.h"
#include "runner/controller/preflight.h"
#include "runner/controller/progress_watch.h"
#include "runner/controller/registry_login.h"
#include "runner/controller/slurm_allocation.h"
#include "runner/controller/stages.h"
#include "runner/controller/teardown.h"
#include "runner/controller/transfers.h"
#include "runner/controller/uploads.h"
#include "runner/controller/webhook_observer.h"
#include "runner/jobfile/job_spec.h"
#include "ssh/event_loop.h"

namespace barge::runner::internal {

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
  void Interrupt(int signo);

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
  // The job's end by `fault`, not restarted: the message (why not
  // restarted) and the exit code (the head's own, 123 for a hang, else 125).
  int FailForFault(const Fault& fault);
  // A slurm: job, before anything connects: the job waits for its
  // allocation (SlurmAllocation::Allocate); its nodes become the hosts in
  // the plan's facts and the plan is made again. 0 once granted, else the
  // job's exit code (after Fail).
  int AllocateSlurm();
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

  // The parts, each given what it reads and changes and the parts it calls.
  Faults faults_{&job_context_, &hosts_, &attempt_, &plan_};
  Connections connections_{&job_context_, &hosts_, &planner_, &faults_};
  RegistryLogin login_{&job_context_, &hosts_, &plan_};
  Holds holds_{&job_context_, &hosts_, &planner_};
  Leases leases_{&job_context_, &hosts_, &plan_, &holds_};
  Transfers transfers_{&job_context_};
  GpuGate gpu_gate_{&job_context_, &planner_, &holds_};
  HostRecords records_{&job_context_, &hosts_};  // the hosts' failure records: read, judged, written
  Preflight preflight_{&job_context_, &hosts_, &planner_, &holds_, &leases_, &transfers_, &gpu_gate_};
  Mpi mpi_{&job_context_, &hosts_, &planner_, &transfers_};
  Uploads uploads_{&job_context_, &plan_, &transfers_, &mpi_};
  ProgressWatch progress_{&job_context_, &attempt_, &faults_};
  GpuWatch gpu_watch_{&job_context_, &hosts_, &attempt_, &planner_, &holds_, &faults_};
  NodeStreams streams_{&job_context_, &attempt_, &faults_, &progress_};
  Stages stages_{&job_context_, &attempt_, &plan_, &faults_, &streams_};
  Artifacts artifacts_{&job_context_, &attempt_, &plan_};
  Teardown teardown_{&job_context_, &hosts_, &attempt_, &plan_, &artifacts_};
  Diagnostics diagnostics_{&job_context_, &attempt_};  // a failed attempt's, before its teardown
  Keep keep_{&job_context_, &attempt_, &leases_};

  std::string final_detail_;
  const Clock::time_point started_ = ctx_.loop.Now();
  bool timed_out_ = false;
  // A slurm: job's allocation (null for others), and with transport srun
  // the connector to its nodes (ctx_.connector once granted).
  std::unique_ptr<SlurmAllocation> slurm_;
  std::unique_ptr<HostConnector> slurm_steps_;
  // Why the job was ended from outside its hosts (its Slurm allocation
  // ended under it: SlurmAllocation::Watch).
  std::optional<OutsideEnd> outside_end_;
  // notify: the job's events to its webhooks (null without notify:).
  std::unique_ptr<WebhookObserver> webhooks_;
  size_t next_spare_ = 0;  // ctx_.spec.spare_hosts taken so far
  // forward: served while an attempt runs. Last: destroyed before the hosts
  // it serves through.
  Forwarding forwarding_{&job_context_, &hosts_, &plan_};
};

}  // namespace barge::runner::internal
