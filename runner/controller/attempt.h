// One launch of the job on its hosts (an attempt) as the controller holds
// it: the nodes, the log sink, the commands that live as long as the
// attempt, what ended it, and the count of restarts before it. A restart
// starts a new attempt in the same object; what the earlier ones' state
// pointed at stays valid for the job's life. Owned by the Controller; given
// to the parts that read or change it.
//
// Threading: the loop's thread only.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runner/jobfile/job_spec.h"
#include "runner/jobfile/redact.h"
#include "runner/logs/log_sink.h"
#include "runner/remote/command_group.h"
#include "ssh/event_loop.h"

namespace barge::runner::internal {

struct NodeState;  // job_state.h

// A fault: what ends an attempt (the first of it) or is only recorded.
struct Fault {
  RestartCause cause;  // named in kRestartCauseNames (job_spec.h)
  std::string host;
  std::string detail;
  int exit_code = 0;  // kNodeFailed: the node's code
  int rank = -1;      // kNodeFailed: which node
};

struct Attempt {
  // `loop` and `redact` must outlive the attempt.
  Attempt(ssh::EventLoop* loop, const Redactor* redact);
  ~Attempt();
  Attempt(const Attempt&) = delete;
  Attempt& operator=(const Attempt&) = delete;

  CommandGroup commands;  // streams, exit watches, monitors, artifacts
  std::vector<std::unique_ptr<NodeState>> nodes;  // by rank
  std::unique_ptr<LogSink> sink;
  // What ended it (the first fault).
  std::optional<Fault> fault;
  int restart_count = 0;  // restarts before it
  // Its periodic checks: generation stops a previous attempt's; monitors
  // keep their ticks.
  int generation = 0;
  std::vector<std::shared_ptr<std::function<void()>>> monitors;
  bool tearing_down = false;  // exits from now on are barge's doing
  // Earlier attempts' nodes and sinks.
  std::vector<std::unique_ptr<NodeState>> old_nodes;
  std::vector<std::unique_ptr<LogSink>> old_sinks;
};

}  // namespace barge::runner::internal
