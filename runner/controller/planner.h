// Planner: the one owner of a job's plan. The job's phases report what they
// learned of a host (facts: the address it was reached at, its job
// directory, its GPU count, the interface of its internal address, its RDMA
// HCAs, the GPUs it must not give the job, a spare in its place; a slurm:
// job's granted nodes) and the attempt's restart count; the planner turns the facts into a plan
// (cluster::MakePlan), once per change of facts. The validated spec is
// never edited: the facts start as what it says (entry_points.h's
// MakePlanInput) and change only here.
//
// The plan's address is the planner's for its whole life: a part given
// &plan() always reads the current plan. A plan that nodes point into
// (InUse) stays valid after it is replaced.
//
// Threading: the loop's thread only.
#pragma once

#include <list>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"
#include "cluster/plan.h"

namespace barge::runner {
struct SlurmNode;  // runner/controller/slurm_run.h
struct SlurmSpec;  // runner/jobfile/job_spec.h
}  // namespace barge::runner

namespace barge::runner::internal {

class Planner {
 public:
  // `facts`: what the spec gives (MakePlanInput). No plan until Start.
  explicit Planner(cluster::PlanInput facts) : facts_(std::move(facts)) {}

  // The first plan, from the facts so far.
  Status Start();
  // Makes the plan again when a fact changed since the last plan; a plan
  // error leaves the current plan (and the facts) as they are.
  Status Update();
  // Nodes point into the current plan from now on: a later plan keeps it
  // alive (as an old plan) instead of dropping it.
  void InUse() { in_use_ = true; }

  const cluster::Plan& plan() const { return plan_; }
  const cluster::PlanInput& facts() const { return facts_; }

  // --- Facts, by host index (into plan().hosts).
  // The internal address settled at run time for a host named by a name
  // (runner/remote/host_address.h); the current plan's host entry says it
  // at once. Unreached forgets it (the host is connected again).
  void Reached(size_t h, const std::string& address);
  void Unreached(size_t h);
  // The job's directory on the host (PlanInput::host_paths).
  void JobDir(size_t h, const std::string& dir);
  // What preflight found: GPUs present, the interface that carries the
  // internal address ("" when the host could not tell), active RDMA HCAs.
  void DetectedGpus(size_t h, int count);
  void Interface(size_t h, const std::string& iface);
  void Rdma(size_t h, std::vector<std::string> hcas);
  // GPU indices the job's nodes on the host must not get (other jobs hold
  // them, or they are unhealthy): planned at once. When the host's nodes no
  // longer fit, the fact is not kept, the plan stays, and the plan's error
  // is returned.
  Status HeldGpus(size_t h, std::set<int> held);
  // `host` in host h's place (a spare, or the old entry back): its address
  // and inventory; what was known of the old one (held GPUs) is forgotten.
  // The current plan's host entry says it at once.
  void ReplaceHost(size_t h, const cluster::Host& host);
  // The attempt's restart count (in every node's env).
  void Restarted(int count);
  // A slurm: job's grant: its nodes are the hosts (PlaceOnSlurmNodes, with
  // `slurm`'s limits on shared nodes) and every container is labelled with
  // the allocation (cluster::kSlurmJobLabel). Planned at once; on an error
  // the facts and the plan stay.
  Status Allocated(const SlurmSpec& slurm, const std::vector<SlurmNode>& nodes, const std::string& slurm_id);
  // The hosts a verb on the job works on (HostVerbs): the current plan's
  // used_hosts, until the next plan.
  void UseHosts(std::vector<size_t> hosts) { plan_.used_hosts = std::move(hosts); }

  // Plans made (Start included), and replaced plans kept alive (InUse): a
  // measure for tests.
  int plans_made() const { return plans_made_; }
  size_t plans_kept() const { return old_plans_.size(); }

 private:
  // The plan of the facts now, in place of the current one.
  Status Replan();

  cluster::PlanInput facts_;
  cluster::Plan plan_;
  // Replaced plans that nodes pointed into: what they point at stays valid.
  std::list<cluster::Plan> old_plans_;
  bool changed_ = false;
  bool in_use_ = false;
  int plans_made_ = 0;
};

}  // namespace barge::runner::internal
