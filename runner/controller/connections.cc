// connect: one executor per host through the HostConnector, in parallel,
// each host with a new HostState and a new host id.
#include <algorithm>
#include <string>
#include <vector>

#include "runner/controller/connections.h"
#include "runner/controller/job_state.h"
#include "runner/remote/watchdog.h"

namespace barge::runner::internal {

Status Connections::Connect(const std::vector<size_t>& which) {
  std::vector<HostTarget> targets;
  for (size_t h : which) {
    hosts_.connect_errors.erase(h);
    planner_.Unreached(h);
  }
  for (size_t h : which) {
    const cluster::Host& host = plan_.hosts[h];
    if (auto old = hosts_.by_index.find(h); old != hosts_.by_index.end()) hosts_.retired.push_back(std::move(old->second));
    auto state = std::make_unique<HostState>();
    state->index = h;
    state->id = next_host_id_++;
    state->name = HostName(host);
    state->inventory = host;
    state->docker = std::make_unique<DockerCommands>(DockerCommandOf(ctx_.spec, host));
    state->job_dir = NewHostJobDir(plan_.job_id);
    planner_.JobDir(h, state->job_dir);
    HostTarget t;
    t.host = host;
    t.ssh = SessionOptionsFor(ctx_.spec, host);
    t.dead_after = ctx_.spec.ssh.dead_after;
    HostState* hs = state.get();
    t.on_lost = [this, hs](const Status& why) { faults_.OnHostLost(*hs, why.message()); };
    targets.push_back(std::move(t));
    hosts_.by_index[h] = std::move(state);
  }
  if (ctx_.spec.ssh.host_key_checking == ssh::HostKeyChecking::kOff &&
      std::any_of(targets.begin(), targets.end(), [](const HostTarget& t) { return !t.host.is_local(); })) {
    Say("warning: host_key_checking is off: host keys are not verified, an impostor host would be trusted");
  }
  if (targets.empty()) return Status::Ok();
  // The local engine needs no connection: no status line for a step that
  // cannot be slow (the step's host events are still reported).
  const bool all_local =
      std::all_of(targets.begin(), targets.end(), [](const HostTarget& t) { return t.host.is_local(); });
  ctx_.observer.StepBegan(Phase::kConnect, all_local ? "" : "connecting", static_cast<int>(targets.size()));
  for (size_t i = 0; i < which.size(); ++i) Began(hosts_.by_index[which[i]]->PhaseOf(Phase::kConnect));
  auto executors = ctx_.connector->Connect(targets, ctx_.spec.ssh.parallel_connects);
  std::vector<std::string> errors;
  for (size_t i = 0; i < executors.size(); ++i) {
    HostState& state = *hosts_.by_index[which[i]];
    if (!executors[i].ok()) {
      errors.push_back(executors[i].status().message());
      hosts_.connect_errors[which[i]] = executors[i].status().message();
      Ended(state.PhaseOf(Phase::kConnect), false, executors[i].status().message());
      continue;
    }
    state.exec = std::move(executors[i]).value();
    Ended(state.PhaseOf(Phase::kConnect), true);
  }
  if (Status settled = SettleAddresses(which); !settled.ok()) errors.push_back(settled.message());
  ctx_.observer.StepEnded(Phase::kConnect);
  for (size_t h : which) RecordHost(*hosts_.by_index[h]);
  if (!errors.empty()) {
    std::string msg = "cannot connect:";
    for (const auto& e : errors) msg += "\n  " + e;
    return Status::Error(msg);
  }
  return Status::Ok();
}

}  // namespace barge::runner::internal
