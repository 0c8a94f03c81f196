// The job's context and the plumbing every part of the controller uses
// (job_context.h).
#include "runner/controller/job_context.h"
#include "runner/controller/job_state.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runner/remote/docker_commands.h"
#include "runner/store/state_dir.h"

namespace barge::runner::internal {

std::string HostName(const cluster::Host& h) { return h.address; }

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && s[i] == ' ') ++i;
  return s.substr(i);
}

JobContext::JobContext(const JobSpec& spec, std::string job_id, const ControllerOptions& options,
                       ssh::EventLoop* loop, HostConnector* connector)
    : spec(spec), job_id(std::move(job_id)), options(options), loop(*loop), connector(connector) {}

JobContext::~JobContext() = default;

void Timers::Add(Clock::time_point when, std::function<void()> fn) {
  // The id is known only after AddTimer returns: the callback finds it
  // through a shared slot.
  auto id = std::make_shared<ssh::EventLoop::TimerId>(0);
  *id = loop_->AddTimer(when, [this, id, fn = std::move(fn)] {
    pending_.erase(*id);
    fn();
  });
  pending_.insert(*id);
}

void Timers::CancelAll() {
  for (ssh::EventLoop::TimerId id : pending_) loop_->CancelTimer(id);
  pending_.clear();
}

void JobPart::Event(const char* kind, const std::optional<std::string>& host,
                       const std::string& detail) {
  const std::string text = ctx_.redact(detail);
  if (ctx_.store) Record(ctx_.store->AddEvent(ctx_.job_id, kind, host, text));
  ctx_.observer.JobEvent(kind, host, text, WallNow());
}

void JobPart::SetStatus(JobStatus status, const std::string& detail) {
  const std::string text = ctx_.redact(detail);
  if (ctx_.store) Record(ctx_.store->SetStatus(ctx_.job_id, status, std::nullopt, text));
  ctx_.observer.JobEvent(ToString(status), std::nullopt, text, WallNow());
}

void JobPart::Began(const HostPhase& p) { ctx_.observer.HostBegan(p, WallNow()); }

void JobPart::Ended(const HostPhase& p, bool ok, const std::string& detail) {
  ctx_.observer.HostEnded(p, WallNow(), ok, ctx_.redact(detail));
}

void JobPart::RecordNode(const NodeState& node, const LogSink* sink) {
  if (!ctx_.store) return;
  NodeRecord r;
  r.job_id = ctx_.job_id;
  r.rank = node.plan->rank;
  r.role = node.plan->role;
  r.host = node.host->name;
  r.container_name = node.plan->container.name;
  r.container_id = node.container_id;
  auto id = node.host->images.ids.find(node.plan->container.image);
  if (id != node.host->images.ids.end()) r.image_id = id->second;
  r.exit_code = node.exit_code;
  r.log_path = sink ? sink->path(node.plan->rank) : "";
  Record(ctx_.store->UpsertNode(r));
}

void JobPart::RecordHost(const HostState& host, std::optional<int> replaces) {
  if (!ctx_.store) return;
  HostRecord r;
  r.job_id = ctx_.job_id;
  r.host_id = host.id;
  r.name = host.name;
  r.address = cluster::InternalAddress(host.inventory);
  r.replaces = replaces;
  Record(ctx_.store->UpsertHost(r));
}

ssh::Executor& JobPart::Local() {
  if (!ctx_.local) ctx_.local = ctx_.connector->Local();
  return *ctx_.local;
}

bool JobPart::RunUntil(const std::function<bool()>& finished, Clock::time_point deadline) {
  while (!finished()) {
    auto now = Now();
    if (now >= deadline) return false;
    auto wait = std::min<milliseconds>(milliseconds(200),
                                       std::chrono::duration_cast<milliseconds>(deadline - now));
    ctx_.loop.Poll(std::max(wait, milliseconds(1)));
  }
  return true;
}

bool JobPart::RunWhileProgressing(const CommandGroup& group, Clock::duration quiet,
                                     const std::function<bool()>& stop) {
  for (;;) {
    const uint64_t before = group.finished();
    RunUntil([&] { return group.idle() || stop() || group.finished() != before; }, Now() + quiet);
    if (group.idle() || stop()) return true;
    if (group.finished() == before) return false;
  }
}

std::string JobPart::Bounded(const std::string& line, std::chrono::milliseconds limit) {
  return BoundedLine(line, limit);
}

}  // namespace barge::runner::internal
