// GpuGate (gpu_gate.h): the GPU health gate in the job's preflight.
#include "runner/controller/gpu_gate.h"

#include <algorithm>

#include "cluster/gpu_slices.h"
#include "cluster/plan.h"
#include "runner/controller/job_state.h"

namespace barge::runner::internal {

namespace {

std::string Indices(const std::vector<int>& v) {
  std::string out;
  for (int i : v) out += (out.empty() ? "" : ",") + std::to_string(i);
  return out;
}

}  // namespace

std::optional<int> GpusGiven(const cluster::NodePlan& node, const HostGpus& host) {
  if (!node.container.options.gpus) return 0;
  if (!node.gpu_devices.empty()) return static_cast<int>(node.gpu_devices.size());
  std::string value = *node.container.options.gpus;
  value.erase(std::remove(value.begin(), value.end(), '"'), value.end());
  if (std::optional<int> count = cluster::GpuCount(value)) return *count;
  if (value.rfind("device=", 0) == 0) {
    return static_cast<int>(std::count(value.begin(), value.end(), ',')) + 1;
  }
  if (value == "all" && host.report && host.report->query_ok) return static_cast<int>(host.report->gpus.size());
  return std::nullopt;
}

seconds GpuCallLimit(const JobSpec& spec) {
  return std::clamp(std::chrono::duration_cast<seconds>(spec.ssh.engine_timeout), seconds(5), seconds(30));
}

std::string GpuGate::LinesFor(const HostState& hs) const {
  if (ctx_.spec.health.gpus == GpuHealthLevel::kOff) return "";
  const bool asks = std::any_of(plan_.nodes.begin(), plan_.nodes.end(), [&](const cluster::NodePlan& n) {
    return n.host_index == hs.index && n.container.options.gpus.has_value();
  });
  return asks ? gpu::GpuHealthLines(ctx_.spec.health.nvidia_smi, GpuCallLimit(ctx_.spec)) : "";
}

void GpuGate::Note(HostState& hs, const PreflightReply& reply) {
  auto section = [&](const char* name) -> std::optional<gpu::SectionText> {
    const PreflightSection* s = reply.Find(name);
    if (!s) return std::nullopt;
    return gpu::SectionText{s->exit, s->text};
  };
  std::optional<gpu::SectionText> query = section("gpuq");
  if (!query && !reply.Find("gpuxid")) return;  // not asked, or cut off before
  hs.gpus.report = gpu::ReadGpuReport(query, section("gpurm"), section("gpuxid"));
  const HealthSpec& h = ctx_.spec.health;
  hs.gpus.findings = gpu::Judge(*hs.gpus.report, plan_.hosts[hs.index].gpus,
                                std::chrono::duration_cast<seconds>(h.xid_window),
                                gpu::XidPolicy{h.xids_fatal, h.xids_warning, h.xids_ignore, std::nullopt});
}

void GpuGate::Diagnose(const std::vector<HostState*>& hosts) {
  if (ctx_.spec.health.gpus != GpuHealthLevel::kDcgm) return;
  // Level 1 lasts seconds; a hung one is the host's finding.
  const seconds limit(120);
  CommandGroup group(&ctx_.loop, &ctx_.redact);
  size_t open = 0;
  for (HostState* hs : hosts) {
    if (!hs->gpus.report || !hs->exec) continue;
    std::vector<int> gpus;
    if (hs->holds.reply) gpus = HeldGpus(*hs->holds.reply, plan_.job_id);
    if (gpus.empty()) {
      const auto held = planner_.facts().held_gpus.find(hs->index);
      for (const gpu::GpuInfo& g : hs->gpus.report->gpus) {
        if (held == planner_.facts().held_gpus.end() || !held->second.contains(g.index)) gpus.push_back(g.index);
      }
    }
    if (gpus.empty()) continue;
    ++open;
    Say(hs->name + ": DCGM diagnostic (level 1) on GPU(s) " + Indices(gpus));
    group.Run(*hs->exec, gpu::DcgmDiagCommand(ctx_.spec.health.dcgmi, gpus, limit), [&, hs](const Outcome& o) {
      --open;
      if (!o.exit.known()) {
        hs->gpus.findings.push_back(
            {std::nullopt, "DCGM diagnostic unknown: " + o.Reason(), "", gpu::Severity::kUnknown});
        return;
      }
      for (gpu::Finding& f : gpu::ReadDcgmDiag({o.exit.code, o.out + o.err})) hs->gpus.findings.push_back(std::move(f));
    });
  }
  RunUntil([&] { return open == 0; }, Now() + limit + seconds(30));
}

std::vector<std::string> GpuGate::Problems(const HostState& hs) const {
  std::vector<std::string> out;
  for (const gpu::Finding& f : hs.gpus.findings) {
    if (f.severity != gpu::Severity::kFatal) continue;
    out.push_back("GPU health: " + (f.gpu ? "GPU " + std::to_string(*f.gpu) + ": " : std::string()) + f.problem +
                  (f.seen.empty() || f.seen == "now" ? "" : " (" + f.seen + ")"));
  }
  return out;
}

Status GpuGate::Apply(const std::vector<HostState*>& hosts, std::vector<HostState*>* out) {
  std::vector<HostState*> retake;
  auto host_out = [&](HostState* hs) {
    out->push_back(hs);
    Event(event::kGpuUnhealthy, hs->name, "the host is out");
  };
  for (HostState* hs : hosts) {
    if (!hs->gpus.report) continue;
    std::vector<gpu::Finding>& findings = hs->gpus.findings;
    for (const gpu::Finding& f : findings) {
      if (f.severity == gpu::Severity::kFatal) continue;
      Say(hs->name + ": GPU health: " + (f.severity == gpu::Severity::kWarning ? "warning: " : "unknown: ") +
          (f.gpu ? "GPU " + std::to_string(*f.gpu) + ": " : "") + f.problem + (f.seen.empty() ? "" : " (" + f.seen + ")"));
    }
    if (gpu::HostUnhealthy(findings)) {
      host_out(hs);
      continue;
    }
    const std::vector<int> bad = gpu::UnhealthyGpus(findings);
    if (bad.empty()) continue;
    // Nodes that name their GPUs (or take all) cannot be given others.
    std::string named;
    for (const cluster::NodePlan& n : plan_.nodes) {
      if (n.host_index != hs->index || !n.container.options.gpus || !n.gpu_devices.empty()) continue;
      named = *n.container.options.gpus;
    }
    if (!named.empty()) {
      findings.push_back({std::nullopt, "the job's nodes there ask for GPUs " + named + ": no other GPU can be given",
                          "", gpu::Severity::kFatal});
      host_out(hs);
      continue;
    }
    std::set<int> held;
    if (auto known = planner_.facts().held_gpus.find(hs->index); known != planner_.facts().held_gpus.end()) {
      held = known->second;
    }
    held.insert(bad.begin(), bad.end());
    if (!planner_.HeldGpus(hs->index, std::move(held)).ok()) {
      // (The plan's own message would call the unhealthy GPUs held.)
      int asked = 0;
      for (const cluster::NodePlan& n : plan_.nodes) {
        if (n.host_index == hs->index) asked += static_cast<int>(n.gpu_devices.size());
      }
      const size_t total = hs->gpus.report->gpus.size();
      findings.push_back({std::nullopt,
                          "too few healthy GPUs for the job's nodes there: they ask for " + std::to_string(asked) +
                              ", " + std::to_string(total - std::min(total, bad.size())) + " of " +
                              std::to_string(total) + " GPU(s) healthy",
                          "", gpu::Severity::kFatal});
      host_out(hs);
      continue;
    }
    hs->gpus.out = bad;
    std::string why;
    for (const gpu::Finding& f : findings) {
      if (f.severity == gpu::Severity::kFatal && f.gpu) why += (why.empty() ? "" : "; ") + f.problem;
    }
    Say(hs->name + ": GPU(s) " + Indices(bad) + " taken out (" + why + ")");
    Event(event::kGpuUnhealthy, hs->name, "GPU(s) " + Indices(bad) + " taken out: " + why);
    // GPU holds taken on an unhealthy GPU are taken again without it.
    if (hs->holds.reply) {
      const std::vector<int> ours = HeldGpus(*hs->holds.reply, plan_.job_id);
      if (std::any_of(ours.begin(), ours.end(),
                      [&](int g) { return std::find(bad.begin(), bad.end(), g) != bad.end(); })) {
        retake.push_back(hs);
      }
    }
  }
  if (!retake.empty()) return holds_.TakeAgain(retake);
  return Status::Ok();
}

std::string GpuGate::OutReason(const HostState& hs) const {
  std::string why;
  for (const std::string& p : Problems(hs)) {
    why += (why.empty() ? "" : "; ") + p.substr(p.rfind("GPU health: ", 0) == 0 ? 12 : 0);
  }
  return "GPU health: " + (why.empty() ? std::string("unhealthy") : why);
}

Status GpuGate::OutError(const std::vector<HostState*>& out, size_t total) const {
  std::vector<gpu::HostFindings> rows;
  for (const HostState* hs : out) rows.push_back({hs->name, hs->gpus.findings});
  // Indented under the message, as preflight's table.
  std::string table;
  const std::string t = gpu::FindingsTable(rows);
  for (size_t start = 0, end; start < t.size(); start = end + 1) {
    end = t.find('\n', start);
    if (end == std::string::npos) end = t.size();
    table += "  " + t.substr(start, end - start) + "\n";
  }
  // A wait (--wait, wait:, an array member) is for hosts other jobs hold;
  // an unhealthy host does not become healthy by waiting.
  const std::string not_busy = ctx_.options.wait || ctx_.spec.wait
                                   ? "  (unavailable, not busy: a job does not wait for an unhealthy host)\n"
                                   : "";
  return Status::Error("GPU health: " + std::to_string(out.size()) + " of " + std::to_string(total) +
                       " host(s) cannot run the job's nodes" +
                       (ctx_.spec.spare_hosts.empty() ? std::string() : " and no spare host is left to take their place") +
                       "; nothing was started:\n" + table + not_busy);
}

}  // namespace barge::runner::internal
