// What a job's run and its verbs own (job_owner.h).
#include "runner/controller/job_owner.h"

#include <memory>
#include <utility>

#include "runner/controller/job_state.h"
#include "runner/controller/store_observer.h"
#include "runner/store/job_store.h"

namespace barge::runner::internal {

JobOwner::JobOwner(const JobSpec& spec, const cluster::PlanInput& input, const ControllerOptions& options,
                   ssh::EventLoop* loop, HostConnector* connector)
    : job_context_(spec, input.job_id, options, loop, connector),
      planner_(input),
      attempt_(loop, &job_context_.redact) {}

JobOwner::~JobOwner() = default;

Status JobOwner::OpenStore() {
  JobContext& ctx = job_context_;
  Result<std::unique_ptr<JobStore>> store = JobStore::Open(ctx.options.state_dir);
  if (!store.ok()) return store.status();
  ctx.store = std::move(store).value();
  ctx.store_observer = std::make_unique<StoreObserver>(ctx.store.get(), &ctx.loop, ctx.job_id);
  ctx.observer.Add(ctx.store_observer.get());
  return Status::Ok();
}

std::vector<LogSink::Node> JobOwner::MakeNodeStates() {
  std::vector<LogSink::Node> sink_nodes;
  for (const auto& n : plan_.nodes) {
    sink_nodes.push_back({n.rank, n.role, HostName(plan_.hosts[n.host_index])});
    auto state = std::make_unique<NodeState>();
    state->plan = &n;
    state->host = hosts_.by_index[n.host_index].get();
    attempt_.nodes.push_back(std::move(state));
  }
  return sink_nodes;
}

}  // namespace barge::runner::internal
