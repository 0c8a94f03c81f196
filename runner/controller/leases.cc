// Leases (leases.h): the watchdog's parameters, renewals, disarming.
#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "runner/controller/leases.h"
#include "runner/controller/job_state.h"
#include "runner/remote/reservation.h"
#include "runner/remote/teardown_hooks.h"
#include "runner/remote/watchdog.h"

namespace barge::runner::internal {

WatchdogParams Leases::WatchdogFor(const HostState& host) const {
  WatchdogParams p;
  p.job_id = plan_.job_id;
  p.dir = host.job_dir;
  p.docker = DockerCommandOf(spec_, plan_.hosts[host.index], host.job_dir);
  if (plan_.nodes[0].host_index == host.index) p.head_container = plan_.nodes[0].container.name;
  p.lease = std::chrono::duration_cast<seconds>(spec_.lease);
  p.grace = std::max<seconds>(RenewEvery() * 3, seconds(5));
  if (spec_.timeout) {
    auto wall_deadline = std::chrono::system_clock::now() + *spec_.timeout + p.grace;
    p.deadline = std::chrono::duration_cast<seconds>(wall_deadline.time_since_epoch()).count();
  }
  if (spec_.teardown.host_command) {
    Result<std::string> hook =
        SubstituteHook(*spec_.teardown.host_command, plan_.hosts[host.index], plan_.job_id, host.job_dir);
    if (hook.ok()) p.host_hook = *hook;
  }
  return p;
}

void Leases::RenewLeases() {
  if (renewing_) return;
  renewing_ = true;
  // Renewals belong to the job (job_, timers_): they run until
  // DisarmWatchdogs, across attempts.
  auto tick = std::make_shared<std::function<void()>>();
  *tick = [this, weak = std::weak_ptr<std::function<void()>>(tick)] {
    if (!renewing_) return;
    for (auto& [h, host] : hosts_) {
      if (host->lease.armed && !host->lost && host->exec) RenewLeaseOn(*host);
    }
    if (auto t = weak.lock()) timers_.Add(Now() + RenewEvery(), [t] { (*t)(); });
  };
  tick_ = tick;
  timers_.Add(Now() + RenewEvery(), [tick] { (*tick)(); });
}

void Leases::RenewLeaseOn(HostState& host) {
  // The watchdog's lease file and the lease on the engine
  // (runner/remote/reservation.h) that other jobs and `barge reap` read;
  // the engine's after the file's, so the engine never says alive when
  // the watchdog would not.
  const std::string lease_id = host.holds.reply ? fleet::LeaseIdOf(host.holds.reply->holds, plan_.job_id) : std::string();
  const seconds engine_timeout = std::chrono::duration_cast<seconds>(spec_.ssh.engine_timeout);
  if (lease_id.empty()) {
    job_.Run(*host.exec, RenewLeaseCommand(host.job_dir), [](const Outcome&) {});
  } else if (!host.engine.api) {
    job_.Run(*host.exec,
             RenewLeaseCommand(host.job_dir) + " && " +
                 fleet::RenewEngineLeaseCommand(*host.docker, plan_.job_id, lease_id, engine_timeout),
             [](const Outcome&) {});
  } else {
    // Through the Engine API: no Docker CLI process on the host; its clock
    // comes with the file's renewal.
    HostState* hs = &host;
    job_.Run(*host.exec, RenewLeaseCommand(host.job_dir) + " && date +%s", [this, hs, lease_id](const Outcome& o) {
      const long long now = fleet::NumberOr(std::string(o.out.substr(0, o.out.find('\n'))), -1);
      if (!o.ok() || now < 0 || !hs->engine.api || hs->lost) return;
      container::HttpRequest req;
      req.method = "POST";
      req.target = "/containers/" + container::UrlEncode(lease_id) +
                   "/rename?name=" + container::UrlEncode(fleet::LeaseName(plan_.job_id, now));
      job_.Api(
          [hs, req](CommandGroup::Finish finish) {
            return hs->engine.api->Request(req, nullptr, [finish](container::Reply<container::DockerApi::Response>) {
              Outcome done;
              done.exit.code = 0;
              finish(done);
            });
          },
          [](const Outcome&) {}, spec_.ssh.engine_timeout);
    });
  }
}

void Leases::DisarmWatchdogs() {
  renewing_ = false;
  CommandGroup group(&loop_, &redact_);
  for (auto& [h, host] : hosts_) {
    if (!host->lease.armed || host->lost || !host->exec) continue;
    HostState* hs = host.get();
    group.Run(*hs->exec, hs->job_dir.empty() ? DisarmJobWatchdogsCommand(plan_.job_id) : DisarmWatchdogCommand(plan_.job_id, hs->job_dir), [this, hs](const Outcome& o) {
      hs->lease.armed = false;
      if (!o.ok()) Say(hs->name + ": disarming the watchdog failed: " + o.Reason());
    });
  }
  if (!RunWhileProgressing(group, seconds(30))) {
    Say("disarming the watchdogs did not finish; they end by themselves when the lease expires");
  }
}

}  // namespace barge::runner::internal
