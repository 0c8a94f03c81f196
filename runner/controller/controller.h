// The Controller: runs one job from its plan to its exit code. Internal to
// runner/ (the public entry points are runner/controller/entry_points.h). Its member
// functions live in files named after the phase they run:
//   controller.cc  the flow of one job (Run, Execute, an attempt) and the
//                  plumbing every phase uses (RunUntil, Say, Record)
//   connect.cc     connect.        addresses.cc  internal addresses of aliases
//   preflight.cc   preflight (+ preflight.h)
//   login.cc       registry login/logout.        push.cc  image push
//   upload.cc      secrets, workdir, files.      stages.cc  launch stages:
//                  start nodes, readiness gates, log streams, exit watches
//   faults.cc      faults, monitors, restarts, spare hosts
//   artifacts.cc   artifact copies.              leases.cc  watchdog leases
//   teardown.cc    stop, remove, teardown hooks. verbs.cc  down/reap/exec/attach
//   mpi.cc         an MPI job's preflight checks and its keys and files
//
// Shape: every remote command belongs to a CommandGroup. A phase that waits
// for its commands keeps its group on its stack frame; what lives as long
// as an attempt (log streams, exit watches, monitors, artifact copies) is in
// attempt_, what lives as long as the job (lease renewals) in job_. Every
// per-host phase reports to the JobObserver (the status line, the store's
// phase spans, the event stream). The transport comes from a HostConnector
// and the loop from the caller, so that unit tests drive the controller
// with fake hosts (fake_hosts.h) and several controllers may share a loop.
//
// Threading: the loop's thread only.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "cluster/plan.h"
#include "container/docker_api.h"
#include "container/log_line.h"
#include "runner/controller/entry_points.h"
#include "runner/remote/command_group.h"
#include "runner/controller/host_connector.h"
#include "runner/controller/job_observer.h"
#include "runner/controller/store_observer.h"
#include "runner/remote/docker_commands.h"
#include "runner/remote/engine_stream.h"
#include "runner/remote/hosts_view.h"
#include "runner/remote/holds_api.h"
#include "runner/remote/reservation.h"
#include "runner/jobfile/job_spec.h"
#include "runner/store/job_store.h"
#include "runner/logs/log_sink.h"
#include "runner/jobfile/redact.h"
#include "runner/remote/watchdog.h"
#include "runner/controller/forwards.h"
#include "runner/controller/job_state.h"
#include "ssh/event_loop.h"
#include "ssh/executor.h"
#include "ssh/keygen.h"

namespace barge::runner::internal {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;


// What messages and log prefixes call a host: its address.
std::string HostName(const cluster::Host& h);

// `s` without trailing newlines, carriage returns and spaces, and without
// leading spaces.
std::string Trim(std::string s);

class Controller {
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
  // skipped per stream of the engine's whole log (engine_api.cc's gap
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
  // --- controller.cc: the flow and the plumbing.
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
    final_detail_ = redact_(message);
    return code;
  }
  // Store writes never fail the job: a failed write is a warning.
  void Record(const Status& s) {
    if (!s.ok()) Say("warning: job store: " + s.message());
  }
  // A job event: into the store and to the observer.
  void Event(const char* kind, const std::optional<std::string>& host, const std::string& detail);
  // A job status change (the store writes its event): to the observer too.
  void SetStatus(JobStatus status, const std::string& detail = "");
  void RecordNode(const NodeState& node);
  void RecordHost(const HostState& host, std::optional<int> replaces = std::nullopt);
  // A host's part in a phase began / ended: to the observer.
  void Began(const HostPhase& p);
  void Ended(const HostPhase& p, bool ok, const std::string& detail = "");
  // The controller machine's executor (local tar for the workdir and the
  // artifacts, docker save, teardown.local_command), made on first use.
  ssh::Executor& Local();
  // Makes the plan (and opens the store when `with_store`); false after
  // printing why not.
  bool Prepare(bool with_store);
  // The loop's clock (ssh/event_loop.h): every deadline, timer and
  // duration of the controller is on it, so that a test's virtual loop
  // runs the controller's timeouts and backoffs without waiting for them.
  Clock::time_point Now() const { return loop_.Now(); }
  // Polls the loop until `finished()` or `deadline`. Returns false on deadline.
  bool RunUntil(const std::function<bool()>& finished, Clock::time_point deadline);
  // Runs the loop until `group` is idle or `stop()` is true: true then. A
  // step over many hosts takes as long as it takes while its commands keep
  // ending; it gives up (false) only once none of them has ended for
  // `quiet` (a slow host is not a dead one; a dead one is found by its
  // session's liveness and fails its commands).
  bool RunWhileProgressing(const CommandGroup& group, Clock::duration quiet,
                           const std::function<bool()>& stop = [] { return false; });
  // `line` on a host, killed after `limit` (closing a channel does not end a
  // remote command; a frozen dockerd would hang it forever).
  static std::string Bounded(const std::string& line, std::chrono::milliseconds limit);
  std::vector<HostState*> AllHosts();
  // Hosts whose session is open.
  std::vector<HostState*> ConnectedHosts();

