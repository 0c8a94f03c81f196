// faults: noting the fault that ends an attempt (a lost host,
// a failed node, a preemption notice), whether the restart policy covers
// it, the periodic engine and preemption monitors that detect them while an
// attempt runs, and, at a restart, the spare hosts (or the same hosts
// checked again) that take the replaced hosts' places.
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
#include "runner/controller/controller.h"
#include "runner/remote/reservation.h"
#include "runner/store/job_store.h"
#include "runner/remote/watchdog.h"

namespace barge::runner::internal {

static_assert(NameOf(kRestartCauseNames, RestartCause::kHostLost) == event::kHostLost &&
              NameOf(kRestartCauseNames, RestartCause::kNodeFailed) == event::kNodeFailed &&
              NameOf(kRestartCauseNames, RestartCause::kPreempted) == event::kPreempted);

const char* Controller::CauseName(Cause cause) { return NameOf(kRestartCauseNames, cause).data(); }

void Controller::NoteFault(Fault fault) {
  const char* kind = CauseName(fault.cause);
  Event(kind, fault.host, fault.detail);
  Say(std::string(kind) + ": " + fault.detail);
  if (!tearing_down_ && !fault_) fault_ = std::move(fault);
}

bool Controller::Restartable(const Fault& f) const {
  if (!spec_.restart || restart_count_ >= spec_.restart->max_restarts) return false;
  switch (f.cause) {
    case Cause::kHostLost: return spec_.restart->on_host_lost;
    case Cause::kNodeFailed: return spec_.restart->on_node_failed;
    case Cause::kPreempted: return spec_.restart->on_preempted;
  }
  return false;
}

void Controller::OnHostLost(HostState& host, const std::string& why) {
  if (host.lost) return;
  host.lost = true;
  host.replace = true;
  for (auto& n : nodes_) {
    if (n->host == &host && (n->phase == NodePhase::kRunning || n->phase == NodePhase::kStarting)) {
      n->phase = NodePhase::kLost;
    }
  }
  if (tearing_down_) {
    Say(host.name + ": lost during teardown: " + why);
    return;
  }
  NoteFault({Cause::kHostLost, host.name, host.name + " is lost: " + why});
}

void Controller::OnPreempted(HostState& host, const std::string& notice) {
  if (tearing_down_ || host.lost) return;
  host.replace = true;
  // SIGTERM first, so the job can checkpoint; the teardown's docker stop
  // then gives it stop_grace before the kill.
  std::vector<std::string> names;
  for (auto& n : nodes_) {
    if (n->host == &host && n->phase == NodePhase::kRunning) names.push_back(n->plan->container.name);
  }
  if (!names.empty()) {
    attempt_.Run(*host.exec, host.docker->Signal(names, "TERM"), [](const Outcome&) {});
  }
  NoteFault({Cause::kPreempted, host.name,
             host.name + " is being preempted" + (notice.empty() ? "" : ": " + notice) +
                 "; SIGTERM sent to " + std::to_string(names.size()) + " container(s)"});
}

void Controller::StartMonitors() {
  const int gen = ++generation_;
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
  // timers belong to the attempt (attempt_, timers_); `gen` stops a
  // previous attempt's chain.
  const auto probe_every = std::clamp<milliseconds>(
      std::chrono::duration_cast<milliseconds>(spec_.ssh.engine_timeout), milliseconds(1000),
      milliseconds(60000));
  for (auto& [h, host] : hosts_) {
    HostState* hs = host.get();
    hs->engine_misses = 0;
    auto tick = std::make_shared<std::function<void()>>();
    *tick = [this, hs, gen, probe_every, weak = std::weak_ptr<std::function<void()>>(tick)] {
      if (gen != generation_ || hs->lost) return;
      auto again = [this, gen, weak](milliseconds after) {
        if (auto t = weak.lock(); t && gen == generation_) timers_.Add(Now() + after, [t] { (*t)(); });
      };
      if (hs->probing) return again(probe_every);
      // Heard lately: the next probe is due once it has been silent for
      // probe_every (not a whole period from now: a frozen engine's probe
      // then starts at most probe_every after it was last heard).
      if (const auto quiet = std::chrono::duration_cast<milliseconds>(Now() - hs->engine_heard);
          hs->engine_misses == 0 && quiet < probe_every) {
        return again(probe_every - quiet);
      }
      hs->probing = true;
      const auto started = Now();
      attempt_.Run(*hs->exec, BoundedCommand(hs->docker->Version(), spec_.ssh.engine_timeout),
                   [this, hs, gen, started, again, probe_every](const Outcome& o) {
                     hs->probing = false;
                     if (gen != generation_ || hs->lost) return;
                     if (!o.exit.known()) return;  // the session itself: OnHostLost
                     if (o.ok()) {
                       hs->engine_misses = 0;
                       return again(probe_every);
                     }
                     if (++hs->engine_misses < spec_.ssh.engine_misses) {
                       Say(hs->name + ": the Docker engine " +
                           (o.timed_out() ? "did not answer within " + std::to_string(spec_.ssh.engine_timeout.count() / 1000) + " s"
                                          : "failed: " + o.Reason()) +
                           " (miss " + std::to_string(hs->engine_misses) + " of " + std::to_string(spec_.ssh.engine_misses) +
                           "); asking again");
                       return again(milliseconds(0));
                     }
                     const double took = std::chrono::duration<double>(Now() - started).count();
                     char buf[32];
                     std::snprintf(buf, sizeof buf, "%.1f", took);
                     std::string why = o.timed_out()
                                           ? std::string("the Docker engine did not answer (") +
                                                 std::to_string(spec_.ssh.engine_misses) + " probes in a row, the last for " + buf +
                                                 " s; ssh.engine_timeout, ssh.engine_misses)"
                                           : "the Docker engine fails: " + o.Reason();
                     OnHostLost(*hs, why);
                   });
    };
    monitors_.push_back(tick);
    timers_.Add(Now() + probe_every, [tick] { (*tick)(); });
  }
  if (!spec_.preemption) return;
  const PreemptionSpec& pre = *spec_.preemption;
  for (auto& [h, host] : hosts_) {
    HostState* hs = host.get();
    auto tick = std::make_shared<std::function<void()>>();
    *tick = [this, hs, gen, &pre, weak = std::weak_ptr<std::function<void()>>(tick)] {
      if (gen != generation_ || hs->lost) return;
      auto again = [this, gen, &pre, weak] {
        if (auto t = weak.lock(); t && gen == generation_) timers_.Add(Now() + pre.every, [t] { (*t)(); });
      };
      if (hs->polling) return again();
      hs->polling = true;
      attempt_.Run(*hs->exec, Bounded(pre.command, std::max<milliseconds>(pre.every, seconds(10))),
                   [this, hs, gen, again](const Outcome& o) {
                     hs->polling = false;
                     if (gen != generation_) return;
                     if (o.ok()) return OnPreempted(*hs, Trim(o.out).substr(0, 200));
                     again();
                   });
    };
    monitors_.push_back(tick);
    timers_.Add(Now() + pre.every, [tick] { (*tick)(); });
  }
}

std::string Controller::RemoveJobContainersLine(HostState& hs) const {
  return hs.docker->RemoveLabelled(cluster::kJobLabel, plan_.job_id);
}

Status Controller::ReplaceHosts() {
  for (auto& [h_key, host_ptr] : hosts_) {
    const size_t h = h_key;
    if (!host_ptr->replace) continue;
    const std::string old_name = host_ptr->name;
    const cluster::Host old_inventory = input_.hosts[h];
    HostState* old_state = host_ptr.get();
    if (!old_state->lost) {
      // Still reachable (preempted): its watchdog is not needed any more.
      job_.Run(*old_state->exec, DisarmWatchdogCommand(plan_.job_id), [](const Outcome&) {});
    }
    bool placed = false;
    // A spare in its place: connected, preflighted, given the workdir.
    while (!placed && next_spare_ < spec_.spare_hosts.size() && interrupts_ == 0) {
      cluster::Host spare = spec_.spare_hosts[next_spare_++];
      spare.nodes = old_inventory.nodes;
      spare.role = old_inventory.role;
      spare.line = old_inventory.line;
      input_.hosts[h] = spare;
      plan_.hosts[h] = spare;
      Say("replacing " + old_name + " with spare host " + spare.address);
      Status s = Connect({h});
      if (s.ok()) s = Login({hosts_[h].get()});
      if (s.ok()) s = Preflight({hosts_[h].get()});
      // A spare another job holds is not used (its preflight took a hold).
      if (s.ok()) s = SecureHoldsOn(*hosts_[h]);
      if (s.ok()) s = Upload({hosts_[h].get()});
      if (s.ok()) {
        Event(event::kRestarting, spare.address,
              "spare host " + spare.address + " takes the place of " + old_name);
        old_state->superseded = true;
        // The job's holds on the host it left go now (a lost one's go with
        // its watchdog; ReleaseHolds tries again at the end).
        if (old_state->holding && !old_state->lost && old_state->exec) {
          job_.Run(*old_state->exec, fleet::ReleaseHoldsCommand(*old_state->docker, plan_.job_id),
                   [old_state](const Outcome& o) {
                     if (o.ok()) old_state->holding = false;
                   });
        }
        RecordHost(*hosts_[h], old_state->id);
        placed = true;
      } else {
        Say("spare host " + spare.address + " cannot be used: " + s.message());
      }
    }
    if (placed) continue;
    // No spare left: the same host, checked again.
    input_.hosts[h] = old_inventory;
    plan_.hosts[h] = old_inventory;
    const bool was_lost = old_state->lost;
    Say("no spare host left; checking " + old_name + " again");
    Status s = Status::Ok();
    if (was_lost) {
      s = Connect({h});
      if (s.ok()) s = Login({hosts_[h].get()});
      if (s.ok()) s = Preflight({hosts_[h].get()});
      if (s.ok()) s = SecureHoldsOn(*hosts_[h]);
      // Its watchdog may have removed the job's directory meanwhile.
      if (s.ok()) s = Upload({hosts_[h].get()});
    }
    HostState& hs = *hosts_[h];
    std::optional<Outcome> checked;
    if (s.ok()) {
      std::string line = RemoveJobContainersLine(hs);
      if (spec_.preemption && !was_lost) {
        line = "if " + Bounded(spec_.preemption->command, seconds(10)) +
               " >/dev/null 2>&1; then echo 'a preemption notice is still up' >&2; exit 3; fi; " + line;
      }
      CommandGroup group(&loop_, &redact_);
      group.Run(*hs.exec, line, [&](const Outcome& o) { checked = o; });
      RunUntil([&] { return checked.has_value(); }, Now() + spec_.ssh.dead_after + seconds(60));
      if (!checked || !checked->ok()) {
        s = Status::Error(checked ? checked->Reason() : "no answer");
      }
    }
    if (!s.ok()) {
      return Status::Error(old_name + " cannot be used again and no spare host is left: " + s.message());
    }
    hs.replace = false;
    Say(old_name + " checked again: it is used for the restart");
  }
  return Status::Ok();
}

}  // namespace barge::runner::internal
