// The controller's state of one job's hosts and nodes: what
// runner/controller/'s parts read and change. Held in the Controller's host
// set (host_set.h) and attempt (attempt.h); the loop's thread only.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <string>

#include "cluster/plan.h"
#include "container/docker_api.h"
#include "container/log_line.h"
#include "runner/controller/faults.h"
#include "runner/controller/gpu_gate.h"
#include "runner/controller/holds.h"
#include "runner/controller/host_engine.h"
#include "runner/controller/job_observer.h"
#include "runner/controller/leases.h"
#include "runner/controller/preflight.h"
#include "runner/controller/registry_login.h"
#include "runner/remote/docker_commands.h"
#include "runner/remote/engine_streams.h"

namespace barge::runner::internal {

// A host of the job: its identity and its link (what every part uses to
// reach it), then one member per concern, each defined in that concern's
// header.
struct HostState {
  size_t index = 0;  // into the plan's hosts (a spare takes its place's index)
  int id = 0;        // stable for the job: a spare gets a new one
  std::string name;  // as in messages and log prefixes
  cluster::Host inventory;  // its entry (a spare's, once it took a lost host's place)
  std::unique_ptr<ssh::Executor> exec;
  std::unique_ptr<DockerCommands> docker;
  // The job's directory there (NewHostJobDir: drawn at each connect, made
  // by the registry login or the watchdog's arming); empty where it is not
  // known (`barge down` of a job whose controller is gone).
  std::string job_dir;
  // The session died, or the engine stopped answering: nothing more is
  // sent there, and teardown does not wait on it.
  bool lost = false;

  HostEngine engine;  // host_engine.h: its Engine API client, when it has one
  HostImages images;  // preflight.h: the job's images there
  HostLogin login;    // registry_login.h: the registry login
  HostHolds holds;    // holds.h: the job's reservation there
  HostLease lease;    // leases.h: its watchdog
  HostHealth health;  // faults.h: its monitors and whether it is replaced
  HostGpus gpus;      // gpu_gate.h: its GPUs' health, as preflight found it

  HostPhase PhaseOf(Phase p, std::optional<int> rank = std::nullopt) const {
    return HostPhase{p, id, name, rank, std::nullopt};
  }
};

// kLost: its host was lost while it ran; how it ended is unknown.
enum class NodePhase { kPending, kStarting, kRunning, kExited, kLost };

struct NodeState {
  const cluster::NodePlan* plan = nullptr;
  HostState* host = nullptr;
  NodePhase phase = NodePhase::kPending;
  bool run_attempted = false;  // a container may exist on the host
  std::string container_id;
  std::optional<int> exit_code;
  std::string end_reason;  // "exit code 3", "OOMKilled (exit code 137)", ...
  // Of an attempt that has ended (a restart made new nodes): callbacks
  // still in flight for it do nothing.
  bool retired = false;
  bool logs_open = false;
  // Its stage's gate is a log line: the regex, and whether a line matched.
  const std::regex* ready_regex = nullptr;
  bool logged_ready = false;
  // attach: lines stamped at or before this were already kept; drop them.
  std::optional<int64_t> skip_through_ns;
  // The log stream also reports how the container ended
  // (DockerCommands::FollowUntilExit): after a stdout line holding
  // exit_marker (random per stream, unknown to the container), stdout is
  // the report, collected in exit_report.
  std::string exit_marker;
  std::optional<std::string> exit_report;
  // The latest Docker timestamp its log stream gave, and how many lines
  // carried exactly that stamp, per stream: `docker logs -f` (Docker 20.10) can end
  // before the last lines of a container that just exited, so once it ends
  // the rest is read without -f from that stamp on (Controller::CatchUp),
  // skipping what the follow already gave.
  // Per stream (stdout, stderr): Docker gives each on its own channel.
  struct Seen {
    std::optional<int64_t> last_ns;
    int at_last = 0;
  };
  std::array<Seen, 2> seen;
  // While the catch-up read runs, per stream: lines stamped before
  // last_ns, and the first at_last stamped exactly at it, are dropped.
  bool catching_up = false;
  bool caught_up = false;  // the catch-up ran (once per stream)
  std::unique_ptr<container::LineSplitter> out_lines;
  std::unique_ptr<container::LineSplitter> err_lines;
  // node_streams_api.cc: the node's Engine API call in flight (its log follow,
  // then the inspect, wait and catch-up that end it; one at a time).
  container::DockerApi::CallPtr api_call;
  // node_streams_api.cc, on an Engine API host: the node's live log is its attach
  // stream (AttachAndStartWithApi), each line stamped on receipt with the
  // controller's clock, strictly increasing per node (its sequence), and
  // counted per stream so that a gap is filled from `docker logs` by
  // skipping exactly the lines already kept (see the design there).
  struct Live {
    bool on = false;        // lines are stamped on receipt
    bool attached = false;  // they come from the attach (false: a logs read fills a gap)
    int64_t last_stamp_ns = 0;
    std::array<uint64_t, 2> lines{};    // kept, per stream (stdout, stderr)
    std::array<uint64_t, 2> skip{};     // a gap fill's lines still to drop, per stream
    std::array<bool, 2> skipping{};     // a dropped line's continuation pieces follow
    std::array<size_t, 2> last_hash{};  // of the last line kept per stream
    std::function<void()> ended;        // the attach ended before the start's answer
  };
  Live live;

  // With the GPUs it was given (GpusGiven), for the accounting.
  HostPhase PhaseOf(Phase p) const {
    HostPhase out = host->PhaseOf(p, plan->rank);
    out.gpus = GpusGiven(*plan, host->gpus);
    return out;
  }
};

}  // namespace barge::runner::internal