  // --- connect.cc
  // Connects to the hosts of `which` (host indices of the plan), each with a
  // new HostState in hosts_ (a previous one is kept in retired_) and a new
  // host id.
  Status Connect(const std::vector<size_t>& which);
  Status Connect() { return Connect(plan_.used_hosts); }
  // For the verbs on one node (exec): the rank checked, its host alone
  // connected; nullptr after saying why not.
  HostState* ConnectToNode(int rank);
  // A NodeState per node of the plan, in nodes_; the log sink's view of them.
  std::vector<LogSink::Node> MakeNodeStates();

  // --- addresses.cc
  // Settles the internal address (what other nodes are told) of every
  // connected host of `which` that is named by a name and has no
  // internal_address (runner/remote/host_address.h), into
  // input_.reached_addresses and the host's inventory entry:
  //  1. the address its connection reached (the peer of the session's TCP
  //     socket); through jump hosts or a ProxyCommand, where there is no such
  //     socket, the address the host says it was reached at (the server side
  //     of $SSH_CONNECTION, asked with one short command);
  //  2. if that is a loopback address (no other host can use it) and the job
  //     has another host with a usable address, the host's source address
  //     toward it (`ip route get`: toward the head, or for the head toward
  //     the first other host), asked with one more command.
  // Says on stderr which address each such host got and how. A host whose
  // address cannot be settled gets its reason in connect_errors_; the
  // result is then an error naming those hosts.
  Status SettleAddresses(const std::vector<size_t>& which);

  // --- preflight.cc
  // Engine, images, GPUs, rendezvous port, disk, shell and the watchdog on
  // `targets`, in one round of commands per host.
  Status Preflight(const std::vector<HostState*>& targets);

  // --- runner/controller/holds.cc: reservations on the hosts.
  // What the job holds on `hs` (fleet::RequestFor its nodes there).
  fleet::HoldRequest HoldRequestFor(const HostState& hs) const;
  // The shell that takes them (preflight runs it in its script).
  std::string TakeHoldsLine(const HostState& hs) const;
  // Reads the host's answer into hs.hold; a problem for preflight's table
  // when the engine failed (a busy host is not a problem: SecureHolds).
  std::string NoteHolds(HostState& hs, const std::string& text, int exit);
  std::string NoteHolds(HostState& hs, fleet::HoldReply reply, bool failed);
  // The same holds taken through the host's Engine API `api`
  // (runner/remote/holds_api.h), `now` being the host's clock.
  fleet::ApiHoldJob ApiHoldJobFor(HostState& hs, container::DockerApi* api, long long now) const;
  // The hosts whose holds conflict with the job's, by name.
  std::vector<fleet::BusyHost> BusyHosts();
  // After preflight: Ok when every host is the job's; otherwise releases
  // every hold the job got and fails with the busy table, or waits (--wait,
  // `wait:`), trying every host again after a random 1-3 s, until all are
  // free or the limit passes.
  Status SecureHolds();
  // The same for one host that preflight took holds on while the job runs
  // (a spare, a lost host checked again): Ok when it is the job's (its GPU
  // slices adopted); otherwise releases the job's holds there and fails
  // naming the holder.
  Status SecureHoldsOn(HostState& hs);
  // The job's nodes on `hs` get the GPU devices the job holds there.
  Status AdoptHeldGpus(HostState& hs);
  // Removes the job's holds wherever it may hold one: every current host
  // and every retired one (replaced by a spare) that is still reachable.
  void ReleaseHolds();
  void ReleaseHoldsOn(const std::vector<HostState*>& hosts);

