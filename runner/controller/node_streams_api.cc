// engine_api: a node's log follow and exit report through the Docker Engine
// API over the host's SSH session (container/docker_api.h), where the CLI
// path (DockerCommands::FollowUntilExit, then LogsRest) runs three Docker
// CLI processes per node on the host, each ~0.1 s of its CPU
// (bench/docker-cli-cost.sh). Same order and semantics as the CLI path:
// follow until the log ends, inspect (wait and inspect again while the
// container still runs), read what the follow missed (CatchUp), then report.
//
// Each step's callback ends by starting the next step, which replaces the
// node's api_call (destroying the call whose callback runs: DockerApi
// allows it); nothing is touched after that.
//
// The live log on an API host is the container's attach stream, not its
// followed log. `docker logs -f` reads back what the log driver wrote to
// disk and decodes it (Docker's json-file round trip: at volume barge
// reached 0.44 of an attached `docker run`), and a driver that rotates
// (log-opts max-size, the `local` driver) drops lines a follower has not
// read yet. So a node starts as `docker create` (DockerCommands::Create),
// then POST attach, then POST start once the attach is answered: the
// stream carries every byte the container writes, live, from its first,
// until its stdio closes (it stopped), and nothing in it depends on the
// log driver. The stream carries no stamps: each line is stamped on
// receipt by the controller's clock, strictly increasing per node (1 ns
// after the previous when the clock has not moved on: NodeState::Live),
// in the format the kept files always had, so the stamps are the node's
// sequence: its files keep stdout and stderr interleaved as they arrived,
// and `barge logs` merges nodes by those stamps (across nodes: by when the
// controller received them).
//
// Gaps. Receipt stamps say nothing about Docker's own stamps (the host's
// clock, taken before the line crossed the network), so a gap is not
// filled by `since=` a kept stamp: lines are counted instead. The
// controller counts the lines it kept per stream; when the attach breaks
// off while the container may still run (its session still up), it
// follows GET /logs?follow=1&timestamps=1 from the start of the engine's
// log and drops exactly that many lines per stream before keeping any
// (then the usual follow end: inspect, wait, the catch-up read by Docker
// stamps). A line the attach delivered only in part is dropped and read
// whole from the log. This is exact while the log driver holds the
// container's whole output; the last dropped line of each stream is
// checked against the last kept one, and a mismatch (the driver rotated
// or dropped lines) is said as a warning: lines may then be missing or
// repeated. Limit: what a rotating driver drops while NO controller reads
// (the attach broke off, or the controller died and `barge attach` reads
// later) is lost for good; only a driver that keeps everything (json-file
// without max-size, the default) can fill such a gap.
#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runner/controller/job_state.h"
#include "runner/controller/node_streams.h"

namespace barge::runner::internal {

using container::DockerApi;

void NodeStreams::FollowWithApi(NodeState& node, bool report_exit) {
  NodeState* n = &node;
  container::LogOptions options;
  options.follow = true;
  options.since_ns = n->skip_through_ns;  // attach: what the kept file holds
  auto sink = [this, n](container::LogStream stream, std::string_view bytes) {
    n->host->health.engine_heard = Now();
    (stream == container::LogStream::kStderr ? n->err_lines : n->out_lines)->Feed(bytes);
  };
  Result<DockerApi::CallPtr> call = n->host->engine.api->Logs(
      n->plan->container.name, options, sink, [this, n, report_exit](container::Reply<container::NoContent> r) {
        n->out_lines->Flush();
        n->err_lines->Flush();
        if (!r.ok() && r.http_status == 0) return LostWithApi(*n, report_exit, r.value.status().message());
        if (!report_exit) return EndWithApi(*n, false, Status::Error("not asked"));
        if (!r.ok()) return EndWithApi(*n, true, r.value.status());
        InspectWithApi(*n, /*waited=*/false);
      });
  if (!call.ok()) {
    // Nothing could be attempted (the session is known dead): delivered
    // from the loop, as a failed stream's end would be.
    const std::string why = call.status().message();
    ctx_.timers.Add(Now(), [this, n, report_exit, why] { LostWithApi(*n, report_exit, why); });
    return;
  }
  n->api_call = std::move(*call);
}

namespace {

// Whether the container gets a TTY (-t, --tty, or a group of short flags
// such as -it among its run options): its attach stream is then raw
// bytes, not frames.
bool HasTty(const container::ContainerSpec& spec) {
  if (!spec.options.run_options) return false;
  for (const std::string& a : *spec.options.run_options) {
    if (a == "-t" || a == "--tty" || a == "--tty=true") return true;
    if (a.size() > 2 && a[0] == '-' && a[1] != '-' && a.find('t') != std::string::npos &&
        a.find_first_not_of("itd", 1) == std::string::npos) {
      return true;
    }
  }
  return false;
}

// A start in progress, shared by the group's entry (which owns the start
// call through it) and the node's attach callbacks.
struct StartState {
  CommandGroup::Finish finish;
  DockerApi::CallPtr start;
  bool attached = false;
  bool finished = false;  // or abandoned: its group dropped it
  void Finish(const Outcome& o) {
    if (finished) return;
    finished = true;
    CommandGroup::Finish f = std::move(finish);
    finish = nullptr;
    f(o);
  }
};

// The group's handle on it: destroying it abandons the start.
class StartHandle : public DockerApi::Call {
 public:
  explicit StartHandle(std::shared_ptr<StartState> state) : state_(std::move(state)) {}
  ~StartHandle() override {
    state_->finished = true;
    state_->finish = nullptr;
    state_->start.reset();
  }

