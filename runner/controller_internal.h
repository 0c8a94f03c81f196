// Internal to runner/: the Controller's pieces; include only from
// runner/controller*.cc. Nothing here is exported by controller.h. The
// Controller class (its member functions are defined by concept across
// controller.cc, controller_faults.cc, controller_transfer.cc,
// controller_artifacts.cc, controller_watchdog.cc and controller_verbs.cc),
// the per-host and per-node state it drives, and the few free helpers that
// several of those files use.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
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

#include <unistd.h>

#include "base/status.h"
#include "cluster/plan.h"
#include "container/log_line.h"
#include "runner/controller.h"
#include "runner/docker_commands.h"
#include "runner/job_spec.h"
#include "ssh/local_executor.h"
#include "runner/job_store.h"
#include "runner/log_sink.h"
#include "runner/progress.h"
#include "runner/redact.h"
#include "runner/watchdog.h"
#include "ssh/event_loop.h"
#include "ssh/executor.h"

namespace barge::runner::internal {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

// What messages and log prefixes call a host: its address.
std::string HostName(const cluster::Host& h);

// What a finished command produced.
struct Outcome {
  ssh::ExitStatus exit;
  std::string out;
  std::string err;
  // Masks secret values in Reason() (set by Controller::Exec); not owned.
  const Redactor* redact = nullptr;

  bool ok() const { return exit.known() && exit.code == 0; }
  // The most useful one-line reason for a failure.
  std::string Reason() const {
    if (!exit.known()) return redact ? (*redact)(exit.error) : exit.error;
    std::string text = err.empty() ? out : err;
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    if (text.empty()) return "exit code " + std::to_string(exit.code);
    return redact ? (*redact)(text) : text;
  }
};

// `s` without trailing newlines, carriage returns and spaces, and without
// leading spaces.
std::string Trim(std::string s);

struct HostState {
  size_t index = 0;
  std::string name;  // as in messages and log prefixes
  cluster::Host inventory;  // its entry (a spare's, once it took a lost host's place)
  // A spare took its place: the job's teardown hooks still run for it.
  bool superseded = false;
  std::unique_ptr<ssh::Executor> exec;
  std::unique_ptr<DockerCommands> docker;
  std::map<std::string, std::string> image_ids;  // image reference → ID
  bool watchdog_armed = false;
  // registry: a login was tried, so the job's Docker client config there
  // may hold the credential until Logout.
  bool login_tried = false;
  // The session died, or the engine stopped answering: nothing more is
  // sent there, and teardown does not wait on it.
  bool lost = false;
  // Lost or preempted: at a restart a spare takes its place (or it is
  // checked again before it is reused).
  bool replace = false;
  bool probing = false;     // an engine probe is in flight
  bool polling = false;     // a preemption check is in flight
  // Commands in flight or finished; reaped by the loop, never from callbacks.
  std::vector<std::unique_ptr<ssh::Command>> commands;
};

// kLost: its host was lost while it ran; how it ended is unknown.
enum class NodePhase { kPending, kStarting, kRunning, kExited, kLost };

struct NodeState {
  const cluster::NodePlan* plan = nullptr;
  HostState* host = nullptr;
  NodePhase phase = NodePhase::kPending;
  bool run_attempted = false;  // a container may exist on the host
  std::string container_id;
  std::optional<int> exit_code;
  std::string end_reason;  // "exit code 3", "OOMKilled (exit code 137)", ...
  // Of an attempt that has ended (a restart made new nodes): callbacks
  // still in flight for it do nothing.
  bool retired = false;
  bool logs_open = false;
  // attach: lines stamped at or before this were already kept; drop them.
  std::optional<int64_t> skip_through_ns;
  std::unique_ptr<container::LineSplitter> out_lines;
  std::unique_ptr<container::LineSplitter> err_lines;
};

class Controller {
 public:
  Controller(const JobSpec& spec, const cluster::PlanInput& input, const ControllerOptions& options)
      : spec_(spec), input_(input), options_(options),
        progress_(std::make_unique<Progress>(stderr, isatty(fileno(stderr)) != 0)) {}

