// TeardownPlan: what a teardown does, on which host, in which order, as a
// value computed from plain facts of the attempt's nodes and hosts (no
// I/O, no clock): which containers are stopped (or killed) where and how,
// which are removed where and with what (the watchdog's disarming, the
// job's holds), whether a host's removal follows its own stop or waits for
// every host's, and which teardown hooks run for which host. Teardown
// (teardown.h) gathers the facts and executes the plan.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "runner/jobfile/job_spec.h"
#include "runner/remote/docker_commands.h"

namespace barge::runner::internal {

// What the plan reads of one node of the attempt.
struct TeardownNode {
  size_t host = 0;             // into the hosts the plan is made from
  std::string container;       // its container's name
  bool run_attempted = false;  // a container may exist on its host
  bool running = false;        // NodePhase::kRunning
};

// What the plan reads of one host.
struct TeardownHost {
  // Lost: left alone (its watchdog removes what it holds once the lease
  // lapses, or `barge reap` does when it comes back).
  bool lost = false;
  bool connected = true;   // it has a session (a host hook needs one)
  bool engine_api = false;  // its engine is reached through the Engine API
  bool watchdog_armed = false;
  bool holding = false;  // the job holds something there
  // The job's holds there by ID (HoldIdsOf its hold reply), where
  // it holds some and the reply names them.
  std::vector<std::string> hold_ids;
};

// What the plan reads of the job and of this teardown.
struct TeardownRules {
  bool graceful = true;  // docker stop; false: docker kill (a second interrupt)
  bool final = true;     // the job is over (no restart follows)
  int grace_seconds = 10;  // stop_grace
  bool artifacts = false;  // the job copies artifacts out of its containers
  bool registry = false;   // a registry logout follows the removal
  bool host_hook = false;  // a teardown.host_command follows the removal
};

// The stop of one host's running containers.
struct TeardownStop {
  size_t host = 0;                 // into the hosts the plan was made from
  std::vector<std::string> names;  // its running containers, in the nodes' order
  // One Engine API stop per container (graceful, on a host with the API);
  // otherwise one command line (StopLine).
  bool with_api = false;
};

// The removal of one host's containers.
struct TeardownRemoval {
  size_t host = 0;
  std::vector<std::string> names;  // every container of the attempt there, in the nodes' order
  // The watchdog is disarmed after the removal, in the same command (the
  // job's last teardown, the watchdog armed, and neither a registry logout
  // nor a host hook still to come: they need the job's directory).
  bool disarm = false;
  // The job's holds go with its containers (the job's last teardown,
  // something held there).
  bool release = false;
  std::vector<std::string> hold_ids;  // released by ID (release, and the reply names them)
  // Through the Engine API (the host has it, and holds to release can be
  // named): every name and hold ID, then everything labelled with the job
  // when one would not go; otherwise one command line (RemoveLine).
  bool with_api = false;
};

struct TeardownPlan {
  bool graceful = true;
  int grace_seconds = 10;
  std::vector<TeardownStop> stops;        // hosts with a running container, in the hosts' order
  std::vector<TeardownRemoval> removals;  // hosts with a container of the attempt, in the hosts' order
  // A host's removal starts as soon as that host's stop has ended and its
  // nodes have drained (hosts do not wait on each other). Not with
  // artifacts: their last copy is taken from every stopped container
  // before any removal.
  bool pipelined = true;
  bool run_hooks = true;  // the job is over: the teardown hooks run last

  // The stop of host `host`, or nullptr when none of its containers runs.
  const TeardownStop* StopOf(size_t host) const;
};

// The plan for `nodes` on `hosts` under `rules`. Hosts that are lost, and
// nodes whose run was never attempted, have no part in it.
TeardownPlan PlanTeardown(const std::vector<TeardownNode>& nodes, const std::vector<TeardownHost>& hosts,
                          const TeardownRules& rules);

// `stop` as one command line: docker stop -t GRACE, or docker kill.
std::string StopLine(const DockerCommands& docker, const TeardownPlan& plan, const TeardownStop& stop);
// `removal` as one command line on its host (job `job_id`, its directory
// there `job_dir`): the containers removed, the holds released (by ID, or
// every hold of the job by its label), then the watchdog disarmed; it
// exits non-zero when the removal (or the release) failed.
std::string RemoveLine(const DockerCommands& docker, const TeardownRemoval& removal, const std::string& job_id,
                       const std::string& job_dir);
// The command line that follows `removal` through the Engine API: the
// watchdog's disarming, or empty.
std::string AfterApiRemovalLine(const TeardownRemoval& removal, const std::string& job_dir);

// One teardown hook for one host.
struct TeardownHook {
  enum class Where { kHost, kLocal };  // on the host over SSH, or on this machine

  size_t host = 0;  // into the hosts the hooks were planned for
  Where where = Where::kLocal;
  std::string hook;  // the job file's text, before SubstituteHook
  // A host_command for a host that is lost or has no session: not run (its
  // watchdog runs it), and said.
  bool skipped = false;

  // As messages name it: "host_command" or "local_command".
  const char* kind() const { return where == Where::kHost ? "host_command" : "local_command"; }
};

// The job's teardown hooks for every host in `hosts`, host by host: its
// host_command, then its local_command.
std::vector<TeardownHook> PlanTeardownHooks(const TeardownHooks& hooks, const std::vector<TeardownHost>& hosts);

}  // namespace barge::runner::internal
