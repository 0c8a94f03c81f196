// Teardown (teardown.h): the plan made from the attempt's nodes and hosts,
// then executed: stop, drain, last artifacts, remove, hooks.
#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "runner/controller/teardown.h"
#include "runner/controller/job_state.h"
#include "runner/remote/reservation.h"
#include "runner/remote/teardown_hooks.h"

namespace barge::runner::internal {

// One Run's execution of its plan. Callbacks of its groups refer to it; the
// groups are its last members, destroyed first, which drops every callback
// not yet run (CommandGroup).
struct Teardown::Execution {
  Execution(ssh::EventLoop* loop, const Redactor* redact, const TeardownPlan& p, std::vector<HostState*> h,
            const std::vector<std::unique_ptr<NodeState>>& nodes)
      : plan(p), hosts(std::move(h)), nodes_of(hosts.size()), has_stop(hosts.size()), stops(loop, redact),
        removals(loop, redact) {
    for (const TeardownStop& stop : plan.stops) has_stop[stop.host] = true;
    std::map<const HostState*, size_t> at;
    for (size_t i = 0; i < hosts.size(); ++i) at[hosts[i]] = i;
    for (const auto& n : nodes) {
      if (auto it = at.find(n->host); it != at.end()) nodes_of[it->second].push_back(n.get());
    }
  }