  int Run();
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
  int AttachOrphan(const std::map<int, int64_t>& kept_through_ns);

 private:
  // The job after its record exists: everything from connect to teardown.
  int Execute();
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
  void RecordNode(const NodeState& node);
  // local_, its executor made on first use (local tar for the workdir and
  // the artifacts).
  HostState& Local() {
    if (!local_.exec) {
      local_.name = "local";
      local_.exec = std::make_unique<ssh::LocalExecutor>(&loop_);
    }
    return local_;
  }
  // Makes the plan (and opens the store when `with_store`); false after
  // printing why not.
  bool Prepare(bool with_store);
  // Watchdog timing (watchdog.h): renewal period and the head-exit grace.
  seconds RenewEvery() const {
    auto lease = std::chrono::duration_cast<seconds>(spec_.lease);
    return std::clamp<seconds>(lease / 4, seconds(1), seconds(30));
  }
  // Artifacts: copies `a` out of node `n`'s container (docker cp NAME:PATH -,
  // a tar stream on the host's session) into runs/<id>/artifacts/<rank>/,
  // unpacked by a local tar. `done` runs when it has finished.
  void CopyArtifact(NodeState& n, const ArtifactSpec& a, std::function<void()> done);
  std::vector<NodeState*> ArtifactNodes(const ArtifactSpec& a);
  void ScheduleArtifacts();
  // Copies every artifact of every node once more and waits (bounded).
  void FinalArtifacts();
  // The watchdog of `host` (armed by Preflight).
  WatchdogParams WatchdogFor(const HostState& host) const;
  void RenewLeases();
  void DisarmWatchdogs();
  // Starts `line` on `host`; `done` runs from the loop once it has exited.
  // Returns the command (owned by `host`, valid until reaped after it is
  // done) for writing its stdin; nullptr when it could not start. Stdin is
  // closed at once unless `keep_stdin`.
  ssh::Command* Exec(HostState& host, const std::string& line,
                     std::function<void(const Outcome&)> done, bool keep_stdin = false);
  // Polls the loop until `finished()` or `deadline`. Returns false on deadline.
  bool RunUntil(const std::function<bool()>& finished, Clock::time_point deadline);
  void ReapCommands();
  static void ReapCommandsOf(HostState& host);

