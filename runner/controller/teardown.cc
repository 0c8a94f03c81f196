// Teardown (teardown.h): stop, drain, last artifacts, remove, hooks.
#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "runner/controller/teardown.h"
#include "runner/controller/job_state.h"
#include "runner/remote/teardown_hooks.h"
#include "runner/remote/watchdog.h"

namespace barge::runner::internal {

void Teardown::Run(bool graceful, bool final) {
  // A lost host is left alone: its watchdog removes what it holds once the
  // lease lapses (or `barge reap` does when it comes back).
  tearing_down_ = true;
  ++generation_;  // the monitors stop
  SetStatus(JobStatus::kCompleting);
  std::map<HostState*, std::vector<std::string>> running, attempted;
  for (auto& n : nodes_) {
    if (!n->run_attempted || n->host->lost) continue;
    attempted[n->host].push_back(n->plan->container.name);
    if (n->phase == NodePhase::kRunning) running[n->host].push_back(n->plan->container.name);
  }
  const int grace = static_cast<int>(
      std::chrono::duration_cast<seconds>(spec_.stop_grace).count());
  std::set<HostState*> stopped;  // its stop command ended
  CommandGroup group(&loop_, &redact_);
  if (!running.empty()) {
    size_t count = 0;
    for (auto& [host, names] : running) count += names.size();
    Say(std::string(graceful ? "stopping " : "killing ") + std::to_string(count) + " container(s)");
    observer_.StepBegan(Phase::kStop, graceful ? "stopping" : "killing", static_cast<int>(running.size()));
    for (auto& [host, names] : running) {
      HostState* hs = host;
      Began(hs->PhaseOf(Phase::kStop));
      auto on_stopped = [this, hs, &stopped](const Outcome& o) {
        stopped.insert(hs);
        Ended(hs->PhaseOf(Phase::kStop), o.ok(), o.ok() ? "" : o.Reason());
      };
      if (graceful && hs->engine.api) {
        StopWithApi(group, *hs, names, grace, on_stopped);
      } else {
        group.Run(*hs->exec, graceful ? hs->docker->Stop(names, grace) : hs->docker->Kill(names), on_stopped);
      }
    }
  }
  // A host's containers are removed as soon as that host has stopped them
  // and their log streams and exit watches have ended: hosts do not wait on
  // each other (on hundreds of hosts the slowest would hold up the rest).
  // Artifacts are copied from stopped containers before any removal, so
  // with artifacts every host waits for every stop. On the job's last
  // teardown (no registry logout or host hook still to come) the watchdog
  // is disarmed in the same command.
  auto host_drained = [&](HostState* hs) {
    return std::all_of(nodes_.begin(), nodes_.end(), [hs](const auto& n) {
      return n->host != hs || !n->run_attempted || n->host->lost ||
             (n->phase != NodePhase::kRunning && !n->logs_open);
    });
  };
  auto drained = [&] {
    return std::all_of(nodes_.begin(), nodes_.end(), [](const auto& n) {
      return !n->run_attempted || n->host->lost ||
             (n->phase != NodePhase::kRunning && !n->logs_open);
    });
  };
  const bool pipelined = spec_.artifacts.empty();
  // (Not when the job has a host teardown hook, which runs after the
  // removal and may read the job's directory on the host, nor with a
  // registry, whose logout needs it.)
  const bool disarm_with_remove = final && !spec_.registry && !spec_.teardown.host_command;
  CommandGroup removals(&loop_, &redact_);
  std::set<HostState*> removing;
  bool remove_step = false;
  auto remove = [&](HostState* hs, const std::vector<std::string>& names) {
    if (!remove_step) {
      // The progress line shows one step: removal takes over from the stops
      // as soon as the first host's containers go.
      remove_step = true;
      observer_.StepEnded(Phase::kStop);
      observer_.StepBegan(Phase::kRemove, "removing containers", static_cast<int>(attempted.size()));
    }
    removing.insert(hs);
    Began(hs->PhaseOf(Phase::kRemove));
    std::string line = hs->docker->Remove(names);
    const bool disarm = disarm_with_remove && hs->lease.armed;
    // The job's holds go with its containers on its last teardown.
    const bool release = final && hs->holds.holding;
    auto on_removed = [this, hs, disarm, release](const Outcome& o) {
      Ended(hs->PhaseOf(Phase::kRemove), o.ok(), o.ok() ? "" : o.Reason());
      if (disarm && o.exit.known()) hs->lease.armed = false;
      if (release && o.ok()) hs->holds.holding = false;
      if (!o.ok()) Say(hs->name + ": removing containers failed: " + o.Reason());
    };
    const std::vector<std::string> hold_ids =
        release && hs->holds.reply ? fleet::HoldIdsOf(*hs->holds.reply, plan_.job_id) : std::vector<std::string>{};
    if (hs->engine.api && (!release || !hold_ids.empty())) {
      std::vector<std::string> targets = names;
      targets.insert(targets.end(), hold_ids.begin(), hold_ids.end());
      RemoveWithApi(removals, *hs, targets, /*sweep=*/release, disarm ? DisarmWatchdogCommand(plan_.job_id, hs->job_dir) : "",
                    on_removed);
      return;
    }
    // (No `exit` here: the disarming below must still run.)
    if (release) {
      if (!hold_ids.empty()) {
        line = fleet::RemoveWithHoldsCommand(*hs->docker, names, hold_ids, plan_.job_id);
      } else {
        line = "{ " + line + "; s=$?; " + fleet::ReleaseHoldsCommand(*hs->docker, plan_.job_id) +
               " || s=1; [ $s -eq 0 ]; }";
      }
    }
    if (disarm) line = "{ " + line + "; s=$?; " + DisarmWatchdogCommand(plan_.job_id, hs->job_dir) + "; exit $s; }";
    removals.Run(*hs->exec, line, on_removed);
  };
  auto start_ready_removals = [&] {
    if (!pipelined) return;
    for (auto& [host, names] : attempted) {
      if (removing.count(host) || (running.count(host) && !stopped.count(host)) || !host_drained(host)) continue;
      remove(host, names);
    }
  };
  // Waits for every stop and every stream's end for as long as they keep
  // coming: on hundreds of saturated hosts that takes longer than any fixed
  // bound, and removing a container before its stream and exit report are
  // in loses how it ended. It gives up once a whole stop_grace + 15 s
  // passes with no host or node moving on.
  const int interrupts_before = interrupts_;
  auto moved = [&] {
    size_t n = stopped.size() + removing.size();
    for (const auto& node : nodes_) n += node->phase != NodePhase::kRunning && !node->logs_open;
    return n;
  };
  auto finished = [&] {
    start_ready_removals();
    return (drained() && group.idle()) || (graceful && interrupts_ > interrupts_before);
  };
  for (;;) {
    const size_t before = moved();
    if (RunUntil(finished, Now() + spec_.stop_grace + seconds(15))) break;
    if (moved() == before) break;
  }
  if (!remove_step) observer_.StepEnded(Phase::kStop);
  group.Cancel();
  // Last copy of the artifacts: the containers have stopped but exist.
  artifacts_.FinalArtifacts();
  for (auto& [host, names] : attempted) {
    if (!removing.count(host)) remove(host, names);
  }
  if (!remove_step) {
    observer_.StepBegan(Phase::kRemove, "removing containers", 0);
  }
  if (!RunWhileProgressing(removals, seconds(60))) {
    Say("removing containers did not finish in time; run `docker ps -a --filter label=barge.job=" +
        plan_.job_id + "` on the hosts");
  }
  observer_.StepEnded(Phase::kRemove);
  if (final) RunTeardownHooks();
  Event(event::kTornDown, std::nullopt, final ? "" : "before a restart");
}

void Teardown::RunTeardownHooks() {
  if (!spec_.teardown.host_command && !spec_.teardown.local_command) return;
  CommandGroup group(&loop_, &redact_);
  auto run = [&](ssh::Executor& where, const std::string& kind, const std::string& hook,
                 const cluster::Host& host, const std::string& for_host, const std::string& job_dir) {
    Result<std::string> line = SubstituteHook(hook, host, plan_.job_id, job_dir);
    if (!line.ok()) {
      Say("teardown " + kind + " for " + for_host + " not run: " + line.status().message());
      return;
    }
    group.Run(where, *line, [this, kind, for_host](const Outcome& o) {
      if (o.ok()) {
        Say("teardown " + kind + " for " + for_host + ": ok");
      } else {
        Say("teardown " + kind + " for " + for_host + " failed: " + o.Reason());
      }
    });
  };
  // Every host the job used: the current ones and those spares replaced (a
  // lost VM is still worth its terminate call).
  std::vector<HostState*> used = AllHosts();
  for (auto& old : retired_) {
    if (old->health.superseded) used.push_back(old.get());
  }
  for (HostState* host : used) {
    const cluster::Host& inventory = host->inventory;
    if (spec_.teardown.host_command && (host->lost || !host->exec)) {
      Say("teardown host_command for " + host->name + " not run: the host is lost (its watchdog runs it)");
    } else if (spec_.teardown.host_command) {
      run(*host->exec, "host_command", *spec_.teardown.host_command, inventory, host->name, host->job_dir);
    }
    if (spec_.teardown.local_command) {
      run(Local(), "local_command", *spec_.teardown.local_command, inventory, host->name, host->job_dir);
    }
  }
  if (!RunUntil([&] { return group.idle(); }, Now() + seconds(300))) {
    Say("teardown hooks did not finish within 300 s");
  }
}

// --- Through the Engine API.

void Teardown::StopWithApi(CommandGroup& group, HostState& hs, const std::vector<std::string>& names,
                             int grace_seconds, CommandGroup::Done done) {
  struct State {
    size_t left = 0;
    std::optional<Outcome> failed;  // the first failure
  };
  auto st = std::make_shared<State>();
  st->left = names.size();
  for (const std::string& name : names) {
    group.Api(
        [&hs, name, grace_seconds](CommandGroup::Finish finish) {
          return hs.engine.api->Stop(name, grace_seconds,
                              [finish](container::Reply<container::NoContent> r) { finish(ApiOutcome(r)); });
        },
        [st, done](const Outcome& o) {
          if (!o.ok() && !st->failed) st->failed = o;
          if (--st->left == 0) done(st->failed ? *st->failed : o);
        });
  }
}

void Teardown::RemoveWithApi(CommandGroup& group, HostState& hs, const std::vector<std::string>& names,
                               bool sweep, const std::string& then_line, CommandGroup::Done done) {
  HostState* h = &hs;
  struct State {
    size_t left = 0;
    std::optional<Outcome> failed;  // the first failure that is not "no such container"
  };
  // Removes `targets` (names or IDs; one already gone is fine), then `next`.
  auto remove_all = std::make_shared<std::function<void(std::vector<std::string>, std::function<void(std::optional<Outcome>)>)>>();
  *remove_all = [&group, h](std::vector<std::string> targets, std::function<void(std::optional<Outcome>)> next) {
    if (targets.empty()) return next(std::nullopt);
    auto st = std::make_shared<State>();
    st->left = targets.size();
    for (const std::string& t : targets) {
      group.Api(
          [h, t](CommandGroup::Finish finish) {
            return h->engine.api->Remove(t, /*force=*/true, [finish](container::Reply<container::NoContent> r) {
              if (r.not_found()) {
                Outcome gone;
                gone.exit.code = 0;
                return finish(gone);
              }
              finish(ApiOutcome(r));
            });
          },
          [st, next](const Outcome& o) {
            if (!o.ok() && !st->failed) st->failed = o;
            if (--st->left == 0) next(st->failed);
          });
    }
  };
  // The last step: the shell line (disarming the watchdog), if any; the
  // outcome is the removal's, known once that line has run.
  auto finish = [&group, h, then_line, done](std::optional<Outcome> failed) {
    Outcome removal;
    removal.exit.code = 0;
    if (failed) removal = *failed;
    if (then_line.empty()) return done(removal);
    group.Run(*h->exec, then_line, [removal, done](const Outcome& o) {
      Outcome out = removal;
      if (!o.exit.known()) out.exit = o.exit;
      done(out);
    });
  };
  const std::string job = plan_.job_id;
  (*remove_all)(names, [&group, h, sweep, job, remove_all, finish](std::optional<Outcome> failed) {
    if (!failed || !sweep) return finish(failed);
    // Something would not go: everything labelled with the job goes by a
    // listing instead (as the CLI path's fallback).
    group.Api(
        [h, job](CommandGroup::Finish list_finish) {
          return h->engine.api->ListContainers({"barge.job=" + job},
                                        [list_finish](container::Reply<std::vector<container::PsEntry>> r) {
                                          Outcome o = ApiOutcome(r);
                                          if (r.ok()) {
                                            for (const container::PsEntry& e : *r.value) o.out += e.id + "\n";
                                          }
                                          list_finish(o);
                                        });
        },
        [remove_all, finish](const Outcome& listed) {
          if (!listed.ok()) return finish(listed);
          std::vector<std::string> ids;
          size_t pos = 0;
          while (pos < listed.out.size()) {
            const size_t nl = listed.out.find('\n', pos);
            ids.push_back(listed.out.substr(pos, nl - pos));
            pos = nl + 1;
          }
          (*remove_all)(ids, finish);
        });
  });
}

}  // namespace barge::runner::internal
