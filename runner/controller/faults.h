// Faults: noting the fault that ends an attempt (a lost host, a failed
// node, a preemption notice, a hang: progress_watch.h, an unhealthy GPU:
// gpu_watch.h), whether the restart policy covers it, and the
// periodic engine and preemption monitors that find them while an attempt
// runs. The spares that replace faulty hosts at a restart are the
// Controller's (spares.cc).
#pragma once

#include <chrono>
#include <string>

#include "runner/controller/attempt.h"
#include "runner/controller/host_set.h"
#include "runner/controller/job_context.h"

namespace barge::runner::internal {

// A host's health as the monitors see it, and its place at a restart.
struct HostHealth {
  // Lost or preempted: at a restart a spare takes its place (or it is
  // checked again before it is reused).
  bool replace = false;
  // A spare took its place: the job's teardown hooks still run for it.
  bool superseded = false;
  bool probing = false;   // an engine probe is in flight
  int engine_misses = 0;  // probes in a row that got no answer
  // When a log stream from this host's engine last delivered bytes: an
  // engine that streams answers, so no probe is needed for a while.
  std::chrono::steady_clock::time_point engine_heard{};
  bool polling = false;  // a preemption check is in flight
};

class Faults : private JobPart {
 public:
  Faults(JobContext* ctx, HostSet* hosts, Attempt* attempt, const cluster::Plan* plan)
      : JobPart(ctx), hosts_(*hosts), attempt_(*attempt), plan_(*plan) {}

  // The job store's event name (event::kHostLost, ...) of a cause.
  static const char* CauseName(RestartCause cause);
  // The first fault of an attempt ends it (Attempt::fault); later ones are
  // only recorded. Nothing is a fault once teardown has begun.
  void NoteFault(Fault fault);
  bool Restartable(const Fault& f) const;
  void OnHostLost(HostState& host, const std::string& why);
  void OnPreempted(HostState& host, const std::string& notice);
  // Periodic checks while an attempt runs: an engine probe per host (a
  // frozen dockerd), the preemption command per host. Attempt::generation
  // stops the previous attempt's.
  void StartMonitors();
  // Removes every container labelled with the job on `host` (leftovers).
  std::string RemoveJobContainersLine(HostState& host) const;

 private:
  HostSet& hosts_;
  Attempt& attempt_;
  const cluster::Plan& plan_;  // the current plan (the Controller makes it)
};

}  // namespace barge::runner::internal
