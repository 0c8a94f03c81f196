// GpuGate: the GPU health gate (runner/remote/gpu_health.h) in the job's
// preflight. Preflight asks the driver on every host where the job asks for
// GPUs (unless `health: {gpus: off}`), in its one round trip; Apply then
// decides, before anything starts:
//  - warnings and unknowns are said, and change nothing;
//  - an unhealthy GPU is taken out of what its host offers: the plan's
//    GPU slices give the job's nodes there other GPUs, and GPU holds taken
//    on it are taken again without it;
//  - a host is out when the whole host is unhealthy, when its nodes ask
//    for GPUs by name or `all` (nothing to choose from) and one of those is
//    unhealthy, or when too few healthy GPUs are left for its nodes. A spare
//    host takes an out host's place (the Controller's spares.cc); without
//    one the job stops before any container starts, with one
//    HOST | GPU | PROBLEM | SEEN table (OutError, exit 125).
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "runner/controller/holds.h"
#include "runner/controller/job_context.h"
#include "runner/controller/planner.h"
#include "runner/remote/gpu_health.h"
#include "runner/remote/preflight_script.h"

namespace barge::runner::internal {

// The bound on each nvidia-smi, dmesg or DCGM call on a host, at the start
// and while the job runs: the engine timeout, between 5 and 30 s (a healthy
// driver answers in well under a second).
seconds GpuCallLimit(const JobSpec& spec);

// A host's GPUs as preflight found them.
struct HostGpus {
  std::optional<gpu::GpuReport> report;  // nullopt: not asked
  std::vector<gpu::Finding> findings;
  std::vector<int> out;  // indices taken out of what the host offers
  // GpuWatch (gpu_watch.h), while the job ran: GPUs found unhealthy (taken
  // out at the restart: GpuWatch::TakeOut), and why the whole host is out
  // ("" when it is not; a spare takes its place, or the job stops).
  std::set<int> failed_while_running;
  std::string out_while_running;
  // The whole host's finding while the job ran that is its hardware
  // failing (gpu::IsHardwareFault: a hung driver, an Xid of no GPU of the
  // query), for its failure record; "" when none (a missing nvidia-smi puts
  // the host out, but is not recorded).
  std::string hardware_fault_while_running;
};

// How many GPUs node `node` is given on a host whose GPUs are `host` (the
// accounting's count, runner/store/usage.h): the devices barge chose for
// it, else what its --gpus value names (a count, a device list), or for
// `all` every GPU the host's driver listed at preflight (a host with an
// unhealthy one is out); 0 without --gpus; nullopt for `all` where the
// driver was not asked (`health: {gpus: off}`) or did not answer.
std::optional<int> GpusGiven(const cluster::NodePlan& node, const HostGpus& host);

class GpuGate : private JobPart {
 public:
  // A GPU the gate takes out is a fact for `planner` (not owned).
  GpuGate(JobContext* ctx, Planner* planner, Holds* holds) : JobPart(ctx), planner_(*planner), holds_(*holds) {}

  // Preflight's lines for `hs` (gpu_health.h's sections); "" where the job
  // asks for no GPU there or `health: {gpus: off}`.
  std::string LinesFor(const HostState& hs) const;
  // Reads `hs`'s answer from its preflight reply (nothing when not asked).
  void Note(HostState& hs, const PreflightReply& reply);
  // health.gpus: dcgm, after preflight and before Apply: DCGM's quick
  // diagnostic on each of `hosts` the driver was asked on, in parallel, on
  // the GPUs the job holds there (all the driver lists, less those other
  // jobs hold, where it holds none); its findings join the host's.
  void Diagnose(const std::vector<HostState*>& hosts);
  // After preflight: see above. The hosts that are out are added to `out`
  // (each with its findings, and a kGpuUnhealthy event); fails only when
  // GPU holds could not be taken again without the unhealthy GPUs.
  Status Apply(const std::vector<HostState*>& hosts, std::vector<HostState*>* out);
  // Why the job stops with the hosts in `out` (of `total`): the table.
  Status OutError(const std::vector<HostState*>& out, size_t total) const;
  // One line: what took `hs` out (its fatal findings).
  std::string OutReason(const HostState& hs) const;
  // The fatal findings on `hs`, as rows of preflight's problem table (when
  // preflight fails for other reasons, they are not lost).
  std::vector<std::string> Problems(const HostState& hs) const;

 private:
  Planner& planner_;  // the facts and the current plan
  const cluster::Plan& plan_ = planner_.plan();
  Holds& holds_;
};

}  // namespace barge::runner::internal
