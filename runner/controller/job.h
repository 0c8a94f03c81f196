// The state of one job that every part of the controller shares (Job), and
// the base of every part (JobPart): the job's spec, plan, hosts, nodes, log
// sink, store, loop and observers, under the names the parts use, and the
// plumbing they all need (messages, the store's records, the loop's waits).
//
// A part (a phase, like Holds or Teardown, or the Controller that runs them
// in order) keeps its own state in its own members and gets the other parts
// it calls in its constructor: what a phase reads and changes is the job's
// state here and its own, never another phase's.
//
// Threading: the loop's thread only.
#pragma once

#include <chrono>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <set>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "cluster/plan.h"
#include "runner/controller/entry_points.h"
#include "runner/controller/host_connector.h"
#include "runner/controller/job_observer.h"
#include "runner/controller/store_observer.h"
#include "runner/jobfile/job_spec.h"
#include "runner/jobfile/redact.h"
#include "runner/logs/log_sink.h"
#include "runner/remote/command_group.h"
#include "runner/store/job_store.h"
#include "ssh/event_loop.h"
#include "ssh/executor.h"

namespace barge::runner::internal {

using std::chrono::milliseconds;
using std::chrono::seconds;

struct HostState;  // job_state.h
struct NodeState;

using Clock = std::chrono::steady_clock;

// A timer set that cancels what has not run when it is destroyed: a
// controller that ends never leaves a timer behind on a shared loop.
class Timers {
 public:
  explicit Timers(ssh::EventLoop* loop) : loop_(loop) {}
  ~Timers() { CancelAll(); }
  Timers(const Timers&) = delete;
  Timers& operator=(const Timers&) = delete;
  void Add(Clock::time_point when, std::function<void()> fn);
  void CancelAll();

 private:
  ssh::EventLoop* loop_;
  std::set<ssh::EventLoop::TimerId> pending_;
};


// What messages and log prefixes call a host: its address.
std::string HostName(const cluster::Host& h);

// `s` without trailing newlines, carriage returns and spaces, and without
// leading spaces.
std::string Trim(std::string s);

// A fault: what ends an attempt (the first of it) or is only recorded.
struct Fault {
  RestartCause cause;  // named in kRestartCauseNames (job_spec.h)
  std::string host;
  std::string detail;
  int exit_code = 0;  // kNodeFailed: the node's code
  int rank = -1;      // kNodeFailed: which node
};

// The job's shared state. Owned by the Controller; the parts hold
// references to it (JobPart).
struct Job {
  Job(const JobSpec& spec, const cluster::PlanInput& input, const ControllerOptions& options,
      ssh::EventLoop* loop, HostConnector* connector);
  ~Job();

  const JobSpec& spec;
  const Redactor redact{spec};  // what messages and the store never show
  cluster::PlanInput input;
  ControllerOptions options;
  ssh::EventLoop& loop;
  HostConnector& connector;
  ObserverList observer;  // options' observer, then the store's
  std::unique_ptr<StoreObserver> store_observer;
  std::unique_ptr<JobStore> store;
  Timers timers{&loop};
  CommandGroup job{&loop, &redact};      // lease renewals, disarming
  CommandGroup attempt{&loop, &redact};  // streams, exit watches, monitors, artifacts
  cluster::Plan plan;
  std::map<size_t, std::unique_ptr<HostState>> hosts;  // by host index
  std::vector<std::unique_ptr<NodeState>> nodes;       // by rank
  std::unique_ptr<LogSink> sink;
  // Why Connect could not reach a host, by host index (for preflight's table).
  std::map<size_t, std::string> connect_errors;
  // Replaced hosts, earlier attempts' plans, nodes and sinks: what a
  // retired attempt's state pointed at stays valid for the job's life.
  std::vector<std::unique_ptr<HostState>> retired;
  std::list<cluster::Plan> old_plans;
  std::vector<std::unique_ptr<NodeState>> old_nodes;
  std::vector<std::unique_ptr<LogSink>> old_sinks;
  int interrupts = 0;
  bool tearing_down = false;  // exits from now on are barge's doing
  // The attempt: what ended it (the first fault), how many restarts came
  // before it, and its periodic checks (generation stops a previous
  // attempt's; monitors keep their ticks).
  std::optional<Fault> fault;
  int restart_count = 0;
  int generation = 0;
  std::vector<std::shared_ptr<std::function<void()>>> monitors;
  std::unique_ptr<ssh::Executor> local;  // see JobPart::Local()
};

class JobPart {
 protected:
  using Cause = RestartCause;

  explicit JobPart(Job* job);
  JobPart(const JobPart&) = delete;
  JobPart& operator=(const JobPart&) = delete;

  // barge's own messages, on stderr, around the status line; secret values
  // are masked.
  void Say(const std::string& message) { observer_.Message("barge: " + redact_(message)); }
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

  // The job's state (Job), under the names the parts use.
  Job& job_state_;
  const JobSpec& spec_;
  const Redactor& redact_;
  cluster::PlanInput& input_;
  const ControllerOptions& options_;
  ssh::EventLoop& loop_;
  ObserverList& observer_;
  Timers& timers_;
  CommandGroup& job_;
  CommandGroup& attempt_;
  cluster::Plan& plan_;
  std::map<size_t, std::unique_ptr<HostState>>& hosts_;
  std::vector<std::unique_ptr<NodeState>>& nodes_;
  std::unique_ptr<LogSink>& sink_;
  std::unique_ptr<JobStore>& store_;
  std::map<size_t, std::string>& connect_errors_;
  std::vector<std::unique_ptr<HostState>>& retired_;
  int& interrupts_;
  bool& tearing_down_;
  std::optional<Fault>& fault_;
  int& restart_count_;
  int& generation_;
  std::vector<std::shared_ptr<std::function<void()>>>& monitors_;
};

}  // namespace barge::runner::internal
