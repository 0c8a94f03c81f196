// StoreObserver: buffering and batch-writing per-host phase spans.
#include "runner/controller/store_observer.h"

#include <utility>

namespace barge::runner {

StoreObserver::StoreObserver(JobStore* store, ssh::EventLoop* loop, std::string job_id,
                             std::chrono::milliseconds every)
    : store_(store), loop_(loop), job_id_(std::move(job_id)), every_(every) {}

StoreObserver::~StoreObserver() {
  if (timer_) loop_->CancelTimer(timer_);
  Flush();
}

void StoreObserver::HostBegan(const HostPhase& p, TimePoint at) {
  PhaseRecord r;
  r.job_id = job_id_;
  r.host_id = p.host_id;
  r.host = p.host;
  r.rank = p.rank;
  r.gpus = p.gpus;
  r.phase = ToString(p.phase);
  r.began = at;
  const Key key{p.host_id, p.rank.value_or(-1), static_cast<int>(p.phase)};
  open_ids_.erase(key);
  pending_index_[key] = pending_.size();
  pending_.push_back(std::move(r));
  Schedule();
}

void StoreObserver::HostEnded(const HostPhase& p, TimePoint at, bool ok, std::string_view detail) {
  const Key key{p.host_id, p.rank.value_or(-1), static_cast<int>(p.phase)};
  std::string outcome = ok ? "ok" : std::string(detail);
  if (outcome.empty()) outcome = "failed";
  if (auto it = pending_index_.find(key); it != pending_index_.end()) {
    pending_[it->second].ended = at;
    pending_[it->second].outcome = std::move(outcome);
    pending_index_.erase(it);
  } else if (auto id = open_ids_.find(key); id != open_ids_.end()) {
    PhaseRecord r;
    r.id = id->second;
    r.job_id = job_id_;
    r.ended = at;
    r.outcome = std::move(outcome);
    pending_.push_back(std::move(r));
    open_ids_.erase(id);
  } else {
    return;  // it never began (as far as this observer knows)
  }
  Schedule();
}

void StoreObserver::Schedule() {
  if (timer_ || every_.count() <= 0) return;
  timer_ = loop_->AddTimer(loop_->Now() + every_, [this] {
    timer_ = 0;
    Flush();
  });
}

void StoreObserver::Flush() {
  if (pending_.empty()) return;
  Result<std::vector<int64_t>> ids = store_->WritePhases(pending_);
  if (!ids.ok()) {
    if (error_.empty()) error_ = ids.status().message();
  } else {
    for (const auto& [key, index] : pending_index_) {
      if (index < ids->size()) open_ids_[key] = (*ids)[index];
    }
  }
  pending_.clear();
  pending_index_.clear();
}

}  // namespace barge::runner
