// The job's shared state and the plumbing every part of the controller
// uses (job.h).
#include "runner/controller/job.h"
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

Job::Job(const JobSpec& spec, const cluster::PlanInput& input, const ControllerOptions& options,
         ssh::EventLoop* loop, HostConnector* connector)
    : spec(spec), input(input), options(options), loop(*loop), connector(*connector) {}

Job::~Job() = default;

JobPart::JobPart(Job* job)
    : job_state_(*job),
      spec_(job->spec),
      redact_(job->redact),
      input_(job->input),
      options_(job->options),
      loop_(job->loop),
      observer_(job->observer),
      timers_(job->timers),
      job_(job->job),
      attempt_(job->attempt),
      plan_(job->plan),
      hosts_(job->hosts),
      nodes_(job->nodes),
      sink_(job->sink),
      store_(job->store),
      connect_errors_(job->connect_errors),
      retired_(job->retired),
      interrupts_(job->interrupts),
      tearing_down_(job->tearing_down),
      fault_(job->fault),
      restart_count_(job->restart_count),
      generation_(job->generation),
      monitors_(job->monitors) {}

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
  const std::string text = redact_(detail);
  if (store_) Record(store_->AddEvent(plan_.job_id, kind, host, text));
  observer_.JobEvent(kind, host, text, WallNow());
}

void JobPart::SetStatus(JobStatus status, const std::string& detail) {
  const std::string text = redact_(detail);
  if (store_) Record(store_->SetStatus(plan_.job_id, status, std::nullopt, text));
  observer_.JobEvent(ToString(status), std::nullopt, text, WallNow());
}

void JobPart::Began(const HostPhase& p) { observer_.HostBegan(p, WallNow()); }

void JobPart::Ended(const HostPhase& p, bool ok, const std::string& detail) {
  observer_.HostEnded(p, WallNow(), ok, redact_(detail));
}

void JobPart::RecordNode(const NodeState& node) {
  if (!store_) return;
  NodeRecord r;
  r.job_id = plan_.job_id;
  r.rank = node.plan->rank;
  r.role = node.plan->role;
  r.host = node.host->name;
  r.container_name = node.plan->container.name;
  r.container_id = node.container_id;
  auto id = node.host->images.ids.find(node.plan->container.image);
  if (id != node.host->images.ids.end()) r.image_id = id->second;
  r.exit_code = node.exit_code;
  r.log_path = sink_ ? sink_->path(node.plan->rank) : "";
  Record(store_->UpsertNode(r));
}

void JobPart::RecordHost(const HostState& host, std::optional<int> replaces) {
  if (!store_) return;
  HostRecord r;
  r.job_id = plan_.job_id;
  r.host_id = host.id;
  r.name = host.name;
  r.address = cluster::InternalAddress(host.inventory);
  r.replaces = replaces;
  Record(store_->UpsertHost(r));
}

ssh::Executor& JobPart::Local() {
  if (!job_state_.local) job_state_.local = job_state_.connector.Local();
  return *job_state_.local;
}

bool JobPart::RunUntil(const std::function<bool()>& finished, Clock::time_point deadline) {
  while (!finished()) {
    auto now = Now();
    if (now >= deadline) return false;
    auto wait = std::min<milliseconds>(milliseconds(200),
                                       std::chrono::duration_cast<milliseconds>(deadline - now));
    loop_.Poll(std::max(wait, milliseconds(1)));
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

std::vector<HostState*> JobPart::AllHosts() {
  std::vector<HostState*> out;
  for (auto& [h, host] : hosts_) out.push_back(host.get());
  return out;
}

std::vector<HostState*> JobPart::ConnectedHosts() {
  std::vector<HostState*> out;
  for (auto& [h, host] : hosts_) {
    if (host->exec) out.push_back(host.get());
  }
  return out;
}

}  // namespace barge::runner::internal
