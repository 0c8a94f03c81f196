// GpuWatch: the GPUs of a running attempt, sampled on the connections the
// job already holds (one bounded command per host and period:
// gpu::GpuWatchCommand; nothing left running on the host), for two
// findings:
//  - health (`health: {every: ...}`, not with `health: {gpus: off}`): the
//    start-time gate's rules (gpu::Judge, the job's health.xids), the Xids
//    counted only since the job began (the kernel log's clock at preflight,
//    then at each fault). Warnings and unknowns are said once per job; a
//    finding on a GPU none of the job's nodes there uses is said once and
//    changes nothing. A fatal finding ends the attempt as a fault of cause
//    gpu_unhealthy naming host, GPU and finding (Faults::NoteFault): a whole
//    host's marks it for a spare at the restart (HostHealth::replace; with
//    no spare left the job stops: Controller::ReplaceHosts), a GPU's is
//    taken out of what its host offers at the restart (TakeOut: the
//    Planner's held-GPU fact, as GpuGate does at the start).
//  - utilisation (`progress: {gpu_util: {below: P, for: D}}`, sampled every
//    progress.every): every GPU of a node below P% in every sample for D
//    is a hang (Fault{kHang}; progress.on_hang decides), the detail naming
//    each node's GPUs and their utilisation.
// Both share one command per host: the period is progress.every with
// gpu_util (the health sections join it once health.every has passed),
// else health.every. Checks start when the attempt's nodes all run (Start);
// Attempt::generation stops a previous attempt's.
//
// Threading: the loop's thread only.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "runner/controller/attempt.h"
#include "runner/controller/faults.h"
#include "runner/controller/holds.h"
#include "runner/controller/host_set.h"
#include "runner/controller/job_context.h"
#include "runner/controller/planner.h"
#include "runner/remote/command_group.h"
#include "runner/remote/gpu_health.h"
#include "runner/remote/preflight_script.h"

namespace barge::runner::internal {

class GpuWatch : private JobPart {
 public:
  // None owned; a fault goes to `faults`, a GPU taken out to `planner`
  // (and GPU holds on it are taken again through `holds`).
  GpuWatch(JobContext* ctx, HostSet* hosts, Attempt* attempt, Planner* planner, Holds* holds, Faults* faults)
      : JobPart(ctx), hosts_(*hosts), attempt_(*attempt), planner_(*planner), holds_(*holds), faults_(*faults) {}

  // The attempt's nodes all run: sampling begins (nothing when the job asks
  // for neither check). A new attempt starts it again.
  void Start();
  // Before a restart: the GPUs found unhealthy while the attempt ran are
  // taken out of what their hosts offer; a host left with too few for its
  // nodes is marked for a spare. Fails only when GPU holds could not be
  // taken again without them.
  Status TakeOut();

 private:
  // What the watch keeps of one host for the job's life.
  struct HostWatch {
    bool sampling = false;  // a sample is in flight
    Clock::time_point health_at{};  // when health was last asked
    std::optional<double> xids_after;  // the kernel log's clock: Xids after it count
    std::set<std::string> said;        // findings said once
    std::map<int, int> util;           // the last sample's utilisation by GPU index
    bool util_known = false;
  };
  // One sample of `hs` (health when due, utilisation with gpu_util).
  void Sample(HostState& hs, int gen);
  void ReadHealth(HostState& hs, HostWatch& w, const PreflightReply& reply);
  void ReadUtil(HostState& hs, HostWatch& w, const PreflightReply& reply);
  // Declares a hang when a node's GPUs have all been idle for the bound.
  void CheckUtil();
  // The GPU indices of `hs` the attempt's nodes use (nullopt: all it has).
  std::optional<std::set<int>> JobGpus(const HostState& hs) const;
  // The GPU indices node `rank` uses, from its host's last sample.
  std::vector<int> NodeGpus(size_t rank) const;
  std::string UtilLines() const;

  HostSet& hosts_;
  Attempt& attempt_;
  Planner& planner_;
  const cluster::Plan& plan_ = planner_.plan();
  Holds& holds_;
  Faults& faults_;
  std::map<const HostState*, HostWatch> watch_;
  // Per node of the attempt (by rank): since when every GPU of it is idle.
  std::vector<std::optional<Clock::time_point>> idle_since_;
  int generation_ = -1;
  bool declared_ = false;  // this attempt's fault was noted
};

}  // namespace barge::runner::internal