  // --- login.cc
  // registry: `docker login --password-stdin` on every connected target (the
  // password written to the command's stdin), into the job's own client
  // config (DockerConfigDir), which every later docker command of the job
  // on that host uses. Runs right after Connect, before Preflight checks or
  // pulls images. Fails, naming each host and the registry's reason, when a
  // login fails.
  Status Login(const std::vector<HostState*>& targets);
  // `docker logout` on every reachable host where a login was tried, and the
  // client config removed. A lost host's watchdog removes it with the job's
  // directory.
  void Logout();

  // --- push.cc
  // image_pull: push. Streams the local `docker save IMAGE` into `docker
  // load` on every target host in parallel, then records each host's image
  // ID; failures go to `errors` by host.
  void Push(const std::string& image, const std::vector<HostState*>& targets,
            std::map<size_t, std::vector<std::string>>* errors);

  // --- upload.cc
  // Streams a local file into `command(host)`'s stdin on every target, in
  // parallel with bounded memory; the outcome per host (missing when
  // interrupted or timed out).
  std::map<HostState*, Outcome> StreamFile(const std::string& file,
                                           const std::vector<HostState*>& targets,
                                           const std::function<std::string(HostState&)>& command,
                                           Phase phase, const std::string& label);
  // secrets:, workdir: and files: into every host's job directory (after
  // the watchdog made it, before any container starts).
  Status Upload(const std::vector<HostState*>& targets);
  // secrets: each value written from memory to the command's stdin, into
  // DIR/secrets/NAME (mode 0600), plus the env file of those given as
  // environment; in parallel on every target.
  Status ShipSecrets(const std::vector<HostState*>& targets);
  // Writes each host's files (path on the host, content) through a
  // command's stdin into 0600 files, never on a command line; one upload
  // step named "writing " + what, and one error listing every host's.
  Status WriteFiles(
      const std::map<HostState*, std::vector<std::pair<std::string, const std::string*>>>& writes,
      const std::string& what);

  // --- mpi.cc
  // mpi: on `targets`, every worker's image has /usr/sbin/sshd and every
  // worker's sshd port is free; the problems in preflight's table. Records
  // the uid each node's image runs as (mpi_image_uids_), which ShipMpiFiles
  // reads, and refuses a port below 1024 for a non-root worker.
  Status MpiPreflight(const std::vector<HostState*>& targets);
  // mpi: the job's keys (made on first use) and each node's files into
  // MpiFilesDir/RANK on the node's host, from the command's stdin (mode
  // 0600), in parallel on every target. Called by Upload.
  Status ShipMpiFiles(const std::vector<HostState*>& targets);
  // mpi: each directory in `dirs` (a node whose image runs as a non-root
  // uid) made 0755 and its files 0644; their parent stays 0700.
  Status ShareMpiFiles(const std::map<HostState*, std::vector<std::string>>& dirs);

  // --- stages.cc
  // Runs plan_.stages in order: each stage's nodes started in parallel, then
  // its gate awaited on each of them. Stops early (Ok) when an interrupt or
  // a fault ends the attempt, or the head has already ended.
  Status RunStages();
  Status StartNodes(const std::vector<NodeState*>& nodes, const std::string& step);
  // Waits until `gate` holds for `node` (bounded by the gate's timeout).
  Status AwaitGate(NodeState& node, const cluster::ReadinessProbe& gate);
  // Streams the node's logs into the sink; with `report_exit`, the same
  // command then reports how the container ended, and NodeEnded runs.
  void StreamLogs(NodeState& node, bool report_exit);
  // StreamLogs' halves: the node's line splitters, into the sink; the
  // CLI's log stream (where the host has no Engine API).
  void OpenLogLines(NodeState& node, bool report_exit);
  void StreamLogsWithCli(NodeState& node, bool report_exit);
  // Once a follow has ended on a container that has stopped: reads its logs
  // from node.last_ns on without -f, feeding lines the follow missed to the
  // sink, then runs `then` (also when the read fails: the container may be
  // gone).
  void CatchUp(NodeState& node, std::function<void()> then);
  // The rest of a log stream's end: reports how the container ended
  // (report_exit), or that the stream was lost.
  void LogsEnded(NodeState& node, bool report_exit, const ssh::ExitStatus& st);
  // The container of `node` ended (o: inspect's output, or why not known).
  void NodeEnded(NodeState& node, const Outcome& o);
  // The same once the node's host is known to have answered: `state` is how
  // the engine says the container ended, or why that is not known.
  void NodeExited(NodeState& node, const Result<container::ContainerState>& state);

