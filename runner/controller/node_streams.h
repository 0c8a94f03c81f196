// NodeStreams: what every started node gets for the rest of its attempt,
// its log stream into the log sink and the report of how its container
// ended: through the Docker CLI (node_streams.cc: DockerCommands'
// FollowUntilExit, then a catch-up read) or, on a host whose Engine API
// answered, through the API (node_streams_api.cc: attach, start, then inspect,
// wait and the catch-up read, with the gap design described there).
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "container/docker_api.h"
#include "runner/controller/attempt.h"
#include "runner/controller/faults.h"
#include "runner/controller/job_context.h"
#include "runner/controller/progress_watch.h"

namespace barge::runner::internal {

// How long after a SIGKILL exit (137) with no OOM kill marked the engine is
// asked once more (its OOM event comes apart from the exit's).
inline constexpr std::chrono::milliseconds kOomSettle{300};

class NodeStreams : private JobPart {
 public:
  // A node that fails is a fault (`faults`, not owned). Each line of the
  // current attempt's nodes goes to `progress` too (not owned; null for a
  // verb that only follows a job's logs).
  NodeStreams(JobContext* ctx, Attempt* attempt, Faults* faults, ProgressWatch* progress = nullptr)
      : JobPart(ctx), attempt_(*attempt), faults_(*faults), progress_(progress) {}

  // Streams the node's logs into the sink; with `report_exit`, the same
  // command then reports how the container ended, and NodeEnded runs.
  void StreamLogs(NodeState& node, bool report_exit);
  // The start on an API host, once `docker create` made the node's
  // container: attach, then start once attached, in `group`; `started`
  // gets the start's outcome. The attach is then the node's live log.
  void AttachAndStartWithApi(CommandGroup& group, NodeState& node, CommandGroup::Done started);
  // Every node's API call goes (an attempt's end, the controller's).
  void DropApiCalls();

 private:
  Attempt& attempt_;
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

  // node_streams_api.cc: the per-node log follow and exit report through the
  // Engine API (HostState::api), with the CLI's semantics: follow, then
  // inspect (wait and inspect again while it still runs), then the
  // catch-up read, then NodeExited.
  void FollowWithApi(NodeState& node, bool report_exit);
  // The attach stream ended: the exit report when the container's stdio
  // closed, a gap fill from the engine's log when the stream broke off.
  void AttachEndedWithApi(NodeState& node, const container::Reply<container::NoContent>& r);
  // Its steps: inspect (`waited`: a wait has run), the end (catch-up, then
  // the report), and a lost transport (what a lost CLI stream says).
  // A container ended by SIGKILL (137) whose report says no OOM kill is
  // asked again once, after kOomSettle.
  void InspectWithApi(NodeState& node, bool waited, bool oom_asked_again = false);
  void EndWithApi(NodeState& node, bool report_exit, const Result<container::ContainerState>& state);
  void LostWithApi(NodeState& node, bool report_exit, const std::string& why);
  void CatchUpWithApi(NodeState& node, std::optional<int64_t> from, std::function<void()> then);

  Faults& faults_;
  ProgressWatch* progress_;
};

}  // namespace barge::runner::internal
