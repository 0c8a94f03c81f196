// What every part of the controller shares for the whole job (JobContext:
// the spec, its redaction, the options, the loop, the host connector, the
// observers, the store, the job's timers and job-long commands, the count
// of interrupts), and the base of every part (JobPart): the plumbing they
// all use on it (messages, the store's records, the loop's waits).
//
// A part gets in its constructor the context and exactly the other state it
// reads or changes: the job's hosts (host_set.h), the attempt (attempt.h),
// the plan and the facts it is made from (cluster/plan.h), and the parts
// it calls. What a part keeps for itself is in its own members.
//
// Threading: the loop's thread only.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>

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

// The job's context: set when the controller is made (the store once, when
// the job is recorded), the same for every attempt. Owned by the Controller;
// the parts hold a reference.
struct JobContext {
  // `loop` and `connector` are not owned and must outlive the context.
  JobContext(const JobSpec& spec, std::string job_id, const ControllerOptions& options, ssh::EventLoop* loop,
             HostConnector* connector);
  ~JobContext();
  JobContext(const JobContext&) = delete;
  JobContext& operator=(const JobContext&) = delete;

  const JobSpec& spec;
  const std::string job_id;
  const Redactor redact{spec};  // what messages and the store never show
  const ControllerOptions options;
  ssh::EventLoop& loop;
  // How the hosts are reached. Replaced once, before anything connects, by
  // the Controller of a slurm: job whose nodes are reached as job steps
  // (transport srun: the connector needs the granted allocation).
  HostConnector* connector;
  ObserverList observer;  // options' observer, then the store's
  std::unique_ptr<StoreObserver> store_observer;
  std::unique_ptr<JobStore> store;  // none for the verbs that keep no record
  Timers timers{&loop};
  CommandGroup job_commands{&loop, &redact};  // lease renewals, disarming
  // Interrupts so far (SIGINT, SIGTERM, SIGHUP): the first stops the job
  // gracefully, the second kills it; every wait gives up on one.
  int interrupts = 0;
  std::unique_ptr<ssh::Executor> local;  // see JobPart::Local()
};

class JobPart {
 protected:
  using Cause = RestartCause;

  explicit JobPart(JobContext* ctx) : ctx_(*ctx) {}
  JobPart(const JobPart&) = delete;
  JobPart& operator=(const JobPart&) = delete;

  // barge's own messages, on stderr, around the status line; secret values
  // are masked.
  void Say(const std::string& message) { ctx_.observer.Message("barge: " + ctx_.redact(message)); }
  // Store writes never fail the job: a failed write is a warning.
  void Record(const Status& s) {
    if (!s.ok()) Say("warning: job store: " + s.message());
  }
  // A job event: into the store and to the observer.
  void Event(const char* kind, const std::optional<std::string>& host, const std::string& detail);
  // A job status change (the store writes its event): to the observer too.
  void SetStatus(JobStatus status, const std::string& detail = "");
  // A node's record; its log file is `sink`'s (none: no log file yet).
  void RecordNode(const NodeState& node, const LogSink* sink);
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
  Clock::time_point Now() const { return ctx_.loop.Now(); }
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

  JobContext& ctx_;
};

}  // namespace barge::runner::internal
