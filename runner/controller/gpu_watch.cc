// GpuWatch (gpu_watch.h): the GPUs of a running attempt, sampled on the
// job's timers.
#include "runner/controller/gpu_watch.h"

#include <algorithm>
#include <functional>
#include <memory>

#include "cluster/gpu_slices.h"
#include "cluster/plan.h"
#include "runner/console/time_format.h"
#include "runner/controller/gpu_gate.h"
#include "runner/controller/job_state.h"
#include "runner/remote/reservation.h"

namespace barge::runner::internal {

namespace {

std::string Indices(const std::set<int>& v) {
  std::string out;
  for (int i : v) out += (out.empty() ? "" : ",") + std::to_string(i);
  return out;
}

gpu::XidPolicy PolicyOf(const HealthSpec& h) { return {h.xids_fatal, h.xids_warning, h.xids_ignore, std::nullopt}; }

std::string FindingText(const gpu::Finding& f) {
  return (f.gpu ? "GPU " + std::to_string(*f.gpu) + ": " : std::string()) + f.problem +
         (f.seen.empty() || f.seen == "now" ? "" : " (" + f.seen + ")");
}

}  // namespace

std::optional<std::set<int>> GpuWatch::JobGpus(const HostState& hs) const {
  std::set<int> out;
  for (const auto& n : attempt_.nodes) {
    if (n->host != &hs || !n->plan->container.options.gpus) continue;
    if (!n->plan->gpu_devices.empty()) {
      out.insert(n->plan->gpu_devices.begin(), n->plan->gpu_devices.end());
      continue;
    }
    const std::set<int> named = cluster::GpuDeviceIndices(*n->plan->container.options.gpus);
    if (named.empty()) return std::nullopt;  // all, or a count: which ones is the engine's choice
    out.insert(named.begin(), named.end());
  }
  return out;
}

std::vector<int> GpuWatch::NodeGpus(size_t rank) const {
  const NodeState& n = *attempt_.nodes[rank];
  if (!n.plan->container.options.gpus) return {};
  if (!n.plan->gpu_devices.empty()) return n.plan->gpu_devices;
  const std::set<int> named = cluster::GpuDeviceIndices(*n.plan->container.options.gpus);
  if (!named.empty()) return {named.begin(), named.end()};
  // All (or a count): every GPU the host's last sample listed.
  std::vector<int> out;
  auto w = watch_.find(n.host);
  if (w != watch_.end()) {
    for (const auto& [index, percent] : w->second.util) out.push_back(index);
  }
  return out;
}

void GpuWatch::Start() {
  const bool health = ctx_.spec.health.every && ctx_.spec.health.gpus != GpuHealthLevel::kOff;
  const bool util = ctx_.spec.progress && ctx_.spec.progress->gpu_util;
  if (!health && !util) return;
  generation_ = attempt_.generation;
  declared_ = false;
  idle_since_.assign(attempt_.nodes.size(), std::nullopt);
  const milliseconds every = util ? ctx_.spec.progress->every : *ctx_.spec.health.every;
  const int gen = generation_;
  for (HostState* hs : hosts_.All()) {
    const bool has_gpus = std::any_of(attempt_.nodes.begin(), attempt_.nodes.end(), [&](const auto& n) {
      return n->host == hs && n->plan->container.options.gpus.has_value();
    });
    if (!has_gpus) continue;
    HostWatch& w = watch_[hs];
    w.health_at = Now();
    w.util.clear();
    w.util_known = false;
    // Xids count from the kernel log's clock at preflight (the gate judged
    // those before); else from the first sample's.
    if (!w.xids_after && hs->gpus.report) w.xids_after = hs->gpus.report->uptime;
    auto tick = std::make_shared<std::function<void()>>();
    *tick = [this, hs, gen, every, weak = std::weak_ptr<std::function<void()>>(tick)] {
      if (gen != attempt_.generation || attempt_.tearing_down || declared_ || hs->lost) return;
      Sample(*hs, gen);
      if (auto t = weak.lock(); t && !declared_) ctx_.timers.Add(Now() + every, [t] { (*t)(); });
    };
    attempt_.monitors.push_back(tick);
    ctx_.timers.Add(Now() + every, [tick] { (*tick)(); });
  }
}

void GpuWatch::Sample(HostState& hs, int gen) {
  HostWatch& w = watch_[&hs];
  if (w.sampling || !hs.exec) return;  // the last one still runs: skip this period
  const bool util = ctx_.spec.progress && ctx_.spec.progress->gpu_util;
  const bool health = ctx_.spec.health.every && ctx_.spec.health.gpus != GpuHealthLevel::kOff &&
                      Now() - w.health_at >= *ctx_.spec.health.every;
  if (!health && !util) return;
  if (health) w.health_at = Now();
  w.sampling = true;
  HostState* h = &hs;
  attempt_.commands.Run(*hs.exec, gpu::GpuWatchCommand(ctx_.spec.health.nvidia_smi, GpuCallLimit(ctx_.spec), health, util),
                        [this, h, gen, health, util](const Outcome& o) {
                          HostWatch& hw = watch_[h];
                          hw.sampling = false;
                          if (gen != attempt_.generation || attempt_.tearing_down || declared_) return;
                          if (!o.exit.known()) return;  // the session itself: Faults' OnHostLost
                          const PreflightReply reply = ParsePreflightReply(o.out);
                          if (health) ReadHealth(*h, hw, reply);
                          if (util && !declared_) ReadUtil(*h, hw, reply);
                        });
}

void GpuWatch::ReadHealth(HostState& hs, HostWatch& w, const PreflightReply& reply) {
  auto section = [&](const char* name) -> std::optional<gpu::SectionText> {
    const PreflightSection* s = reply.Find(name);
    if (!s) return std::nullopt;
    return gpu::SectionText{s->exit, s->text};
  };
  const gpu::GpuReport report = gpu::ReadGpuReport(section("gpuq"), section("gpurm"), section("gpuxid"));
  if (!w.xids_after) w.xids_after = report.uptime;  // nothing from before the first sample
  gpu::XidPolicy policy = PolicyOf(ctx_.spec.health);
  policy.after = w.xids_after;
  const std::vector<gpu::Finding> findings =
      gpu::Judge(report, plan_.hosts[hs.index].gpus, std::chrono::duration_cast<seconds>(ctx_.spec.health.xid_window),
                 policy);
  const std::optional<std::set<int>> ours = JobGpus(hs);
  std::vector<gpu::Finding> fatal;
  for (const gpu::Finding& f : findings) {
    const bool not_ours = f.gpu && ours && !ours->contains(*f.gpu);
    if (f.severity == gpu::Severity::kFatal && !not_ours) {
      fatal.push_back(f);
      continue;
    }
    // Said once per job: the finding without its age.
    const std::string key = (f.gpu ? std::to_string(*f.gpu) : "-") + f.problem;
    if (!w.said.insert(key).second) continue;
    Say(hs.name + ": GPU health while running: " +
        (not_ours ? "not the job's GPU: " : f.severity == gpu::Severity::kWarning ? "warning: "
                                          : f.severity == gpu::Severity::kUnknown ? "unknown: "
                                                                                  : "") +
        FindingText(f));
  }
  if (fatal.empty()) return;
  // The next attempt counts Xids from here on.
  if (report.uptime) w.xids_after = report.uptime;
  std::string detail = hs.name + ": GPU health while running (health.every): ";
  for (size_t i = 0; i < fatal.size(); ++i) {
    const gpu::Finding& f = fatal[i];
    detail += (i ? "; " : "") + FindingText(f);
    if (f.gpu) {
      hs.gpus.failed_while_running.insert(*f.gpu);
    } else {
      if (hs.gpus.out_while_running.empty()) hs.gpus.out_while_running = "GPU health while running: " + FindingText(f);
      if (hs.gpus.hardware_fault_while_running.empty() && gpu::IsHardwareFault(f)) {
        hs.gpus.hardware_fault_while_running = "GPU health while running: " + FindingText(f);
      }
    }
  }
  if (!hs.gpus.out_while_running.empty()) {
    hs.health.replace = true;
    detail += " (the host is out)";
  } else {
    detail += " (GPU(s) " + Indices(hs.gpus.failed_while_running) + " out at a restart)";
  }
  declared_ = true;
  faults_.NoteFault(Fault{RestartCause::kGpuUnhealthy, hs.name, detail});
}

void GpuWatch::ReadUtil(HostState& hs, HostWatch& w, const PreflightReply& reply) {
  const PreflightSection* s = reply.Find("gpuutil");
  if (s == nullptr || s->exit != 0) {
    w.util_known = false;  // no judgement from a failed sample
    return;
  }
  w.util.clear();
  for (const gpu::GpuUtil& g : gpu::ParseGpuUtil(s->text)) {
    if (g.percent) w.util[g.index] = *g.percent;
  }
  w.util_known = true;
  const GpuUtilSpec& spec = *ctx_.spec.progress->gpu_util;
  for (size_t rank = 0; rank < attempt_.nodes.size() && rank < idle_since_.size(); ++rank) {
    if (attempt_.nodes[rank]->host != &hs) continue;
    const std::vector<int> gpus = NodeGpus(rank);
    const bool idle = !gpus.empty() && std::all_of(gpus.begin(), gpus.end(), [&](int g) {
      auto it = w.util.find(g);
      return it != w.util.end() && it->second < spec.below;
    });
    if (!idle) {
      idle_since_[rank].reset();
    } else if (!idle_since_[rank]) {
      idle_since_[rank] = Now();
    }
  }
  CheckUtil();
}

void GpuWatch::CheckUtil() {
  const GpuUtilSpec& spec = *ctx_.spec.progress->gpu_util;
  std::string idle;
  for (size_t rank = 0; rank < idle_since_.size(); ++rank) {
    if (!idle_since_[rank] || Now() - *idle_since_[rank] < spec.for_) continue;
    idle += (idle.empty() ? "" : ", ") + std::string("rank ") + std::to_string(rank) + " (" +
            attempt_.nodes[rank]->host->name + ")";
  }
  if (idle.empty()) return;
  declared_ = true;
  const std::string detail = "the job made no progress: every GPU of " + idle + " below " +
                             std::to_string(spec.below) + "% utilisation for " +
                             FormatDuration(std::chrono::duration_cast<milliseconds>(spec.for_)) +
                             " (progress.gpu_util)\n" + UtilLines();
  faults_.NoteFault(Fault{RestartCause::kHang, "", detail});
}

std::string GpuWatch::UtilLines() const {
  const GpuUtilSpec& spec = *ctx_.spec.progress->gpu_util;
  std::string out = "GPU utilisation by node (last sample):";
  for (size_t rank = 0; rank < attempt_.nodes.size(); ++rank) {
    const NodeState& n = *attempt_.nodes[rank];
    if (!n.plan->container.options.gpus) continue;
    std::string line = "\n  rank " + std::to_string(rank) + " (" + n.host->name + "):";
    auto w = watch_.find(n.host);
    const std::vector<int> gpus = NodeGpus(rank);
    if (w == watch_.end() || !w->second.util_known || gpus.empty()) {
      line += " unknown";
    } else {
      for (size_t i = 0; i < gpus.size(); ++i) {
        auto u = w->second.util.find(gpus[i]);
        line += std::string(i ? ", " : " ") + "GPU " + std::to_string(gpus[i]) + " " +
                (u == w->second.util.end() ? std::string("?") : std::to_string(u->second) + "%");
      }
    }
    if (rank < idle_since_.size() && idle_since_[rank]) {
      line += " (below " + std::to_string(spec.below) + "% for " +
              FormatDuration(std::chrono::duration_cast<milliseconds>(Now() - *idle_since_[rank])) + ")";
    }
    out += line;
  }
  return out;
}

Status GpuWatch::TakeOut() {
  std::vector<HostState*> retake;
  for (HostState* hs : hosts_.All()) {
    if (hs->gpus.failed_while_running.empty() || hs->health.replace) continue;
    const std::set<int> bad = std::move(hs->gpus.failed_while_running);
    hs->gpus.failed_while_running.clear();
    std::set<int> held;
    if (auto known = planner_.facts().held_gpus.find(hs->index); known != planner_.facts().held_gpus.end()) {
      held = known->second;
    }
    held.insert(bad.begin(), bad.end());
    // Nodes that name their GPUs (or take all) cannot be given others.
    const bool named = std::any_of(plan_.nodes.begin(), plan_.nodes.end(), [&](const cluster::NodePlan& n) {
      return n.host_index == hs->index && n.container.options.gpus && n.gpu_devices.empty();
    });
    if (named || !planner_.HeldGpus(hs->index, std::move(held)).ok()) {
      hs->gpus.out_while_running = "GPU health while running: GPU(s) " + Indices(bad) + " unhealthy, " +
                                   (named ? "the job's nodes there ask for GPUs by name or all"
                                          : "too few healthy GPUs left for the job's nodes there");
      hs->health.replace = true;
      Say(hs->name + ": " + hs->gpus.out_while_running + ": the host is out");
      Event(event::kGpuUnhealthy, hs->name, "the host is out");
      continue;
    }
    for (int g : bad) {
      if (std::find(hs->gpus.out.begin(), hs->gpus.out.end(), g) == hs->gpus.out.end()) hs->gpus.out.push_back(g);
    }
    Say(hs->name + ": GPU(s) " + Indices(bad) + " taken out for the restart (unhealthy while the job ran)");
    Event(event::kGpuUnhealthy, hs->name, "GPU(s) " + Indices(bad) + " taken out");
    // GPU holds taken on an unhealthy GPU are taken again without it.
    if (hs->holds.reply) {
      const std::vector<int> ours = HeldGpus(*hs->holds.reply, plan_.job_id);
      if (std::any_of(ours.begin(), ours.end(), [&](int g) { return bad.contains(g); })) retake.push_back(hs);
    }
  }
  if (!retake.empty()) return holds_.TakeAgain(retake);
  return Status::Ok();
}

}  // namespace barge::runner::internal