  const TeardownPlan& plan;
  const std::vector<HostState*> hosts;  // the plan's hosts, by its positions
  // The attempt's nodes on each of `hosts` (by position), so that a host's
  // readiness is judged on its own nodes: on every turn of the loop, with
  // a thousand hosts, a scan of every node per host is a million steps.
  std::vector<std::vector<const NodeState*>> nodes_of;
  std::vector<bool> has_stop;  // the host has a stop in the plan
  std::set<size_t> stopped;   // hosts whose stop command (or calls) ended
  std::set<size_t> removing;  // hosts whose removal began
  bool remove_step = false;   // the progress line shows the removal
  CommandGroup stops;
  CommandGroup removals;
};

void Teardown::Run(bool graceful, bool final) {
  // A lost host is left alone: its watchdog removes what it holds once the
  // lease lapses (or `barge reap` does when it comes back).
  attempt_.tearing_down = true;
  ++attempt_.generation;  // the monitors stop
  SetStatus(JobStatus::kCompleting);
  std::vector<HostState*> hosts = HostsOfTheAttempt();
  const TeardownPlan plan = PlanTeardown(NodeFacts(hosts), HostFacts(hosts), Rules(graceful, final));
  Execution ex(&ctx_.loop, &ctx_.redact, plan, std::move(hosts), attempt_.nodes);
  StartStops(ex);
  WaitForStops(ex);
  if (!ex.remove_step) ctx_.observer.StepEnded(Phase::kStop);
  ex.stops.Cancel();
  // Last copy of the artifacts: the containers have stopped but exist.
  artifacts_.FinalArtifacts();
  RemoveTheRest(ex);
  ctx_.observer.StepEnded(Phase::kRemove);
  if (plan.run_hooks) RunTeardownHooks();
  // What goes to s3:// is sent from the controller's copies: the hosts are
  // not held for it. Before a restart it goes on in the background.
  if (final) artifacts_.SendToStorage();
  Event(event::kTornDown, std::nullopt, final ? "" : "before a restart");
}

// --- The plan's facts.

std::vector<HostState*> Teardown::HostsOfTheAttempt() const {
  std::vector<HostState*> hosts;
  for (const auto& n : attempt_.nodes) {
    if (n->host && std::find(hosts.begin(), hosts.end(), n->host) == hosts.end()) hosts.push_back(n->host);
  }
  std::sort(hosts.begin(), hosts.end(), [](const HostState* a, const HostState* b) { return a->id < b->id; });
  return hosts;
}

std::vector<TeardownNode> Teardown::NodeFacts(const std::vector<HostState*>& hosts) const {
  std::vector<TeardownNode> facts;
  for (const auto& n : attempt_.nodes) {
    if (!n->host) continue;
    const size_t host = std::find(hosts.begin(), hosts.end(), n->host) - hosts.begin();
    facts.push_back({host, n->plan->container.name, n->run_attempted, n->phase == NodePhase::kRunning});
  }
  return facts;
}

// (Read once, before the stops: nothing but the teardown changes a host's
// watchdog, holds or Engine API client while it runs.)
std::vector<TeardownHost> Teardown::HostFacts(const std::vector<HostState*>& hosts) const {
  std::vector<TeardownHost> facts;
  for (const HostState* hs : hosts) {
    TeardownHost f;
    f.lost = hs->lost;
    f.connected = hs->exec != nullptr;
    f.engine_api = hs->engine.api != nullptr;
    f.watchdog_armed = hs->lease.armed;
    f.holding = hs->holds.holding;
    if (hs->holds.holding && hs->holds.reply) f.hold_ids = HoldIdsOf(*hs->holds.reply, plan_.job_id);
    facts.push_back(std::move(f));
  }
  return facts;
}

TeardownRules Teardown::Rules(bool graceful, bool final) const {
  TeardownRules rules;
  rules.graceful = graceful;
  rules.final = final;
  rules.grace_seconds = static_cast<int>(std::chrono::duration_cast<seconds>(ctx_.spec.stop_grace).count());
  rules.artifacts = !ctx_.spec.artifacts.empty();
  rules.registry = ctx_.spec.registry.has_value();
  rules.host_hook = ctx_.spec.teardown.host_command.has_value();
  return rules;
}

// --- Stops and removals.

void Teardown::StartStops(Execution& ex) {
  const TeardownPlan& plan = ex.plan;
  if (plan.stops.empty()) return;
  size_t count = 0;
  for (const TeardownStop& stop : plan.stops) count += stop.names.size();
  Say(std::string(plan.graceful ? "stopping " : "killing ") + std::to_string(count) + " container(s)");
  ctx_.observer.StepBegan(Phase::kStop, plan.graceful ? "stopping" : "killing", static_cast<int>(plan.stops.size()));
  for (const TeardownStop& stop : plan.stops) {
    HostState* hs = ex.hosts[stop.host];
    Began(hs->PhaseOf(Phase::kStop));
    auto on_stopped = [this, hs, &ex, at = stop.host](const Outcome& o) {
      ex.stopped.insert(at);
      Ended(hs->PhaseOf(Phase::kStop), o.ok(), o.ok() ? "" : o.Reason());
    };
    if (stop.with_api) {
      StopWithApi(ex.stops, *hs, stop.names, plan.grace_seconds, on_stopped);
    } else {
      ex.stops.Run(*hs->exec, StopLine(*hs->docker, plan, stop), on_stopped);
    }
  }
}

// Waits for every stop and every stream's end for as long as they keep
// coming: on hundreds of saturated hosts that takes longer than any fixed
// bound, and removing a container before its stream and exit report are
// in loses how it ended. It gives up once a whole stop_grace + 15 s passes
// with no host or node moving on. A graceful teardown also ends at the
// next interrupt.
void Teardown::WaitForStops(Execution& ex) {
  const int interrupts_before = ctx_.interrupts;
  auto finished = [&] {
    StartReadyRemovals(ex);
    return (AllDrained() && ex.stops.idle()) || (ex.plan.graceful && ctx_.interrupts > interrupts_before);
  };
  for (;;) {
    const size_t before = Moved(ex);
    if (RunUntil(finished, Now() + ctx_.spec.stop_grace + seconds(15))) break;
    if (Moved(ex) == before) break;
  }
}

// A host's containers are removed as soon as that host has stopped them
// and their log streams and exit watches have ended: hosts do not wait on
// each other (on hundreds of hosts the slowest would hold up the rest).
// With artifacts every host waits for every stop (plan.pipelined).
void Teardown::StartReadyRemovals(Execution& ex) {
  if (!ex.plan.pipelined) return;
  for (const TeardownRemoval& r : ex.plan.removals) {
    if (ex.removing.count(r.host) || (ex.has_stop[r.host] && !ex.stopped.count(r.host)) ||
        !std::all_of(ex.nodes_of[r.host].begin(), ex.nodes_of[r.host].end(), &Drained)) {
      continue;
    }
    StartRemoval(ex, r);
  }
}

void Teardown::StartRemoval(Execution& ex, const TeardownRemoval& removal) {
  if (!ex.remove_step) {
    // The progress line shows one step: removal takes over from the stops
    // as soon as the first host's containers go.
    ex.remove_step = true;
    ctx_.observer.StepEnded(Phase::kStop);
    ctx_.observer.StepBegan(Phase::kRemove, "removing containers", static_cast<int>(ex.plan.removals.size()));
  }
  HostState* hs = ex.hosts[removal.host];
  ex.removing.insert(removal.host);
  if (removal.release) hs->lease.releasing = true;
  Began(hs->PhaseOf(Phase::kRemove));
  auto on_removed = [this, hs, disarm = removal.disarm, release = removal.release](const Outcome& o) {
    Ended(hs->PhaseOf(Phase::kRemove), o.ok(), o.ok() ? "" : o.Reason());
    if (disarm && o.exit.known()) hs->lease.armed = false;
    if (release && o.ok()) hs->holds.holding = false;
    if (!o.ok()) Say(hs->name + ": removing containers failed: " + o.Reason());
  };
  if (removal.with_api) {
    std::vector<std::string> targets = removal.names;
    targets.insert(targets.end(), removal.hold_ids.begin(), removal.hold_ids.end());
    RemoveWithApi(ex.removals, *hs, targets, /*sweep=*/removal.release,
                  AfterApiRemovalLine(removal, hs->job_dir), on_removed);
    return;
  }
  ex.removals.Run(*hs->exec, RemoveLine(*hs->docker, removal, plan_.job_id, hs->job_dir), on_removed);
}

void Teardown::RemoveTheRest(Execution& ex) {
  for (const TeardownRemoval& r : ex.plan.removals) {
    if (!ex.removing.count(r.host)) StartRemoval(ex, r);
  }
  if (!ex.remove_step) {
    ctx_.observer.StepBegan(Phase::kRemove, "removing containers", 0);
  }
  if (!RunWhileProgressing(ex.removals, seconds(60))) {
    Say("removing containers did not finish in time; run `docker ps -a --filter label=barge.job=" +
        plan_.job_id + "` on the hosts");
  }
}

bool Teardown::Drained(const NodeState* n) {
  return !n->run_attempted || n->host->lost || (n->phase != NodePhase::kRunning && !n->logs_open);
}

bool Teardown::AllDrained() const {
  return std::all_of(attempt_.nodes.begin(), attempt_.nodes.end(), [](const auto& n) { return Drained(n.get()); });
}

size_t Teardown::Moved(const Execution& ex) const {
  size_t n = ex.stopped.size() + ex.removing.size();
  for (const auto& node : attempt_.nodes) n += node->phase != NodePhase::kRunning && !node->logs_open;
  return n;
}

// --- Hooks.

void Teardown::RunTeardownHooks() {
  if (!ctx_.spec.teardown.host_command && !ctx_.spec.teardown.local_command) return;
  // Every host the job used: the current ones and those spares replaced (a
  // lost VM is still worth its terminate call).
  std::vector<HostState*> used = hosts_.All();
  for (auto& old : hosts_.retired) {
    if (old->health.superseded) used.push_back(old.get());
  }
  CommandGroup group(&ctx_.loop, &ctx_.redact);
  for (const TeardownHook& hook : PlanTeardownHooks(ctx_.spec.teardown, HostFacts(used))) {
    const HostState& host = *used[hook.host];
    if (hook.skipped) {
      Say("teardown host_command for " + host.name + " not run: the host is lost (its watchdog runs it)");
    } else {
      RunHook(group, hook.where == TeardownHook::Where::kHost ? *host.exec : Local(), hook.kind(), hook.hook,
              host);
    }
  }
  if (!RunUntil([&] { return group.idle(); }, Now() + seconds(300))) {
    Say("teardown hooks did not finish within 300 s");
  }
}

void Teardown::RunHook(CommandGroup& group, ssh::Executor& where, const std::string& kind, const std::string& hook,
                       const HostState& host) {
  Result<std::string> line = SubstituteHook(hook, host.inventory, plan_.job_id, host.job_dir);
  const std::string for_host = host.name;
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
