// StoreObserver: the job store's per-host phase spans (JobStore::
// WritePhases), written in batches so that 1,000 hosts cost a few
// transactions per phase, not one per host.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "runner/controller/job_observer.h"
#include "runner/store/job_store.h"
#include "ssh/event_loop.h"

namespace barge::runner {

class StoreObserver : public JobObserver {
 public:
  // `store` and `loop` are not owned and must outlive this. Buffered spans
  // are written at most `every` after they changed, at every step's end,
  // and on Flush (also from the destructor).
  StoreObserver(JobStore* store, ssh::EventLoop* loop, std::string job_id,
                std::chrono::milliseconds every = std::chrono::milliseconds(500));
  ~StoreObserver() override;

  void HostBegan(const HostPhase& p, TimePoint at) override;
  void HostEnded(const HostPhase& p, TimePoint at, bool ok, std::string_view detail) override;
  void StepEnded(Phase /*phase*/) override { Flush(); }
  void Flush() override;
  // The job id changes for nothing but a test; the first failed write's
  // message, if any (writes never fail the job).
  const std::string& error() const { return error_; }

 private:
  using Key = std::tuple<int, int, int>;  // host id, rank (-1: none), phase
  void Schedule();

  JobStore* store_;
  ssh::EventLoop* loop_;
  std::string job_id_;
  std::chrono::milliseconds every_;
  std::vector<PhaseRecord> pending_;    // to write, in order
  std::map<Key, size_t> pending_index_;  // open span not yet written → pending_ index
  std::map<Key, int64_t> open_ids_;     // open span already written → row id
  ssh::EventLoop::TimerId timer_ = 0;
  std::string error_;
};

}  // namespace barge::runner
