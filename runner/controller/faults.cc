// Faults (faults.h): noting faults, the restart policy, the monitors.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cluster/plan.h"
#include "container/docker_args.h"
#include "runner/controller/faults.h"
#include "runner/controller/job_state.h"
#include "runner/remote/reservation.h"
#include "runner/remote/watchdog.h"
#include "runner/store/job_store.h"

namespace barge::runner::internal {

static_assert(NameOf(kRestartCauseNames, RestartCause::kHostLost) == event::kHostLost &&
              NameOf(kRestartCauseNames, RestartCause::kNodeFailed) == event::kNodeFailed &&
              NameOf(kRestartCauseNames, RestartCause::kPreempted) == event::kPreempted &&
              NameOf(kRestartCauseNames, RestartCause::kHang) == event::kHang &&
              NameOf(kRestartCauseNames, RestartCause::kGpuUnhealthy) == event::kGpuUnhealthy);

const char* Faults::CauseName(RestartCause cause) { return NameOf(kRestartCauseNames, cause).data(); }

void Faults::NoteFault(Fault fault) {
  const char* kind = CauseName(fault.cause);
  Event(kind, fault.host, fault.detail);
  Say(std::string(kind) + ": " + fault.detail);
  if (!attempt_.tearing_down && !attempt_.fault) attempt_.fault = std::move(fault);
}

bool Faults::Restartable(const Fault& f) const {
  if (!ctx_.spec.restart || attempt_.restart_count >= ctx_.spec.restart->max_restarts) return false;
  switch (f.cause) {
    case Cause::kHostLost: return ctx_.spec.restart->on_host_lost;
    case Cause::kNodeFailed: return ctx_.spec.restart->on_node_failed;
    case Cause::kPreempted: return ctx_.spec.restart->on_preempted;
    // A hang restarts only a job that says so (progress.on_hang: restart).
    case Cause::kHang:
      return ctx_.spec.restart->on_hang && ctx_.spec.progress && ctx_.spec.progress->on_hang == OnHang::kRestart;
    case Cause::kGpuUnhealthy: return ctx_.spec.restart->on_gpu_unhealthy;
  }
  return false;
}

void Faults::OnHostLost(HostState& host, const std::string& why) {
  if (host.lost) return;
  host.lost = true;
  host.health.replace = true;
  for (auto& n : attempt_.nodes) {
    if (n->host == &host && (n->phase == NodePhase::kRunning || n->phase == NodePhase::kStarting)) {
      n->phase = NodePhase::kLost;
    }
  }
  if (attempt_.tearing_down) {
    Say(host.name + ": lost during teardown: " + why);
    return;
  }
  NoteFault({Cause::kHostLost, host.name, host.name + " is lost: " + why});
}

void Faults::OnPreempted(HostState& host, const std::string& notice) {
  if (attempt_.tearing_down || host.lost) return;
  host.health.replace = true;
  // SIGTERM first, so the job can checkpoint; the teardown's docker stop
  // then gives it stop_grace before the kill.
  std::vector<std::string> names;
  for (auto& n : attempt_.nodes) {
    if (n->host == &host && n->phase == NodePhase::kRunning) names.push_back(n->plan->container.name);
  }
  if (!names.empty()) {
    attempt_.commands.Run(*host.exec, host.docker->Signal(names, "TERM"), [](const Outcome&) {});
  }
  NoteFault({Cause::kPreempted, host.name,
             host.name + " is being preempted" + (notice.empty() ? "" : ": " + notice) +
                 "; SIGTERM sent to " + std::to_string(names.size()) + " container(s)"});
}

void Faults::StartMonitors() {
  const int gen = ++attempt_.generation;
  // The engine: a bounded probe catches a dockerd that stopped answering
  // (the docker wait on it would hang silently). A probe is skipped while
  // the host's log streams keep delivering (the engine answers them). A
  // probe that fails or gets no answer within ssh.engine_timeout is a miss;
  // ssh.engine_misses in a row (the next probe starts at once after a miss)
  // make the host lost: a frozen engine is lost within probe_every +
  // engine_misses x engine_timeout of when it was last heard (each probe's
  // own start on the host aside), a slow one is not. The period is
  // engine_timeout itself (1 to 60 s): a probe is a Docker CLI process on
  // the host, and probing a silent host every few seconds cost more CPU
  // than the rest of barge's work there (bench/launch.sh). Probes and their
  // timers belong to the attempt (attempt_.commands, ctx_.timers); `gen` stops a
  // previous attempt's chain.
  const auto probe_every = std::clamp<milliseconds>(
      std::chrono::duration_cast<milliseconds>(ctx_.spec.ssh.engine_timeout), milliseconds(1000),
      milliseconds(60000));
  for (auto& [h, host] : hosts_.by_index) {
    HostState* hs = host.get();
    hs->health.engine_misses = 0;
    auto tick = std::make_shared<std::function<void()>>();
    *tick = [this, hs, gen, probe_every, weak = std::weak_ptr<std::function<void()>>(tick)] {
      if (gen != attempt_.generation || hs->lost) return;
      auto again = [this, gen, weak](milliseconds after) {
        if (auto t = weak.lock(); t && gen == attempt_.generation) ctx_.timers.Add(Now() + after, [t] { (*t)(); });
      };
      if (hs->health.probing) return again(probe_every);
      // Heard lately: the next probe is due once it has been silent for
      // probe_every (not a whole period from now: a frozen engine's probe
      // then starts at most probe_every after it was last heard).
      if (const auto quiet = std::chrono::duration_cast<milliseconds>(Now() - hs->health.engine_heard);
          hs->health.engine_misses == 0 && quiet < probe_every) {
        return again(probe_every - quiet);
      }
      hs->health.probing = true;
      const auto started = Now();
      attempt_.commands.Run(*hs->exec, BoundedCommand(hs->docker->Version(), ctx_.spec.ssh.engine_timeout),
                   [this, hs, gen, started, again, probe_every](const Outcome& o) {
                     hs->health.probing = false;
                     if (gen != attempt_.generation || hs->lost) return;
                     if (!o.exit.known()) return;  // the session itself: OnHostLost
                     if (o.ok()) {
                       hs->health.engine_misses = 0;
                       return again(probe_every);
                     }
                     if (++hs->health.engine_misses < ctx_.spec.ssh.engine_misses) {
                       Say(hs->name + ": the Docker engine " +
                           (o.timed_out() ? "did not answer within " + std::to_string(ctx_.spec.ssh.engine_timeout.count() / 1000) + " s"
                                          : "failed: " + o.Reason()) +
                           " (miss " + std::to_string(hs->health.engine_misses) + " of " + std::to_string(ctx_.spec.ssh.engine_misses) +
                           "); asking again");
                       return again(milliseconds(0));
                     }
                     const double took = std::chrono::duration<double>(Now() - started).count();
                     char buf[32];
                     std::snprintf(buf, sizeof buf, "%.1f", took);
                     std::string why = o.timed_out()
                                           ? std::string("the Docker engine did not answer (") +
                                                 std::to_string(ctx_.spec.ssh.engine_misses) + " probes in a row, the last for " + buf +
                                                 " s; ssh.engine_timeout, ssh.engine_misses)"
                                           : "the Docker engine fails: " + o.Reason();
                     OnHostLost(*hs, why);
                   });
    };
    attempt_.monitors.push_back(tick);
    ctx_.timers.Add(Now() + probe_every, [tick] { (*tick)(); });
  }
  if (!ctx_.spec.preemption) return;
  const PreemptionSpec& pre = *ctx_.spec.preemption;
  for (auto& [h, host] : hosts_.by_index) {
    HostState* hs = host.get();
    auto tick = std::make_shared<std::function<void()>>();
    *tick = [this, hs, gen, &pre, weak = std::weak_ptr<std::function<void()>>(tick)] {
      if (gen != attempt_.generation || hs->lost) return;
      auto again = [this, gen, &pre, weak] {
        if (auto t = weak.lock(); t && gen == attempt_.generation) ctx_.timers.Add(Now() + pre.every, [t] { (*t)(); });
      };
      if (hs->health.polling) return again();
      hs->health.polling = true;
      attempt_.commands.Run(*hs->exec, Bounded(pre.command, std::max<milliseconds>(pre.every, seconds(10))),
                   [this, hs, gen, again](const Outcome& o) {
                     hs->health.polling = false;
                     if (gen != attempt_.generation) return;
                     if (o.ok()) return OnPreempted(*hs, Trim(o.out).substr(0, 200));
                     again();
                   });
    };
    attempt_.monitors.push_back(tick);
    ctx_.timers.Add(Now() + pre.every, [tick] { (*tick)(); });
  }
}

std::string Faults::RemoveJobContainersLine(HostState& hs) const {
  return hs.docker->RemoveLabelled(cluster::kJobLabel, plan_.job_id);
}

}  // namespace barge::runner::internal
