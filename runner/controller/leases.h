// Leases: the per-host watchdog's parameters (armed by preflight), the
// lease renewals while the job runs (the watchdog's file and the job's
// lease on the engine), and disarming the watchdogs at the end.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>

#include "runner/controller/host_set.h"
#include "runner/controller/job_context.h"
#include "runner/remote/watchdog.h"

namespace barge::runner::internal {

class Holds;

// A host's watchdog: armed by preflight, disarmed at the job's end (or by
// a teardown's removal, in the same command).
struct HostLease {
  bool armed = false;
  // Its lease on the engine was found gone (a renewal's rename: no such
  // container) and is being put back; the loss was said once.
  bool putting_back = false;
  bool loss_said = false;
  // A put back failed and its listing showed no lease of the job: tried
  // again at each renewal until one takes.
  bool put_back_due = false;
  // The job's last removal on this host has begun, or its holds were let go
  // (a failed or abandoned preflight, a spare not taken): its lease goes
  // with them, so a renewal that then finds the lease gone must not put it
  // back (that would leave them after the job), no renewal starts, and a
  // put back still running then is undone when it ends.
  bool releasing = false;
};

class Leases : private JobPart {
 public:
  // `holds` puts back a lease (and holds) the engine lost.
  Leases(JobContext* ctx, HostSet* hosts, const cluster::Plan* plan, Holds* holds)
      : JobPart(ctx), hosts_(*hosts), plan_(*plan), holds_(*holds) {}

  // The watchdog of `host` (armed by Preflight): its `timeout:` deadline
  // as the time left from now (WatchdogParams::deadline_after), so that
  // every host, armed first or again, judges the same deadline on its own
  // clock.
  WatchdogParams WatchdogFor(const HostState& host) const;
  // Renews every armed host's leases every RenewEvery() until
  // DisarmWatchdogs, across attempts (the context's job_commands and timers).
  void RenewLeases();
  void DisarmWatchdogs();
  // A failed job kept for a look until `until` (keep.h): every armed host's
  // watchdog is told that deadline, plus the grace, as the time left
  // (KeepUntilCommand); they then no longer end the job for its head's exit
  // or its timeout. Waits for the answers; a host that fails is said. The
  // renewals go on.
  void KeepUntil(Clock::time_point until);

 private:
  HostSet& hosts_;
  const cluster::Plan& plan_;  // the current plan (the Controller makes it)
  // Renewal period (watchdog.h): a quarter of the lease, 1 to 30 s.
  seconds RenewEvery() const {
    auto lease = std::chrono::duration_cast<seconds>(ctx_.spec.lease);
    return std::clamp<seconds>(lease / 4, seconds(1), seconds(30));
  }
  // One renewal of `host`'s leases: the watchdog's file, and the job's
  // lease on the engine when its holds listed one.
  // A renewal found none there (`docker container prune` removes every
  // created container): the lease, and the job's holds or ticket there,
  // are put back at once (Holds::PutBackLine), said once per loss with an
  // event (lease_put_back), and another job that took what the job held
  // meanwhile is named (the job keeps running).
  void RenewLeaseOn(HostState& host);
  void PutBack(HostState& host);

  Holds& holds_;

  // When the job's `timeout:` began, on the loop's clock: the parts are
  // made with the Controller, whose own deadline (started_ + timeout) runs
  // from the same moment. The watchdogs' deadline is that plus the grace.
  const Clock::time_point job_started_ = Now();
  bool renewing_ = false;
  std::shared_ptr<std::function<void()>> tick_;
};

}  // namespace barge::runner::internal
