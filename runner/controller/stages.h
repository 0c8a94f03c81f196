// Stages: the launch as the plan's stages say (for a head/worker job: the
// head, its readiness, then every worker): each stage's containers started
// in parallel, then its gate awaited on each node; every started node then
// gets its log stream and exit watch (NodeStreams).
#pragma once

#include <list>
#include <regex>
#include <string>
#include <vector>

#include "runner/controller/attempt.h"
#include "runner/controller/faults.h"
#include "runner/controller/job_context.h"
#include "runner/controller/node_streams.h"

namespace barge::runner::internal {

class Stages : private JobPart {
 public:
  Stages(JobContext* ctx, Attempt* attempt, const cluster::Plan* plan, Faults* faults, NodeStreams* streams)
      : JobPart(ctx), attempt_(*attempt), plan_(*plan), faults_(*faults), streams_(*streams) {}

  // Runs plan_.stages in order: each stage's nodes started in parallel, then
  // its gate awaited on each of them. Stops early (Ok) when an interrupt or
  // a fault ends the attempt, or the head has already ended.
  Status RunStages();

 private:
  Attempt& attempt_;
  const cluster::Plan& plan_;  // the current plan (the Controller makes it)
  Status StartNodes(const std::vector<NodeState*>& nodes, const std::string& step);
  // Waits until `gate` holds for `node` (bounded by the gate's timeout).
  Status AwaitGate(NodeState& node, const cluster::ReadinessProbe& gate);

  Faults& faults_;
  NodeStreams& streams_;
  std::list<std::regex> gate_regexes_;  // of this attempt's log gates
};

}  // namespace barge::runner::internal