  // Connects to the hosts of `which` (host indices of the plan), each with a
  // new HostState in hosts_ (a previous one is kept in retired_).
  Status Connect(const std::vector<size_t>& which);
  Status Connect() { return Connect(plan_.used_hosts); }
  // Engine, images, GPUs, rendezvous port and the watchdog on `targets`.
  Status Preflight(const std::vector<HostState*>& targets);
  std::vector<HostState*> AllHosts();
  // Hosts whose session is open.
  std::vector<HostState*> ConnectedHosts();
  // Why Connect could not reach a host, by host index (for preflight's table).
  std::map<size_t, std::string> connect_errors_;
  // One launch of the job (an attempt) on the current hosts: plans again
  // (with the restart count), starts the head, waits for it, starts the
  // workers, and runs until the head exits, a fault, an interrupt or the
  // timeout. Returns a failure only when the launch itself failed.
  Status Launch();
  // At a restart: a spare host in place of every host marked `replace`, or
  // the same host checked again (reconnected, preflighted, leftovers of the
  // job removed, no preemption notice). Fails when a host has neither.
  Status ReplaceHosts();
  // Faults. The first one of an attempt ends it (fault_); later ones are
  // only recorded. Nothing is a fault once teardown has begun.
  enum class Cause { kHostLost, kNodeFailed, kPreempted };
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
  // `line` on a host, killed after `limit` (closing a channel does not end a
  // remote command; a frozen dockerd would hang it forever).
  static std::string Bounded(const std::string& line, std::chrono::milliseconds limit);
  // Removes every container labelled with the job on `host` (leftovers).
  std::string RemoveJobContainersLine(HostState& host) const;
  Status StartNodes(const std::vector<NodeState*>& nodes);
  Status WaitReady(NodeState& head);
  // image_pull: push. Streams the local `docker save IMAGE` into `docker
  // load` on every target host in parallel, then records each host's image
  // ID; failures go to `errors` by host.
  void Push(const std::string& image, const std::vector<HostState*>& targets,
            std::map<size_t, std::vector<std::string>>* errors);
  // Streams a local file into `command(host)`'s stdin on every target, in
  // parallel with bounded memory; the outcome per host (missing when
  // interrupted or timed out).
  std::map<HostState*, Outcome> StreamFile(const std::string& file,
                                           const std::vector<HostState*>& targets,
                                           const std::function<std::string(HostState&)>& command,
                                           const std::string& phase);
  // secrets:, workdir: and files: into every host's job directory (after
  // the watchdog made it, before any container starts).
  Status Upload(const std::vector<HostState*>& targets);
  // secrets: each value written from memory to the command's stdin, into
  // DIR/secrets/NAME (mode 0600), plus the env file of those given as
  // environment; in parallel on every target.
  Status ShipSecrets(const std::vector<HostState*>& targets);
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
  void RunTeardownHooks();
  void StreamLogs(NodeState& node);
  // The head's readiness regex (roles.head.ready.log) finds a match in `text`.
  bool ReadyLineMatches(std::string_view text) const;
  void WatchExit(NodeState& node);
  // Stops and removes the attempt's containers on every reachable host,
  // with a last copy of the artifacts. `final`: the job is over, so the
  // teardown hooks run too.
  void Teardown(bool graceful, bool final = true);

  // barge's own messages, on stderr, around the status line; secret values
  // are masked.
  void Say(const std::string& message) { progress_->Print("barge: " + redact_(message)); }

  const JobSpec& spec_;
  const Redactor redact_{spec_};  // what Say, Fail and the store never show
  cluster::PlanInput input_;
  ControllerOptions options_;
  std::unique_ptr<Progress> progress_;
  cluster::Plan plan_;
  ssh::EventLoop loop_;
  std::map<size_t, std::unique_ptr<HostState>> hosts_;  // by host index
  std::vector<std::unique_ptr<NodeState>> nodes_;       // by rank
  std::unique_ptr<LogSink> sink_;
  int interrupts_ = 0;
  bool tearing_down_ = false;  // exits from now on are barge's doing
  std::optional<std::regex> ready_regex_;  // head readiness by log line
  bool head_logged_ready_ = false;
  std::optional<Fault> fault_;  // what ended the current attempt
  int restart_count_ = 0;
  size_t next_spare_ = 0;       // spec_.spare_hosts taken so far
  int generation_ = 0;          // of the current attempt's monitors
  // Replaced hosts, earlier attempts' plans, nodes and sinks: kept alive for
  // callbacks still in flight (a frozen engine's docker wait).
  std::vector<std::unique_ptr<HostState>> retired_;
  std::list<cluster::Plan> old_plans_;
  std::vector<std::shared_ptr<std::function<void()>>> monitors_;
  std::vector<std::unique_ptr<NodeState>> old_nodes_;
  std::vector<std::unique_ptr<LogSink>> old_sinks_;
  std::unique_ptr<JobStore> store_;
  std::string final_detail_;
  const Clock::time_point started_ = Clock::now();
  bool renewing_ = false;
  std::function<void()> renew_tick_;  // renews every lease, then re-arms itself
  HostState local_;                    // this machine: local tar (see Local())
  std::vector<std::shared_ptr<std::function<void()>>> artifact_ticks_;
  std::set<std::pair<int, size_t>> copying_;  // (rank, artifact index) in flight
  bool timed_out_ = false;
};


}  // namespace barge::runner::internal
