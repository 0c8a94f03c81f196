// slurm_run.h: the allocation's record in the store, its nodes placed into
// a plan's facts, and `barge down`'s scancel of an orphaned job's
// allocation.
#include "runner/controller/slurm_run.h"

#include <chrono>
#include <memory>
#include <optional>
#include <sstream>

#include "cluster/gpu_slices.h"
#include "runner/controller/srun_connector.h"
#include "runner/remote/command_group.h"
#include "runner/remote/slurm.h"
#include "runner/store/job_store.h"
#include "ssh/event_loop.h"

namespace barge::runner {

using std::chrono::milliseconds;
using std::chrono::seconds;

std::string FormatSlurmNodes(const std::vector<SlurmNode>& nodes) {
  std::string out;
  for (const SlurmNode& n : nodes) out += (out.empty() ? "" : " ") + n.name + "=" + n.address;
  return out;
}

Result<std::vector<SlurmNode>> ParseSlurmNodes(const std::string& detail) {
  std::vector<SlurmNode> out;
  std::istringstream in(detail);
  std::string word;
  while (in >> word) {
    const size_t eq = word.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == word.size()) {
      return Status::Error("unexpected record of Slurm nodes: '" + detail + "'");
    }
    SlurmNode node;
    node.name = word.substr(0, eq);
    node.address = word.substr(eq + 1);
    out.push_back(std::move(node));
  }
  return out;
}

Status PlaceOnSlurmNodes(const SlurmSpec& slurm, const std::vector<SlurmNode>& nodes, cluster::PlanInput* input) {
  if (nodes.size() != input->hosts.size()) {
    return Status::Error("Slurm gave " + std::to_string(nodes.size()) + " node(s), the job asked for " +
                         std::to_string(input->hosts.size()));
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    cluster::Host& host = input->hosts[i];
    host.address = nodes[i].address;
    // What other nodes are told: Slurm's NodeAddr (no probe of how the
    // host was reached, which a job step cannot answer).
    host.internal_address = nodes[i].address;
    host.vars["SLURM_NODE"] = nodes[i].name;
  }
  if (slurm.exclusive) return Status::Ok();
  // A shared node: no container block may widen what Slurm gave.
  input->container.gpus.reset();
  for (auto& [name, role] : input->roles) role.container.gpus.reset();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const SlurmNode& n = nodes[i];
    cluster::Host& host = input->hosts[i];
    host.gpus = static_cast<int>(n.gpus.size());
    host.container.gpus.reset();
    if (!n.gpus.empty()) host.container.gpus = cluster::GpuDeviceValue(n.gpus);
    if (n.cpus > 0) host.container.cpus = std::to_string(n.cpus);
    if (n.mem_mb > 0) {
      host.container.memory = std::to_string(n.mem_mb) + "m";
    } else if (slurm.mem_per_node) {
      host.container.memory = *slurm.mem_per_node;
    }
  }
  return Status::Ok();
}

std::string SlurmErrorTail(const std::string& text, size_t n) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") != std::string::npos) lines.push_back(line);
  }
  std::string out;
  for (size_t i = lines.size() > n ? lines.size() - n : 0; i < lines.size(); ++i) {
    out += (out.empty() ? "" : "; ") + lines[i];
  }
  return out;
}

Result<RecordedAllocation> ReadRecordedAllocation(JobStore& store, const std::string& job_id) {
  Result<std::vector<EventRecord>> events = store.GetEvents(job_id);
  if (!events.ok()) return events.status();
  RecordedAllocation out;
  for (const EventRecord& e : *events) {
    if (e.kind == kSlurmJobEvent) out.slurm_id = e.detail;
    if (e.kind == kSlurmReleasedEvent) out.released = true;
    if (e.kind == kSlurmNodesEvent) {
      Result<std::vector<SlurmNode>> nodes = ParseSlurmNodes(e.detail);
      if (!nodes.ok()) return nodes.status();
      out.nodes = std::move(nodes).value();
    }
  }
  return out;
}

Status CancelSlurmAllocation(const JobSpec& spec, const std::string& slurm_id) {
  // Declared first: the loop outlives the executor and the group.
  ssh::EventLoop loop;
  Result<std::unique_ptr<ssh::Executor>> submit = ConnectSubmitHost(spec, &loop);
  if (!submit.ok()) return submit.status();
  const std::string label = spec.slurm->login.empty() ? "this machine" : spec.slurm->login;
  const std::string line = slurm::ScancelLine(slurm_id);
  std::optional<Outcome> outcome;
  CommandGroup group(&loop);
  group.Run(**submit, line, [&outcome](const Outcome& o) { outcome = o; });
  const auto deadline = loop.Now() + seconds(60);
  while (!outcome && loop.Now() < deadline) loop.Poll(milliseconds(100));
  if (!outcome) return Status::Error("`" + line + "` on " + label + " did not end within 60 s");
  if (!outcome->exit.known()) return Status::Error("`" + line + "` on " + label + ": " + outcome->exit.error);
  if (outcome->exit.code != 0) {
    return Status::Error("`" + line + "` on " + label + " exited " + std::to_string(outcome->exit.code) + ": " +
                         SlurmErrorTail(outcome->err));
  }
  return Status::Ok();
}

}  // namespace barge::runner
