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
#include <memory>
#include <string>
#include <vector>

#include "runner/controller/controller.h"

namespace barge::runner::internal {

using container::DockerApi;

void Controller::FollowWithApi(NodeState& node, bool report_exit) {
  NodeState* n = &node;
  container::LogOptions options;
  options.follow = true;
  options.since_ns = n->skip_through_ns;  // attach: what the kept file holds
  auto sink = [this, n](container::LogStream stream, std::string_view bytes) {
    n->host->engine_heard = Now();
    (stream == container::LogStream::kStderr ? n->err_lines : n->out_lines)->Feed(bytes);
  };
  Result<DockerApi::CallPtr> call = n->host->api->Logs(
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
    timers_.Add(Now(), [this, n, report_exit, why] { LostWithApi(*n, report_exit, why); });
    return;
  }
  n->api_call = std::move(*call);
}

void Controller::InspectWithApi(NodeState& node, bool waited) {
  NodeState* n = &node;
  const std::string& name = n->plan->container.name;
  Result<DockerApi::CallPtr> call = n->host->api->InspectContainer(
      name, [this, n, waited](container::Reply<container::ContainerState> r) {
        if (!r.ok() && r.http_status == 0) return LostWithApi(*n, true, r.value.status().message());
        if (!r.ok()) return EndWithApi(*n, true, r.value.status());
        if (!r.value->running || waited) return EndWithApi(*n, true, *r.value);
        // The log ended a moment before the engine marked the container
        // stopped: wait for it, then ask again.
        Result<DockerApi::CallPtr> wait =
            n->host->api->Wait(n->plan->container.name, [this, n](container::Reply<int> w) {
              if (!w.ok() && w.http_status == 0) return LostWithApi(*n, true, w.value.status().message());
              InspectWithApi(*n, /*waited=*/true);
            });
        if (!wait.ok()) return LostWithApi(*n, true, wait.status().message());
        n->api_call = std::move(*wait);
      });
  if (!call.ok()) return LostWithApi(*n, true, call.status().message());
  n->api_call = std::move(*call);
}

void Controller::EndWithApi(NodeState& node, bool report_exit, const Result<container::ContainerState>& state) {
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

void Controller::LostWithApi(NodeState& node, bool report_exit, const std::string& why) {
  ssh::ExitStatus st;
  st.error = why;
  LogsEnded(node, report_exit, st);
}

void Controller::CatchUpWithApi(NodeState& node, std::optional<int64_t> from, std::function<void()> then) {
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
  Result<DockerApi::CallPtr> call = n->host->api->Logs(n->plan->container.name, options, sink, done);
  if (!call.ok()) {
    timers_.Add(Now(), [n, then] {
      n->catching_up = false;
      then();
    });
    return;
  }
  n->api_call = std::move(*call);
}

void Controller::DropApiCalls() {
  for (auto& n : nodes_) n->api_call.reset();
  for (auto& n : old_nodes_) n->api_call.reset();
}

}  // namespace barge::runner::internal

namespace barge::runner::internal {

void Controller::StopWithApi(CommandGroup& group, HostState& hs, const std::vector<std::string>& names,
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
          return hs.api->Stop(name, grace_seconds,
                              [finish](container::Reply<container::NoContent> r) { finish(ApiOutcome(r)); });
        },
        [st, done](const Outcome& o) {
          if (!o.ok() && !st->failed) st->failed = o;
          if (--st->left == 0) done(st->failed ? *st->failed : o);
        });
  }
}

void Controller::RemoveWithApi(CommandGroup& group, HostState& hs, const std::vector<std::string>& names,
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
            return h->api->Remove(t, /*force=*/true, [finish](container::Reply<container::NoContent> r) {
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
  auto finish = [this, &group, h, then_line, done](std::optional<Outcome> failed) {
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
          return h->api->ListContainers({"barge.job=" + job},
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