  // --- engine_api.cc: the per-node log follow and exit report through the
  // Engine API (HostState::api), with the CLI's semantics: follow, then
  // inspect (wait and inspect again while it still runs), then the
  // catch-up read, then NodeExited.
  void FollowWithApi(NodeState& node, bool report_exit);
  // The start on an API host, once `docker create` made the node's
  // container: attach, then start once attached, in `group`; `started`
  // gets the start's outcome. The attach is then the node's live log.
  void AttachAndStartWithApi(CommandGroup& group, NodeState& node, CommandGroup::Done started);
  // The attach stream ended: the exit report when the container's stdio
  // closed, a gap fill from the engine's log when the stream broke off.
  void AttachEndedWithApi(NodeState& node, const container::Reply<container::NoContent>& r);
  // Its steps: inspect (`waited`: a wait has run), the end (catch-up, then
  // the report), and a lost transport (what a lost CLI stream says).
  void InspectWithApi(NodeState& node, bool waited);
  void EndWithApi(NodeState& node, bool report_exit, const Result<container::ContainerState>& state);
  void LostWithApi(NodeState& node, bool report_exit, const std::string& why);
  void CatchUpWithApi(NodeState& node, std::optional<int64_t> from, std::function<void()> then);
  // Every node's API call goes (an attempt's end, the controller's).
  void DropApiCalls();
  // Teardown's `docker stop -t GRACE NAMES` through the API: one call per
  // container in `group`; `done` once all have answered (the first
  // failure, or success).
  void StopWithApi(CommandGroup& group, HostState& hs, const std::vector<std::string>& names,
                   int grace_seconds, CommandGroup::Done done);
  // Teardown's removal through the API: every name or ID in `names` goes
  // (one already gone is fine); when one would not and `sweep`, everything
  // labelled with the job goes by a listing instead; then `then_line` (a
  // shell command line, e.g. the watchdog's disarming) runs when not
  // empty. `done` gets the removal's outcome, its exit unknown when
  // `then_line` could not run.
  void RemoveWithApi(CommandGroup& group, HostState& hs, const std::vector<std::string>& names, bool sweep,
                     const std::string& then_line, CommandGroup::Done done);

  // --- faults.cc
  // Faults. The first one of an attempt ends it (fault_); later ones are
  // only recorded. Nothing is a fault once teardown has begun.
  using Cause = RestartCause;  // named in kRestartCauseNames (job_spec.h)
  struct Fault {
    Cause cause;
    std::string host;
    std::string detail;
    int exit_code = 0;  // kNodeFailed: the node's code
    int rank = -1;      // kNodeFailed: which node
  };
  void NoteFault(Fault fault);
  // The job store's event name (event::kHostLost, ...) of a cause.
  static const char* CauseName(Cause cause);
  void OnHostLost(HostState& host, const std::string& why);
  void OnPreempted(HostState& host, const std::string& notice);
  bool Restartable(const Fault& f) const;
  // Periodic checks while an attempt runs: an engine probe per host (a
  // frozen dockerd), the preemption command per host. `generation_` stops
  // the previous attempt's.
  void StartMonitors();
  // Removes every container labelled with the job on `host` (leftovers).
  std::string RemoveJobContainersLine(HostState& host) const;
  // At a restart: a spare host in place of every host marked `replace`, or
  // the same host checked again (reconnected, preflighted, leftovers of the
  // job removed, no preemption notice). Fails when a host has neither.
  Status ReplaceHosts();

  // --- artifacts.cc
  // Copies `a` out of node `n`'s container (docker cp NAME:PATH -, a tar
  // stream on the host's session) into runs/<id>/artifacts/<rank>/, unpacked
  // by a local tar, with both commands in `group`. `done` runs when it has
  // finished (not if the group is cancelled first).
  void CopyArtifact(CommandGroup& group, NodeState& n, const ArtifactSpec& a,
                    std::function<void()> done);
  std::vector<NodeState*> ArtifactNodes(const ArtifactSpec& a);
  void ScheduleArtifacts();
  // Copies every artifact of every node once more and waits (bounded).
  void FinalArtifacts();

