// HostVerbs (host_verbs.h): `barge down` of a job whose controller is gone
// (TearDownOrphan), `barge reap` (Reap), `barge exec` (ExecInNode) and
// `barge attach` to an orphan (AttachOrphan); and what every verb does
// first (Prepare, ConnectToNode).
#include "runner/console/exit_codes.h"
#include "runner/controller/host_verbs.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cluster/plan.h"
#include "container/docker_args.h"
#include "container/inspect.h"
#include "runner/console/signals.h"
#include "runner/controller/job_state.h"
#include "runner/logs/kept_lines.h"
#include "runner/logs/log_sink.h"
#include "runner/remote/reap.h"
#include "runner/store/job_store.h"
#include "runner/store/state_dir.h"

namespace barge::runner::internal {

HostVerbs::HostVerbs(const JobSpec& spec, const cluster::PlanInput& input, const ControllerOptions& options,
                     ssh::EventLoop* loop, HostConnector* connector, JobObserver* observer)
    : JobOwner(spec, input, options, loop, connector), JobPart(&job_context_) {
  if (observer) ctx_.observer.Add(observer);
}

HostVerbs::~HostVerbs() {
  // Nothing of the verb may run on the loop after it (see ~Controller).
  ctx_.timers.CancelAll();
  streams_.DropApiCalls();
  attempt_.commands.Cancel();
  ctx_.job_commands.Cancel();
  ctx_.observer.Flush();
}

bool HostVerbs::Prepare(bool with_store) {
  Status s = MakeFirstPlan();
  if (s.ok() && with_store) s = OpenStore();
  if (!s.ok()) Say(s.message());
  return s.ok();
}

void HostVerbs::UseEveryHost() {
  std::vector<size_t> every;
  for (size_t h = 0; h < plan_.hosts.size(); ++h) every.push_back(h);
  planner_.UseHosts(std::move(every));
}

HostState* HostVerbs::ConnectToNode(int rank) {
  if (rank < 0 || static_cast<size_t>(rank) >= plan_.nodes.size()) {
    Say("the job has no node " + std::to_string(rank) + " (ranks 0.." + std::to_string(plan_.nodes.size() - 1) +
        ")");
    return nullptr;
  }
  const cluster::NodePlan& node = plan_.nodes[rank];
  planner_.UseHosts({node.host_index});
  if (Status s = connections_.Connect(); !s.ok()) {
    Say(s.message());
    return nullptr;
  }
  return hosts_.by_index[node.host_index].get();
}

int HostVerbs::TearDownOrphan() {
  if (!Prepare(/*with_store=*/true)) return kExitBargeFailure;
  if (Status s = connections_.Connect(); !s.ok()) {
    Say(s.message());
    return kExitBargeFailure;
  }
  CommandGroup group(&ctx_.loop, &ctx_.redact);
  bool failed = false;
  for (auto& [h, host] : hosts_.by_index) {
    HostState* hs = host.get();
    group.Run(*hs->exec, faults_.RemoveJobContainersLine(*hs), [&, hs](const Outcome& o) {
      if (!o.ok()) {
        failed = true;
        Say(hs->name + ": removing the job's containers failed: " + o.Reason());
      } else {
        int n = 0;
        for (char c : o.out) n += c == '\n';
        Say(hs->name + ": removed " + std::to_string(n) + " container(s)");
      }
    });
  }
  const bool done = RunUntil([&] { return group.idle(); }, Now() + seconds(120));
  group.Cancel();
  // The job's directories there were named by the controller that is gone:
  // the hooks are not told one, and every directory of the job that is the
  // SSH user's is disarmed (DisarmJobWatchdogsCommand).
  for (auto& [h, host] : hosts_.by_index) host->job_dir.clear();
  teardown_.RunTeardownHooks();
  for (auto& [h, host] : hosts_.by_index) host->lease.armed = true;  // whatever is left of it
  leases_.DisarmWatchdogs();
  Record(ctx_.store->SetStatus(plan_.job_id, JobStatus::kCancelled, kExitBargeFailure,
                           "torn down by barge down (its controller was gone)"));
  return failed || !done ? kExitBargeFailure : 0;
}

int HostVerbs::Reap(const std::function<bool(const std::string&)>& is_live) {
  if (!Prepare(/*with_store=*/false)) return kExitBargeFailure;
  UseEveryHost();
  if (Status s = connections_.Connect(); !s.ok()) {
    Say(s.message());
    return kExitBargeFailure;
  }
  CommandGroup group(&ctx_.loop, &ctx_.redact);
  bool failed = false;
  size_t removed = 0, kept = 0;
  for (auto& [h, host] : hosts_.by_index) {
    HostState* hs = host.get();
    group.Run(*hs->exec, ReapListingLine(*hs->docker), [&, hs](const Outcome& o) {
      Result<ReapListing> listing = ParseReapListing(o.out);
      if (!o.ok() || !listing.ok()) {
        failed = true;
        Say(hs->name + ": cannot list containers: " + (o.ok() ? listing.status().message() : o.Reason()));
        return;
      }
      std::vector<std::string> orphans;
      for (const ReapChoice& c : ChooseReaped(listing->entries, listing->now, is_live)) {
        if (c.keep) {
          ++kept;
          std::printf("%s: kept %s (%s)\n", hs->name.c_str(), c.name.c_str(), c.why.c_str());
          continue;
        }
        orphans.push_back(c.id);
        std::printf("%s: removing %s (%s)\n", hs->name.c_str(), c.name.c_str(), c.why.c_str());
      }
      if (orphans.empty()) return;
      group.Run(*hs->exec, hs->docker->Remove(orphans), [&, hs, n = orphans.size()](const Outcome& r) {
        if (r.ok()) {
          removed += n;
        } else {
          failed = true;
          Say(hs->name + ": removing failed: " + r.Reason());
        }
      });
    });
  }
  const bool done = RunUntil([&] { return group.idle(); }, Now() + seconds(120));
  std::printf("removed %zu container(s); kept %zu of live jobs\n", removed, kept);
  return failed || !done ? kExitBargeFailure : 0;
}

int HostVerbs::ExecInNode(int rank, const std::vector<std::string>& argv) {
  if (!Prepare(/*with_store=*/false)) return kExitBargeFailure;
  HostState* connected = ConnectToNode(rank);
  if (connected == nullptr) return kExitBargeFailure;
  const cluster::NodePlan& node = plan_.nodes[rank];
  HostState& host = *connected;
  CommandGroup group(&ctx_.loop, &ctx_.redact);
  std::optional<ssh::ExitStatus> result;
  ssh::CommandCallbacks cb;
  cb.on_stdout = [](std::string_view d) {
    std::fwrite(d.data(), 1, d.size(), stdout);
    std::fflush(stdout);
  };
  cb.on_stderr = [](std::string_view d) {
    std::fwrite(d.data(), 1, d.size(), stderr);
    std::fflush(stderr);
  };
  cb.on_exit = [&](const ssh::ExitStatus& st) { result = st; };
  group.Stream(*host.exec, host.docker->Exec(node.container.name, argv), std::move(cb));
  RunUntil([&] { return result.has_value() || ctx_.interrupts > 0; }, Clock::time_point::max());
  if (!result) return kExitInterrupted;
  if (!result->known()) {
    Say(result->error);
    return kExitBargeFailure;
  }
  return result->code;
}

int HostVerbs::AttachOrphan(const std::map<int, int64_t>& kept_through_ns,
                             std::optional<int64_t> restarted_at_ns) {
  if (!Prepare(/*with_store=*/false)) return kExitBargeFailure;
  if (Status s = connections_.Connect(); !s.ok()) {
    Say(s.message());
    return kExitBargeFailure;
  }
  std::vector<LogSink::Node> sink_nodes = MakeNodeStates();
  for (auto& state : attempt_.nodes) {
    auto kept = kept_through_ns.find(state->plan->rank);
    if (kept != kept_through_ns.end()) state->skip_through_ns = kept->second;
  }

  Result<std::unique_ptr<LogSink>> sink =
      LogSink::Open(RunDir(ctx_.options.state_dir, plan_.job_id), sink_nodes, ctx_.options.echo, ctx_.options.stdio);
  if (!sink.ok()) {
    Say(sink.status().message());
    return kExitBargeFailure;
  }
  attempt_.sink = std::move(sink).value();
  for (auto& n : attempt_.nodes) {
    // What the file kept of this container, by count: the engine's log is
    // read from its start and that many lines per stream dropped; the rest
    // are stamped on receipt (node_streams_api.cc's gap design).
    const KeptLines kept = CountKeptLines(attempt_.sink->path(n->plan->rank), restarted_at_ns);
    if (!kept.found) continue;
    n->skip_through_ns.reset();
    n->live.on = true;
    n->live.attached = false;
    n->live.lines = n->live.skip = kept.lines;
    n->live.last_hash = kept.last_hash;
  }
  for (auto& n : attempt_.nodes) streams_.StreamLogs(*n, /*report_exit=*/false);
  RunUntil(
      [&] {
        return ctx_.interrupts > 0 || std::none_of(attempt_.nodes.begin(), attempt_.nodes.end(),
                                               [](const auto& n) { return n->logs_open; });
      },
      Clock::time_point::max());
  return ctx_.interrupts > 0 ? kExitInterrupted : 0;
}

}  // namespace barge::runner::internal
