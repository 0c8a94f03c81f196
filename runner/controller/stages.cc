// Stages (stages.h): the launch, stage by stage.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "container/create_body.h"
#include "container/docker_args.h"
#include "container/inspect.h"
#include "container/log_line.h"
#include "container/proc_net.h"
#include "container/timestamp.h"
#include "runner/controller/job_state.h"
#include "runner/controller/stages.h"

namespace barge::runner::internal {

namespace {

// "the head" or "node 3": what messages call a node.
std::string NodeNoun(const NodeState& n) {
  return n.plan->rank == 0 ? "the head" : "node " + std::to_string(n.plan->rank);
}

}  // namespace


Status Stages::RunStages() {
  gate_regexes_.clear();
  std::vector<NodeState*> started;
  for (const cluster::LaunchStage& stage : plan_.stages) {
    // A later stage starts only while every node started so far still runs
    // (the head may also have finished the job already), and nothing ended
    // the attempt.
    if (ctx_.interrupts > 0 || attempt_.fault) return Status::Ok();
    for (NodeState* n : started) {
      if (n->phase != NodePhase::kRunning) return Status::Ok();
    }
    std::vector<NodeState*> nodes;
    for (int rank : stage.ranks) nodes.push_back(attempt_.nodes[rank].get());
    if (stage.gate.kind == cluster::ReadinessProbe::Kind::kLog) {
      // Validated by Execute before the first attempt.
      gate_regexes_.emplace_back(stage.gate.log_regex, std::regex::ECMAScript);
      for (NodeState* n : nodes) n->ready_regex = &gate_regexes_.back();
    }
    const std::string step = stage.name == "head" ? "starting the head" : "starting " + stage.name;
    if (Status s = StartNodes(nodes, step); !s.ok()) return s;
    for (NodeState* n : nodes) {
      if (Status s = AwaitGate(*n, stage.gate); !s.ok()) return s;
    }
    started.insert(started.end(), nodes.begin(), nodes.end());
  }
  return Status::Ok();
}

Status Stages::StartNodes(const std::vector<NodeState*>& nodes, const std::string& step) {
  CommandGroup group(&ctx_.loop, &ctx_.redact);
  std::vector<std::string> errors;
  ctx_.observer.StepBegan(Phase::kStart, step, static_cast<int>(nodes.size()));
  for (NodeState* n : nodes) {
    n->phase = NodePhase::kStarting;
    n->run_attempted = true;
    Began(n->PhaseOf(Phase::kStart));
    auto failed = [&, n](const Outcome& o) {
      errors.push_back("node " + std::to_string(n->plan->rank) + " (" + n->plan->role + ") on " +
                       n->host->name + " did not start: " + o.Reason());
      n->phase = NodePhase::kExited;
      Ended(n->PhaseOf(Phase::kStart), false, o.Reason());
    };
    auto running = [&, n] {
      Ended(n->PhaseOf(Phase::kStart), true);
      n->host->health.engine_heard = Now();  // its engine answered: no probe due yet
      n->phase = NodePhase::kRunning;
      Began(n->PhaseOf(Phase::kRunning));
      RecordNode(*n, attempt_.sink.get());
    };
    // An Engine API host: the container made through the API (or with
    // `docker create` where only the CLI can say what the job file asks:
    // run_options), then attached and started through the API (the attach
    // is the node's live log: node_streams_api.cc). Else `docker run -d`, then the
    // log stream.
    const bool via_api = n->host->engine.api != nullptr;
    auto made = [&, n, via_api, failed, running](const Outcome& o) {
      if (!o.ok()) return failed(o);
      n->container_id = Trim(o.out);
      if (!via_api) {
        running();
        streams_.StreamLogs(*n, /*report_exit=*/true);
        return;
      }
      streams_.AttachAndStartWithApi(group, *n, [n, failed, running](const Outcome& started) {
        if (!started.ok()) return failed(started);
        running();
        // The attach ended before the start's answer came.
        if (auto ended = std::move(n->live.ended)) {
          n->live.ended = nullptr;
          ended();
        }
      });
    };
    if (Result<std::string> body = container::CreateBody(n->plan->container); via_api && body.ok()) {
      group.Api(
          [n, b = std::move(*body)](CommandGroup::Finish finish) {
            return n->host->engine.api->Create(n->plan->container.name, b,
                                        [finish](const container::Reply<std::string>& r) {
                                          Outcome o = ApiOutcome(r);
                                          if (r.ok()) o.out = *r.value;
                                          finish(o);
                                        });
          },
          made);
      continue;
    }
    const DockerCommands& docker = *n->host->docker;
    group.Run(*n->host->exec, via_api ? docker.Create(n->plan->container) : docker.Run(n->plan->container),
              made);
  }
  // Every start is waited for while its host answers, an interrupt or a
  // fault elsewhere too: a start dropped on a reachable host would make its
  // container after teardown's removal. A node whose host is lost meanwhile
  // (a frozen engine may never answer its start) is not waited for: it is
  // kLost, and its host's watchdog removes what the start made.
  auto only_lost_left = [&] {
    return std::none_of(nodes.begin(), nodes.end(), [](const NodeState* n) { return n->phase == NodePhase::kStarting; });
  };
  bool done = RunWhileProgressing(group, seconds(300), only_lost_left);
  for (NodeState* n : nodes) {
    if (n->phase == NodePhase::kStarting) Ended(n->PhaseOf(Phase::kStart), false, "did not finish in time");
  }
  ctx_.observer.StepEnded(Phase::kStart);
  if (!done) errors.push_back("starting containers did not finish: no `docker run` ended for 300 s");
  if (errors.empty()) return Status::Ok();
  std::string msg;
  for (const auto& e : errors) msg += (msg.empty() ? "" : "\n  ") + e;
  return Status::Error(msg);
}

Status Stages::AwaitGate(NodeState& node, const cluster::ReadinessProbe& gate) {
  using Kind = cluster::ReadinessProbe::Kind;
  if (gate.kind == Kind::kRunning) return Status::Ok();
  const std::string what = !gate.description.empty() ? gate.description
                           : gate.kind == Kind::kTcpPort ? "port " + std::to_string(gate.tcp_port) + " open"
                           : gate.kind == Kind::kLog   ? "a log line matching /" + gate.log_regex + "/"
                                                       : "`" + gate.command + "` succeeding";
  Say("waiting for " + NodeNoun(node) + " to be ready (" + what + ")");
  Began(node.PhaseOf(Phase::kReady));

  // Probes and their timers capture this frame: both are dropped when it
  // returns (the group and the timers are destroyed first).
  bool ready = false;
  std::function<void()> probe_once;
  Timers timers(&ctx_.loop);
  CommandGroup group(&ctx_.loop, &ctx_.redact);
  probe_once = [&] {
    if (ready || node.phase != NodePhase::kRunning) return;
    const std::string line = gate.kind == Kind::kTcpPort
                                 ? node.host->docker->ListeningPorts(node.plan->container.name)
                                 : node.host->docker->ExecShell(node.plan->container.name, gate.command);
    group.Run(*node.host->exec, line, [&](const Outcome& o) {
      if (gate.kind == Kind::kTcpPort) {
        if (container::ParseListeningPorts(o.out).count(gate.tcp_port)) ready = true;
      } else if (o.ok()) {
        ready = true;
      }
      if (!ready) timers.Add(Now() + milliseconds(250), [&] { probe_once(); });
    });
  };
  if (gate.kind != Kind::kLog) probe_once();
  RunUntil(
      [&] {
        return ready || node.logged_ready || node.phase != NodePhase::kRunning ||
               ctx_.interrupts > 0 || attempt_.fault.has_value();
      },
      Now() + gate.timeout);
  if (ctx_.interrupts > 0) {
    Ended(node.PhaseOf(Phase::kReady), false, "interrupted");
    return Status::Error("interrupted while waiting for " + NodeNoun(node));
  }
  if (ready || node.logged_ready) {
    Ended(node.PhaseOf(Phase::kReady), true);
    Say(NodeNoun(node) == "the head" ? "head is ready" : NodeNoun(node) + " is ready");
    Event(node.plan->rank == 0 ? event::kHeadReady : "node_ready", node.host->name, what);
    return Status::Ok();
  }
  // It finished (the job completes), or a fault ends the attempt.
  if (node.phase != NodePhase::kRunning || attempt_.fault) {
    Ended(node.PhaseOf(Phase::kReady), false, node.phase != NodePhase::kRunning ? "it ended" : "a fault");
    return Status::Ok();
  }
  std::string msg = NodeNoun(node) + " was not ready after " +
                    std::to_string(std::chrono::duration_cast<milliseconds>(gate.timeout).count() / 1000.0).substr(0, 5) +
                    " s (waiting for " + what + ")";
  Ended(node.PhaseOf(Phase::kReady), false, msg);
  std::vector<std::string> tail = attempt_.sink->Tail(node.plan->rank, 10);
  msg += tail.empty() ? "; it printed nothing" : "; its last lines:";
  for (const auto& l : tail) msg += "\n  | " + l;
  return Status::Error(msg);
}

}  // namespace barge::runner::internal