 private:
  std::shared_ptr<StartState> state_;
};

}  // namespace

void NodeStreams::AttachAndStartWithApi(CommandGroup& group, NodeState& node, CommandGroup::Done started) {
  NodeState* n = &node;
  OpenLogLines(node, /*report_exit=*/true);
  node.exit_marker.clear();  // no report in the stream here
  node.live = NodeState::Live{};
  node.live.on = true;
  node.live.attached = true;
  node.caught_up = true;  // the attach misses nothing at the end
  group.Api(
      [this, n](CommandGroup::Finish finish) -> Result<DockerApi::CallPtr> {
        auto st = std::make_shared<StartState>();
        st->finish = std::move(finish);
        const std::string& name = n->plan->container.name;
        auto on_attached = [this, n, st] {
          st->attached = true;
          if (st->finished) return;
          Result<DockerApi::CallPtr> start =
              n->host->engine.api->Start(n->plan->container.name, [n, st](container::Reply<container::NoContent> r) {
                if (!r.ok()) {
                  // Never started: nothing will come on the attach.
                  n->api_call.reset();
                  n->logs_open = false;
                }
                st->Finish(ApiOutcome(r));
              });
          if (!start.ok()) {
            Outcome o;
            o.exit.error = start.status().message();
            n->api_call.reset();
            n->logs_open = false;
            // From the loop, as a failed call's end would be.
            ctx_.timers.Add(Now(), [st, o] { st->Finish(o); });
            return;
          }
          st->start = std::move(*start);
        };
        auto sink = [this, n](container::LogStream stream, std::string_view bytes) {
          n->host->health.engine_heard = Now();
          (stream == container::LogStream::kStderr ? n->err_lines : n->out_lines)->Feed(bytes);
        };
        Result<DockerApi::CallPtr> attach = n->host->engine.api->Attach(
            name, HasTty(n->plan->container), on_attached, sink,
            [this, n, st](container::Reply<container::NoContent> r) {
              if (!st->attached) {
                // Refused or lost before the engine answered: not started.
                n->logs_open = false;
                Outcome o = ApiOutcome(r);
                if (o.ok()) {
                  o.exit.code = 1;
                  o.err = "the engine closed the attach stream without answering";
                }
                st->Finish(o);
                return;
              }
              AttachEndedWithApi(*n, r);
            });
        if (!attach.ok()) {
          n->logs_open = false;
          return attach.status();
        }
        n->api_call = std::move(*attach);
        return DockerApi::CallPtr(std::make_unique<StartHandle>(st));
      },
      std::move(started));
}

void NodeStreams::AttachEndedWithApi(NodeState& node, const container::Reply<container::NoContent>& r) {
  NodeState* n = &node;
  if (r.ok()) {
    // The container's stdio closed: it has stopped (or is stopping). A last
    // line without its newline is a line.
    n->out_lines->Flush();
    n->err_lines->Flush();
    auto end = [this, n] { InspectWithApi(*n, /*waited=*/false); };
    if (n->phase == NodePhase::kStarting) {
      n->live.ended = end;  // once the start's answer is in (StartNodes)
      return;
    }
    end();
    return;
  }
  const std::string why = r.value.status().message();
  if (n->retired || n->host->lost) return LostWithApi(*n, true, why);
  // Broke off while the container may still run: fill from the engine's
  // log, dropping the lines already kept (see the design above).
  n->out_lines->Discard();
  n->err_lines->Discard();
  NodeState::Live& live = n->live;
  live.attached = false;
  live.skip = live.lines;
  live.skipping = {false, false};
  n->seen = {};
  n->caught_up = false;
  Say(n->host->name + ": the attach stream of node " + std::to_string(n->plan->rank) + " broke off (" + why +
      "); reading the rest from the engine's log");
  FollowWithApi(*n, /*report_exit=*/true);
}

void NodeStreams::InspectWithApi(NodeState& node, bool waited, bool oom_asked_again) {
  NodeState* n = &node;
  const std::string& name = n->plan->container.name;
  Result<DockerApi::CallPtr> call = n->host->engine.api->InspectContainer(
      name, [this, n, waited, oom_asked_again](container::Reply<container::ContainerState> r) {
        if (!r.ok() && r.http_status == 0) return LostWithApi(*n, true, r.value.status().message());
        if (!r.ok()) return EndWithApi(*n, true, r.value.status());
        if (!r.value->running && r.value->exit_code == 137 && !r.value->oom_killed && !oom_asked_again) {
          // SIGKILL: the engine may mark an OOM kill a moment after the
          // exit (its OOM event comes apart from the exit's): ask once more.
          ctx_.timers.Add(Now() + kOomSettle, [this, n, waited] {
            // A host lost meanwhile has its nodes ended by the loss.
            if (n->host->lost || !n->host->engine.api) return;
            InspectWithApi(*n, waited, /*oom_asked_again=*/true);
          });
          return;
        }
        if (!r.value->running || waited) return EndWithApi(*n, true, *r.value);
        // The log ended a moment before the engine marked the container
        // stopped: wait for it, then ask again.
        Result<DockerApi::CallPtr> wait =
            n->host->engine.api->Wait(n->plan->container.name, [this, n, oom_asked_again](container::Reply<int> w) {
              if (!w.ok() && w.http_status == 0) return LostWithApi(*n, true, w.value.status().message());
              InspectWithApi(*n, /*waited=*/true, oom_asked_again);
            });
        if (!wait.ok()) return LostWithApi(*n, true, wait.status().message());
        n->api_call = std::move(*wait);
      });
  if (!call.ok()) return LostWithApi(*n, true, call.status().message());
  n->api_call = std::move(*call);
}

void NodeStreams::EndWithApi(NodeState& node, bool report_exit, const Result<container::ContainerState>& state) {
  NodeState* n = &node;
  auto finish = [this, n, report_exit, state] {
    if (!report_exit) return LogsEnded(*n, false, ssh::ExitStatus{0, "", ""});
    n->logs_open = false;
    if (n->host->lost) {
      Outcome o;
      o.exit.error = "its host was lost";
      return NodeEnded(*n, o);
    }
    NodeExited(*n, state);
  };
  // The catch-up read first, as on the CLI path: before teardown may
  // remove the container.
  if (!n->caught_up && !n->retired && !n->host->lost) {
    n->caught_up = true;
    CatchUp(*n, finish);
    return;
  }
  finish();
}

void NodeStreams::LostWithApi(NodeState& node, bool report_exit, const std::string& why) {
  ssh::ExitStatus st;
  st.error = why;
  LogsEnded(node, report_exit, st);
}

void NodeStreams::CatchUpWithApi(NodeState& node, std::optional<int64_t> from, std::function<void()> then) {
  NodeState* n = &node;
  container::LogOptions options;
  options.follow = false;
  options.since_ns = from;
  auto sink = [n](container::LogStream stream, std::string_view bytes) {
    (stream == container::LogStream::kStderr ? n->err_lines : n->out_lines)->Feed(bytes);
  };
  auto done = [n, then](container::Reply<container::NoContent>) {
    n->out_lines->Flush();
    n->err_lines->Flush();
    n->catching_up = false;
    then();
  };
  Result<DockerApi::CallPtr> call = n->host->engine.api->Logs(n->plan->container.name, options, sink, done);
  if (!call.ok()) {
    ctx_.timers.Add(Now(), [n, then] {
      n->catching_up = false;
      then();
    });
    return;
  }
  n->api_call = std::move(*call);
}

void NodeStreams::DropApiCalls() {
  for (auto& n : attempt_.nodes) n->api_call.reset();
  for (auto& n : attempt_.old_nodes) n->api_call.reset();
}

}  // namespace barge::runner::internal
