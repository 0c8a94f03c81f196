// TeardownPlan (teardown_plan.h): the plan and its command lines.
#include "runner/controller/teardown_plan.h"

#include <utility>

#include "runner/remote/reservation.h"
#include "runner/remote/watchdog.h"

namespace barge::runner::internal {

const TeardownStop* TeardownPlan::StopOf(size_t host) const {
  for (const TeardownStop& s : stops) {
    if (s.host == host) return &s;
  }
  return nullptr;
}

TeardownPlan PlanTeardown(const std::vector<TeardownNode>& nodes, const std::vector<TeardownHost>& hosts,
                          const TeardownRules& rules) {
  TeardownPlan plan;
  plan.graceful = rules.graceful;
  plan.grace_seconds = rules.grace_seconds;
  plan.pipelined = !rules.artifacts;
  plan.run_hooks = rules.final;
  std::vector<std::vector<std::string>> running(hosts.size()), attempted(hosts.size());
  for (const TeardownNode& n : nodes) {
    if (!n.run_attempted || hosts[n.host].lost) continue;
    attempted[n.host].push_back(n.container);
    if (n.running) running[n.host].push_back(n.container);
  }
  const bool disarm_with_remove = rules.final && !rules.registry && !rules.host_hook;
  for (size_t h = 0; h < hosts.size(); ++h) {
    const TeardownHost& host = hosts[h];
    if (!running[h].empty()) {
      plan.stops.push_back({h, running[h], rules.graceful && host.engine_api});
    }
    if (attempted[h].empty()) continue;
    TeardownRemoval r;
    r.host = h;
    r.names = attempted[h];
    r.disarm = disarm_with_remove && host.watchdog_armed;
    r.release = rules.final && host.holding;
    if (r.release) r.hold_ids = host.hold_ids;
    r.with_api = host.engine_api && (!r.release || !r.hold_ids.empty());
    plan.removals.push_back(std::move(r));
  }
  return plan;
}

std::string StopLine(const DockerCommands& docker, const TeardownPlan& plan, const TeardownStop& stop) {
  return plan.graceful ? docker.Stop(stop.names, plan.grace_seconds) : docker.Kill(stop.names);
}

std::string RemoveLine(const DockerCommands& docker, const TeardownRemoval& removal, const std::string& job_id,
                       const std::string& job_dir) {
  // (No `exit` but the last: the disarming must still run.)
  std::string line = docker.Remove(removal.names);
  if (removal.release) {
    if (!removal.hold_ids.empty()) {
      line = RemoveWithHoldsCommand(docker, removal.names, removal.hold_ids, job_id);
    } else {
      line = "{ " + line + "; s=$?; " + ReleaseHoldsCommand(docker, job_id) + " || s=1; [ $s -eq 0 ]; }";
    }
  }
  if (removal.disarm) line = "{ " + line + "; s=$?; " + DisarmWatchdogCommand(job_dir) + "; exit $s; }";
  return line;
}

std::string AfterApiRemovalLine(const TeardownRemoval& removal, const std::string& job_dir) {
  return removal.disarm ? DisarmWatchdogCommand(job_dir) : "";
}

std::vector<TeardownHook> PlanTeardownHooks(const TeardownHooks& hooks, const std::vector<TeardownHost>& hosts) {
  std::vector<TeardownHook> out;
  for (size_t h = 0; h < hosts.size(); ++h) {
    if (hooks.host_command) {
      const bool unreachable = hosts[h].lost || !hosts[h].connected;
      out.push_back({h, TeardownHook::Where::kHost, *hooks.host_command, unreachable});
    }
    if (hooks.local_command) out.push_back({h, TeardownHook::Where::kLocal, *hooks.local_command, false});
  }
  return out;
}

}  // namespace barge::runner::internal
