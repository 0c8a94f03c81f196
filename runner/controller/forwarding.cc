// Forwarding (forwarding.h): the job's local ports served over its hosts'
// sessions.
#include "runner/controller/forwarding.h"

#include <optional>
#include <string>
#include <utility>

#include "runner/controller/job_state.h"

namespace barge::runner::internal {

Status Forwarding::Bind(const std::vector<ForwardSpec>& forwards, const std::string& what) {
  for (size_t i = 0; i < forwards.size(); ++i) {
    const int rank = forwards[i].rank;
    if (rank < 0 || static_cast<size_t>(rank) >= plan_.nodes.size()) {
      return Status::Error(what + "[" + std::to_string(i) + "].node: the job has no node " +
                           std::to_string(rank) + " (ranks 0.." +
                           std::to_string(plan_.nodes.size() - 1) + ")");
    }
  }
  Result<std::unique_ptr<JobForwards>> bound = JobForwards::Bind(
      &ctx_.loop, forwards, [&](size_t i) { return what + "[" + std::to_string(i) + "]"; });
  if (!bound.ok()) return bound.status();
  forwards_ = std::move(bound).value();
  return Status::Ok();
}

void Forwarding::Serve(CommandGroup& group, std::function<void(const Status&)> on_fatal) {
  if (!forwards_) return;
  for (size_t i = 0; i < forwards_->specs().size(); ++i) {
    const ForwardSpec f = forwards_->specs()[i];
    const cluster::NodePlan& node = plan_.nodes[f.rank];
    auto host_it = hosts_.by_index.find(node.host_index);
    if (host_it == hosts_.by_index.end() || !host_it->second->exec) continue;
    HostState* host = host_it->second.get();
    const std::optional<std::string> network = node.container.options.network;
    auto serve = [this, i, f, host, on_fatal](const std::string& target) {
      if (!forwards_ || !host->exec) return;
      forwards_->Serve(i, host->exec.get(), target, on_fatal);
      Say(ForwardingLine(f) + " (" + host->name + ")");
    };
    if (network && *network == "host") {
      serve("127.0.0.1");
      continue;
    }
    group.Run(*host->exec, host->docker->ContainerAddress(node.container.name),
              [serve, network, on_fatal, f](const Outcome& o) {
                Result<std::string> target =
                    o.ok() ? ForwardTarget(network, o.out) : Result<std::string>(Status::Error(o.Reason()));
                if (!target.ok()) {
                  on_fatal(Status::Error("cannot forward to rank " + std::to_string(f.rank) +
                                         " port " + std::to_string(f.remote_port) + ": " +
                                         target.status().message()));
                  return;
                }
                serve(*target);
              });
  }
}

void Forwarding::Stop() {
  if (forwards_) forwards_->StopAll();
}

}  // namespace barge::runner::internal
