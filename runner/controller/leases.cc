// leases: the per-host watchdog's parameters (armed by preflight), the
// lease renewals while the job runs, and disarming it at the end.
#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "runner/controller/controller.h"
#include "runner/remote/teardown_hooks.h"
#include "runner/remote/watchdog.h"

namespace barge::runner::internal {

WatchdogParams Controller::WatchdogFor(const HostState& host) const {
  WatchdogParams p;
  p.job_id = plan_.job_id;
  p.docker = DockerCommandOf(spec_, plan_.hosts[host.index], plan_.job_id);
  if (plan_.nodes[0].host_index == host.index) p.head_container = plan_.nodes[0].container.name;
  p.lease = std::chrono::duration_cast<seconds>(spec_.lease);
  p.grace = std::max<seconds>(RenewEvery() * 3, seconds(5));
  if (spec_.timeout) {
    auto wall_deadline = std::chrono::system_clock::now() + *spec_.timeout + p.grace;
    p.deadline = std::chrono::duration_cast<seconds>(wall_deadline.time_since_epoch()).count();
  }
  if (spec_.teardown.host_command) {
    Result<std::string> hook =
        SubstituteHook(*spec_.teardown.host_command, plan_.hosts[host.index], plan_.job_id);
    if (hook.ok()) p.host_hook = *hook;
  }
  return p;
}

void Controller::RenewLeases() {
  if (renewing_) return;
  renewing_ = true;
  // Renewals belong to the job (job_, timers_): they run until
  // DisarmWatchdogs, across attempts.
  auto tick = std::make_shared<std::function<void()>>();
  *tick = [this, weak = std::weak_ptr<std::function<void()>>(tick)] {
    if (!renewing_) return;
    for (auto& [h, host] : hosts_) {
      if (host->watchdog_armed && !host->lost && host->exec) {
        job_.Run(*host->exec, RenewLeaseCommand(plan_.job_id), [](const Outcome&) {});
      }
    }
    if (auto t = weak.lock()) timers_.Add(Now() + RenewEvery(), [t] { (*t)(); });
  };
  monitors_.push_back(tick);
  timers_.Add(Now() + RenewEvery(), [tick] { (*tick)(); });
}

void Controller::DisarmWatchdogs() {
  renewing_ = false;
  CommandGroup group(&loop_, &redact_);
  for (auto& [h, host] : hosts_) {
    if (!host->watchdog_armed || host->lost || !host->exec) continue;
    HostState* hs = host.get();
    group.Run(*hs->exec, DisarmWatchdogCommand(plan_.job_id), [this, hs](const Outcome& o) {
      hs->watchdog_armed = false;
      if (!o.ok()) Say(hs->name + ": disarming the watchdog failed: " + o.Reason());
    });
  }
  if (!RunWhileProgressing(group, seconds(30))) {
    Say("disarming the watchdogs did not finish; they end by themselves when the lease expires");
  }
}

}  // namespace barge::runner::internal
