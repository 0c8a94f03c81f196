// What cleans up after the job on its hosts: the per-host watchdog (its
// parameters, the lease renewals while the job runs, disarming it at the
// end) and the teardown hooks (teardown.host_command on each host,
// teardown.local_command here), which run for every host the job used.
#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "runner/controller_internal.h"
#include "runner/teardown_hooks.h"
#include "runner/watchdog.h"
#include "ssh/local_executor.h"

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
  renew_tick_ = [this] {
    if (!renewing_) return;
    for (auto& [h, host] : hosts_) {
      if (host->watchdog_armed && !host->lost) {
        Exec(*host, RenewLeaseCommand(plan_.job_id), [](const Outcome&) {});
      }
    }
    loop_.AddTimer(Clock::now() + RenewEvery(), [this] { renew_tick_(); });
  };
  loop_.AddTimer(Clock::now() + RenewEvery(), [this] { renew_tick_(); });
}

void Controller::DisarmWatchdogs() {
  renewing_ = false;
  int pending = 0;
  for (auto& [h, host] : hosts_) {
    if (!host->watchdog_armed || host->lost) continue;
    ++pending;
    HostState* hs = host.get();
    Exec(*host, DisarmWatchdogCommand(plan_.job_id), [&, hs](const Outcome& o) {
      --pending;
      hs->watchdog_armed = false;
      if (!o.ok()) Say(hs->name + ": disarming the watchdog failed: " + o.Reason());
    });
  }
  if (!RunUntil([&] { return pending == 0; }, Clock::now() + seconds(30))) {
    Say("disarming the watchdogs did not finish; they end by themselves when the lease expires");
  }
}

void Controller::RunTeardownHooks() {
  if (!spec_.teardown.host_command && !spec_.teardown.local_command) return;
  std::unique_ptr<ssh::LocalExecutor> local;
  if (spec_.teardown.local_command) local = std::make_unique<ssh::LocalExecutor>(&loop_);
  HostState local_host;
  local_host.name = "local";
  int pending = 0;
  auto run = [&](HostState& where, const std::string& kind, const std::string& hook,
                 const cluster::Host& host, const std::string& for_host) {
    Result<std::string> line = SubstituteHook(hook, host, plan_.job_id);
    if (!line.ok()) {
      Say("teardown " + kind + " for " + for_host + " not run: " + line.status().message());
      return;
    }
    ++pending;
    Exec(where, *line, [&, kind, for_host](const Outcome& o) {
      --pending;
      if (o.ok()) {
        Say("teardown " + kind + " for " + for_host + ": ok");
      } else {
        Say("teardown " + kind + " for " + for_host + " failed: " + o.Reason());
      }
    });
  };
  if (local) local_host.exec = std::move(local);
  // Every host the job used: the current ones and those spares replaced (a
  // lost VM is still worth its terminate call).
  std::vector<HostState*> used = AllHosts();
  for (auto& old : retired_) {
    if (old->superseded) used.push_back(old.get());
  }
  for (HostState* host : used) {
    const cluster::Host& inventory = host->inventory;
    if (spec_.teardown.host_command && host->lost) {
      Say("teardown host_command for " + host->name + " not run: the host is lost (its watchdog runs it)");
    } else if (spec_.teardown.host_command) {
      run(*host, "host_command", *spec_.teardown.host_command, inventory, host->name);
    }
    if (spec_.teardown.local_command) {
      run(local_host, "local_command", *spec_.teardown.local_command, inventory, host->name);
    }
  }
  if (!RunUntil(
          [&] {
            ReapCommandsOf(local_host);
            return pending == 0;
          },
          Clock::now() + seconds(300))) {
    Say("teardown hooks did not finish within 300 s");
  }
}

}  // namespace barge::runner::internal
