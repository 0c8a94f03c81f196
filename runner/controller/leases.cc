// Leases (leases.h): the watchdog's parameters, renewals, disarming.
#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runner/controller/leases.h"
#include "runner/controller/holds.h"
#include "runner/controller/job_state.h"
#include "runner/remote/reservation.h"
#include "runner/remote/teardown_hooks.h"
#include "runner/remote/watchdog.h"

namespace barge::runner::internal {

WatchdogParams Leases::WatchdogFor(const HostState& host) const {
  WatchdogParams p;
  p.job_id = plan_.job_id;
  p.dir = host.job_dir;
  p.docker = DockerCommandOf(ctx_.spec, plan_.hosts[host.index], host.job_dir);
  if (plan_.nodes[0].host_index == host.index) p.head_container = plan_.nodes[0].container.name;
  p.lease = std::chrono::duration_cast<seconds>(ctx_.spec.lease);
  p.grace = std::max<seconds>(RenewEvery() * 3, seconds(5));
  if (ctx_.spec.timeout) {
    // What is left of the job's timeout (its controller's deadline, see
    // job_started_), plus the grace: a duration, measured on the loop's
    // steady clock, which the host adds to its own clock. A host armed
    // again (a lost one reconnected, a spare) gets what is left then, not
    // the whole timeout again; at least 1 s.
    const auto left = job_started_ + *ctx_.spec.timeout + p.grace - Now();
    p.deadline_after = std::max(seconds(1), std::chrono::ceil<seconds>(left));
  }
  if (ctx_.spec.teardown.host_command) {
    Result<std::string> hook =
        SubstituteHook(*ctx_.spec.teardown.host_command, plan_.hosts[host.index], plan_.job_id, host.job_dir);
    if (hook.ok()) p.host_hook = *hook;
  }
  return p;
}

void Leases::RenewLeases() {
  if (renewing_) return;
  renewing_ = true;
  // Renewals belong to the job (ctx_.job_commands, ctx_.timers): they run until
  // DisarmWatchdogs, across attempts.
  auto tick = std::make_shared<std::function<void()>>();
  *tick = [this, weak = std::weak_ptr<std::function<void()>>(tick)] {
    if (!renewing_) return;
    for (auto& [h, host] : hosts_.by_index) {
      if (host->lease.armed && !host->lost && host->exec) RenewLeaseOn(*host);
    }
    if (auto t = weak.lock()) ctx_.timers.Add(Now() + RenewEvery(), [t] { (*t)(); });
  };
  tick_ = tick;
  ctx_.timers.Add(Now() + RenewEvery(), [tick] { (*tick)(); });
}

void Leases::RenewLeaseOn(HostState& host) {
  // The watchdog's lease file and the lease on the engine
  // (runner/remote/reservation.h) that other jobs and `barge reap` read;
  // the engine's after the file's, so the engine never says alive when
  // the watchdog would not. A rename that finds no such container is the
  // sign that the engine lost the lease (and with it, most likely, the
  // holds): no other engine call is made while it is there.
  if (host.lease.putting_back || host.lease.releasing) return;
  const std::string lease_id = host.holds.reply ? LeaseIdOf(host.holds.reply->holds, plan_.job_id) : std::string();
  const seconds engine_timeout = std::chrono::duration_cast<seconds>(ctx_.spec.ssh.engine_timeout);
  HostState* hs = &host;
  if (lease_id.empty()) {
    // No lease of the job listed there: none was taken, or a put back
    // failed (put_back_due), which is tried again now.
    ctx_.job_commands.Run(*host.exec, RenewLeaseCommand(host.job_dir), [this, hs](const Outcome& o) {
      if (o.ok() && hs->lease.put_back_due) PutBack(*hs);
    });
  } else if (!host.engine.api) {
    ctx_.job_commands.Run(*host.exec,
             RenewLeaseCommand(host.job_dir) + " && " +
                 RenewEngineLeaseCommand(*host.docker, plan_.job_id, lease_id, engine_timeout),
             [this, hs](const Outcome& o) {
               if (!o.ok() && o.err.find("No such container") != std::string::npos) PutBack(*hs);
             });
  } else {
    // Through the Engine API: no Docker CLI process on the host; its clock
    // comes with the file's renewal.
    ctx_.job_commands.Run(*host.exec, RenewLeaseCommand(host.job_dir) + " && date +%s", [this, hs, lease_id](const Outcome& o) {
      const long long now = NumberOr(std::string(o.out.substr(0, o.out.find('\n'))), -1);
      if (!o.ok() || now < 0 || !hs->engine.api || hs->lost) return;
      container::HttpRequest req;
      req.method = "POST";
      req.target = "/containers/" + container::UrlEncode(lease_id) +
                   "/rename?name=" + container::UrlEncode(LeaseName(plan_.job_id, now));
      auto gone = std::make_shared<bool>(false);
      ctx_.job_commands.Api(
          [hs, req, gone](CommandGroup::Finish finish) {
            return hs->engine.api->Request(req, nullptr, [finish, gone](container::Reply<container::DockerApi::Response> r) {
              *gone = r.not_found() || (r.ok() && (*r.value).status == 404);
              Outcome done;
              done.exit.code = 0;
              finish(done);
            });
          },
          [this, hs, gone](const Outcome&) {
            if (*gone) PutBack(*hs);
          },
          ctx_.spec.ssh.engine_timeout);
    });
  }
}

void Leases::PutBack(HostState& host) {
  if (host.lease.putting_back || host.lease.releasing || host.lost || !host.exec || !renewing_) return;
  host.lease.putting_back = true;
  HostState* hs = &host;
  // Through the host's shell (as the waiting job's line is kept): a rare
  // repair, not worth an Engine API path of its own.
  ctx_.job_commands.Run(*host.exec, holds_.PutBackLine(host), [this, hs](const Outcome& o) {
    hs->lease.putting_back = false;
    if (hs->lost) return;
    if (hs->lease.releasing) {
      // The job let its holds there go while this put back ran: what it put
      // back goes too, or it would stay after the job.
      ctx_.job_commands.Run(*hs->exec, ReleaseHoldsCommand(*hs->docker, plan_.job_id), [](const Outcome&) {});
      return;
    }
    const std::vector<Hold> taken = holds_.NotePutBack(*hs, o.out);
    if (!o.ok() || LeaseIdOf(hs->holds.reply->holds, plan_.job_id).empty()) {
      // Tried again at the next renewal: its rename fails the same way, or,
      // where this listing shows no lease to rename, put_back_due says so.
      hs->lease.put_back_due = true;
      if (!hs->lease.loss_said) {
        Say("warning: " + hs->name + ": the job's lease was removed from the engine and putting it back failed: " +
            (hs->holds.reply->errors.empty() ? o.Reason() : hs->holds.reply->errors));
      }
      hs->lease.loss_said = true;
      return;
    }
    hs->lease.loss_said = false;
    hs->lease.put_back_due = false;
    const std::string what = "the job's lease and holds were removed from the engine (docker container prune?); put back";
    Say(hs->name + ": " + what);
    Event("lease_put_back", hs->name, what);
    std::map<std::string, std::string> by_job;  // job id -> what it took
    for (const Hold& h : taken) {
      std::string item = h.name == HostHoldName() ? "whole host" : h.name.substr(kHoldPrefix.size());
      std::string& list = by_job[h.job_id + (h.job_name.empty() ? "" : " " + h.job_name) + " " + h.user + "@" + h.machine];
      list += (list.empty() ? "" : ", ") + item;
    }
    for (const auto& [job, items] : by_job) {
      const std::string line = "another job (" + job + ") took this host's " + items +
                               " while the lease was gone; this job keeps running beside it";
      Say(hs->name + ": " + line);
      Event("lease_put_back", hs->name, line);
    }
  });
}

void Leases::KeepUntil(Clock::time_point until) {
  CommandGroup group(&ctx_.loop, &ctx_.redact);
  for (auto& [h, host] : hosts_.by_index) {
    if (!host->lease.armed || host->lost || !host->exec || host->job_dir.empty()) continue;
    HostState* hs = host.get();
    const seconds left = std::chrono::ceil<seconds>(until - Now()) + WatchdogFor(*hs).grace;
    group.Run(*hs->exec, KeepUntilCommand(hs->job_dir, left), [this, hs](const Outcome& o) {
      if (!o.ok()) Say(hs->name + ": telling the watchdog the keep's end failed: " + o.Reason());
    });
  }
  if (!RunWhileProgressing(group, seconds(30), [this] { return ctx_.interrupts > 0; })) {
    Say("telling the watchdogs the keep's end did not finish");
  }
}

void Leases::DisarmWatchdogs() {
  renewing_ = false;
  CommandGroup group(&ctx_.loop, &ctx_.redact);
  for (auto& [h, host] : hosts_.by_index) {
    if (!host->lease.armed || host->lost || !host->exec) continue;
    HostState* hs = host.get();
    group.Run(*hs->exec, hs->job_dir.empty() ? DisarmJobWatchdogsCommand(plan_.job_id) : DisarmWatchdogCommand(hs->job_dir), [this, hs](const Outcome& o) {
      hs->lease.armed = false;
      if (!o.ok()) Say(hs->name + ": disarming the watchdog failed: " + o.Reason());
    });
  }
  if (!RunWhileProgressing(group, seconds(30))) {
    Say("disarming the watchdogs did not finish; they end by themselves when the lease expires");
  }
}

}  // namespace barge::runner::internal
