// Leases: the per-host watchdog's parameters (armed by preflight), the
// lease renewals while the job runs (the watchdog's file and the job's
// lease on the engine), and disarming the watchdogs at the end.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>

#include "runner/controller/job.h"
#include "runner/remote/watchdog.h"

namespace barge::runner::internal {

// A host's watchdog: armed by preflight, disarmed at the job's end (or by
// a teardown's removal, in the same command).
struct HostLease {
  bool armed = false;
};

class Leases : private JobPart {
 public:
  explicit Leases(Job* job) : JobPart(job) {}

  // The watchdog of `host` (armed by Preflight).
  WatchdogParams WatchdogFor(const HostState& host) const;
  // Renews every armed host's leases every RenewEvery() until
  // DisarmWatchdogs, across attempts (Job::job's commands and timers).
  void RenewLeases();
  void DisarmWatchdogs();

 private:
  // Renewal period (watchdog.h): a quarter of the lease, 1 to 30 s.
  seconds RenewEvery() const {
    auto lease = std::chrono::duration_cast<seconds>(spec_.lease);
    return std::clamp<seconds>(lease / 4, seconds(1), seconds(30));
  }
  // One renewal of `host`'s leases: the watchdog's file, and the job's
  // lease on the engine when its holds listed one.
  void RenewLeaseOn(HostState& host);

  bool renewing_ = false;
  std::shared_ptr<std::function<void()>> tick_;
};

}  // namespace barge::runner::internal