  // --- leases.cc
  // Watchdog timing (watchdog.h): renewal period and the head-exit grace.
  seconds RenewEvery() const {
    auto lease = std::chrono::duration_cast<seconds>(spec_.lease);
    return std::clamp<seconds>(lease / 4, seconds(1), seconds(30));
  }
  // The watchdog of `host` (armed by Preflight).
  WatchdogParams WatchdogFor(const HostState& host) const;
  void RenewLeases();
  // One renewal of `host`'s leases: the watchdog's file, and the job's
  // lease on the engine when its holds listed one.
  void RenewLeaseOn(HostState& host);
  void DisarmWatchdogs();

  // --- window.cc
  // Binds every local port of `forwards` (forward_ holds them); fails on a
  // rank the plan lacks or a busy port, naming the entry.
  Status BindForwards(const std::vector<ForwardSpec>& forwards, const std::string& what);
  // Serves every bound forward over its node's host session, in `group`
  // (the container's address is asked for where the network is not the
  // host's); prints "forwarding http://127.0.0.1:L -> rank R port P" as each
  // starts. `on_fatal` runs when one cannot go on.
  void ServeForwards(CommandGroup& group, std::function<void(const Status&)> on_fatal);

  // --- teardown.cc
  // Stops and removes the attempt's containers on every reachable host,
  // with a last copy of the artifacts. `final`: the job is over, so the
  // teardown hooks run too.
  void Teardown(bool graceful, bool final = true);
  void RunTeardownHooks();

  // barge's own messages, on stderr, around the status line; secret values
  // are masked.
  void Say(const std::string& message) { observer_.Message("barge: " + redact_(message)); }

  const JobSpec& spec_;
  const Redactor redact_{spec_};  // what Say, Fail and the store never show
  cluster::PlanInput input_;
  ControllerOptions options_;
  ssh::EventLoop& loop_;
  HostConnector& connector_;
  ObserverList observer_;  // options' observer, then the store's
  std::unique_ptr<StoreObserver> store_observer_;
  Timers timers_{&loop_};
  CommandGroup job_{&loop_, &redact_};      // lease renewals, disarming
  CommandGroup attempt_{&loop_, &redact_};  // streams, exit watches, monitors, artifacts
  cluster::Plan plan_;
  std::map<size_t, std::unique_ptr<HostState>> hosts_;  // by host index
  int next_host_id_ = 1;
  std::vector<std::unique_ptr<NodeState>> nodes_;       // by rank
  std::unique_ptr<LogSink> sink_;
  int interrupts_ = 0;
  bool tearing_down_ = false;  // exits from now on are barge's doing
  std::list<std::regex> gate_regexes_;  // of this attempt's log gates
  std::optional<Fault> fault_;  // what ended the current attempt
  int restart_count_ = 0;
  size_t next_spare_ = 0;       // spec_.spare_hosts taken so far
  int generation_ = 0;          // of the current attempt's monitors
  std::vector<std::shared_ptr<std::function<void()>>> monitors_;  // their ticks
  // Why Connect could not reach a host, by host index (for preflight's table).
  std::map<size_t, std::string> connect_errors_;
  // Replaced hosts, earlier attempts' plans, nodes and sinks: what a
  // retired attempt's state pointed at stays valid for the job's life.
  std::vector<std::unique_ptr<HostState>> retired_;
  std::list<cluster::Plan> old_plans_;
  std::vector<std::unique_ptr<NodeState>> old_nodes_;
  std::vector<std::unique_ptr<LogSink>> old_sinks_;
  std::unique_ptr<JobStore> store_;
  std::string final_detail_;
  const Clock::time_point started_ = loop_.Now();
  bool renewing_ = false;
  std::unique_ptr<ssh::Executor> local_;  // see Local()
  std::set<std::pair<int, size_t>> copying_;  // (rank, artifact index) in flight
  bool timed_out_ = false;
  std::unique_ptr<MpiKeys> mpi_keys_;  // mpi: see ShipMpiFiles
  std::map<std::string, int> mpi_image_uids_;  // mpi: image → uid of its USER (MpiPreflight)
  // forward: (window.cc). Last: destroyed before the hosts it serves through.
  std::unique_ptr<window::JobForwards> forwards_;
};

}  // namespace barge::runner::internal
