// The job's one plan owner (planner.h).
#include "runner/controller/planner.h"

#include <optional>
#include <utility>

#include "runner/controller/slurm_run.h"
#include "runner/jobfile/job_spec.h"

namespace barge::runner::internal {

Status Planner::Start() { return Replan(); }

Status Planner::Update() {
  if (!changed_) return Status::Ok();
  return Replan();
}

Status Planner::Replan() {
  Result<cluster::Plan> made = cluster::MakePlan(facts_);
  if (!made.ok()) return made.status();
  ++plans_made_;
  if (in_use_) old_plans_.push_back(std::move(plan_));
  plan_ = std::move(made).value();
  changed_ = false;
  return Status::Ok();
}

void Planner::Reached(size_t h, const std::string& address) {
  facts_.reached_addresses[h] = address;
  if (h < plan_.hosts.size()) plan_.hosts[h].internal_address = address;
  changed_ = true;
}

void Planner::Unreached(size_t h) {
  if (facts_.reached_addresses.erase(h) > 0) changed_ = true;
}

void Planner::JobDir(size_t h, const std::string& dir) {
  auto [it, added] = facts_.host_paths.try_emplace(h, dir);
  if (!added && it->second == dir) return;
  it->second = dir;
  changed_ = true;
}

void Planner::DetectedGpus(size_t h, int count) {
  facts_.detected_gpus[h] = count;
  changed_ = true;
}

void Planner::Interface(size_t h, const std::string& iface) {
  facts_.host_ifaces[h] = iface;
  changed_ = true;
}

void Planner::Rdma(size_t h, std::vector<std::string> hcas) {
  facts_.host_rdma[h] = std::move(hcas);
  changed_ = true;
}

Status Planner::HeldGpus(size_t h, std::set<int> held) {
  const auto known = facts_.held_gpus.find(h);
  std::optional<std::set<int>> before;
  if (known != facts_.held_gpus.end()) before = known->second;
  facts_.held_gpus[h] = std::move(held);
  if (Status s = Replan(); !s.ok()) {
    if (before) {
      facts_.held_gpus[h] = std::move(*before);
    } else {
      facts_.held_gpus.erase(h);
    }
    return s;
  }
  return Status::Ok();
}

void Planner::ReplaceHost(size_t h, const cluster::Host& host) {
  facts_.hosts[h] = host;
  facts_.held_gpus.erase(h);
  if (h < plan_.hosts.size()) plan_.hosts[h] = host;
  changed_ = true;
}

Status Planner::Allocated(const SlurmSpec& slurm, const std::vector<SlurmNode>& nodes,
                          const std::string& slurm_id) {
  cluster::PlanInput before = facts_;
  Status s = PlaceOnSlurmNodes(slurm, nodes, &facts_);
  // A node's Slurm epilog finds the allocation's containers by this label
  // (samples/slurm/epilog.sh): a defence that outlives the controller.
  if (s.ok()) facts_.extra_labels.emplace_back(cluster::kSlurmJobLabel, slurm_id);
  if (s.ok()) s = Replan();
  if (!s.ok()) facts_ = std::move(before);
  return s;
}

void Planner::Restarted(int count) {
  if (facts_.restart_count == count) return;
  facts_.restart_count = count;
  changed_ = true;
}

}  // namespace barge::runner::internal
