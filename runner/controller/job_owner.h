// JobOwner: what the Controller (a job's run) and HostVerbs (the verbs on a
// job's hosts) own and give their parts, made before the parts: the job's
// context, the planner (the facts and the current plan), its hosts
// and its attempt; and the steps both take on them.
//
// Threading: the loop's thread only.
#pragma once

#include <vector>

#include "base/status.h"
#include "cluster/plan.h"
#include "runner/controller/attempt.h"
#include "runner/controller/entry_points.h"
#include "runner/controller/host_connector.h"
#include "runner/controller/host_set.h"
#include "runner/controller/job_context.h"
#include "runner/controller/planner.h"
#include "runner/jobfile/job_spec.h"
#include "runner/logs/log_sink.h"
#include "ssh/event_loop.h"

namespace barge::runner::internal {

struct JobOwner {
  // `loop` and `connector` are not owned and must outlive the owner.
  JobOwner(const JobSpec& spec, const cluster::PlanInput& input, const ControllerOptions& options,
           ssh::EventLoop* loop, HostConnector* connector);
  ~JobOwner();

  // The first plan, from the facts the spec gives.
  Status MakeFirstPlan() { return planner_.Start(); }
  // Opens the job store (options' state_dir) and adds its observer.
  Status OpenStore();
  // A NodeState per node of the plan, in the attempt, on its host; the log
  // sink's view of them.
  std::vector<LogSink::Node> MakeNodeStates();

  JobContext job_context_;
  // The facts and the plan (the one owner of both); plan_ is its plan.
  Planner planner_;
  const cluster::Plan& plan_ = planner_.plan();
  HostSet hosts_;
  Attempt attempt_;
};

}  // namespace barge::runner::internal
