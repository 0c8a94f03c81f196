// `barge hosts`: the table and the JSON of the hosts' holds and containers.
#include "runner/remote/hosts_view.h"

#include <algorithm>
#include <ctime>

#include "runner/console/table.h"
#include "runner/remote/preflight_script.h"
#include "ssh/quote.h"
#include "runner/console/time_format.h"

namespace barge::runner {

namespace {

std::string Utc(long long t) { return FormatUtc(static_cast<std::time_t>(t), "%Y-%m-%dT%H:%M:%SZ"); }

// 1 for the first live ticket of the host's queue, ...; 0 for anything else.
int QueuePosition(const Hold& h, const std::vector<Hold>& queue) {
  for (size_t i = 0; i < queue.size(); ++i) {
    if (queue[i].id == h.id && queue[i].name == h.name) return static_cast<int>(i) + 1;
  }
  return 0;
}

std::string HoldWhat(const Hold& h, long long now, const std::vector<Hold>& queue) {
  if (IsTicket(h)) {
    const int at = QueuePosition(h, queue);
    return at > 0 ? "queued #" + std::to_string(at) : "ticket (stale)";
  }
  if (IsLease(h)) {
    std::optional<long long> t = LeaseRenewedAt(h.name);
    return "lease" + (t ? " (renewed " + ShortDuration(now - *t) + " ago)" : std::string());
  }
  std::string what = h.name.substr(std::min(h.name.size(), kHoldPrefix.size()));
  return "hold " + what;
}

// The record's rows of a host: each entry, then its verdict.
void RecordRows(const HostView& v, std::vector<std::vector<std::string>>* rows) {
  const std::vector<FaultEntry> record = RecordOf(v.holds);
  if (record.empty()) return;
  for (const FaultEntry& e : record) {
    const bool forgiven = e.kind == kForgivenKind;
    rows->push_back({v.host, forgiven ? "forgiven" : "failure " + e.kind,
                     forgiven ? e.user + "@" + e.machine : e.job_id + " " + e.job_name + " " + e.user + "@" + e.machine,
                     ShortDuration(v.now - e.at) + " ago", e.gpu ? std::to_string(*e.gpu) : "-",
                     e.detail.empty() ? "-" : e.detail});
  }
  const RecordVerdict verdict = JudgeRecord(record, v.now, v.rule);
  std::string what = std::to_string(verdict.counted.size()) + " host-caused failure(s) in " +
                     ShortDuration(v.rule.window.count()) + ", " + std::to_string(v.rule.allowed) + " allowed";
  if (!verdict.gpus_out.empty()) {
    what += "; GPU(s) out:";
    for (const auto& [g, e] : verdict.gpus_out) what += " " + std::to_string(g);
  }
  rows->push_back({v.host, verdict.host_out ? "record: OUT" : "record: usable", what, "", "",
                   verdict.host_out ? "barge hosts --forgive " + v.host : ""});
}

nlohmann::json RecordJson(const HostView& v) {
  const std::vector<FaultEntry> record = RecordOf(v.holds);
  const RecordVerdict verdict = JudgeRecord(record, v.now, v.rule);
  nlohmann::json out = {{"out", verdict.host_out},
                        {"counted", verdict.counted.size()},
                        {"allowed", v.rule.allowed},
                        {"window_s", v.rule.window.count()},
                        {"gpus_out", nlohmann::json::array()},
                        {"entries", nlohmann::json::array()}};
  for (const auto& [g, e] : verdict.gpus_out) out["gpus_out"].push_back(g);
  for (const FaultEntry& e : record) {
    out["entries"].push_back({{"at", Utc(e.at)}, {"kind", e.kind}, {"job", e.job_id}, {"job_name", e.job_name},
                              {"user", e.user}, {"machine", e.machine},
                              {"gpu", e.gpu ? nlohmann::json(*e.gpu) : nlohmann::json(nullptr)},
                              {"gpu_uuid", e.serial}, {"detail", e.detail}, {"name", e.name}});
  }
  return out;
}

}  // namespace

std::vector<BargeContainer> ParseBargeContainers(std::string_view text) {
  std::vector<BargeContainer> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? text.size() - pos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    if (line.rfind("ctr\t", 0) != 0) continue;
    std::vector<std::string> f = SplitTabs(line);
    if (f.size() < 7) continue;
    out.push_back({f[1], f[2], f[3], f[4], f[5], f[6]});
  }
  return out;
}

HostView ParseHostView(const std::string& host, std::string_view text) {
  HostView v;
  v.host = host;
  HoldReply reply = ParseHoldReply(text);
  v.now = reply.now;
  v.holds = std::move(reply.holds);
  v.containers = ParseBargeContainers(text);
  // ParseHoldReply keeps unknown lines as errors: the ctr lines are known.
  std::string errors;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? text.size() - pos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    if (line.rfind("error: ", 0) == 0) errors += (errors.empty() ? "" : "; ") + std::string(line.substr(7));
  }
  v.error = errors;
  return v;
}

std::string HostsTable(const std::vector<HostView>& hosts) {
  std::vector<std::vector<std::string>> rows = {
      {"HOST", "WHAT", "JOB (id, name, user@machine)", "SINCE", "GPUS", "STALE / STATUS"}};
  for (const HostView& v : hosts) {
    if (!v.error.empty()) {
      rows.push_back({v.host, "?", "cannot ask: " + v.error, "", "", ""});
      continue;
    }
    const bool held = std::any_of(v.holds.begin(), v.holds.end(), [](const Hold& h) { return !IsFault(h); });
    if (!held && v.containers.empty()) rows.push_back({v.host, "free", "", "", "", ""});
    const std::vector<Hold> queue = Queue(v.holds, v.now);
    for (const Hold& h : v.holds) {
      if (IsFault(h)) continue;  // RecordRows
      std::optional<long long> at = StaleAt(h);
      std::string stale = !at ? "never (not barge's)" : v.now > *at ? "stale now" : "in " + ShortDuration(*at - v.now);
      rows.push_back({v.host, HoldWhat(h, v.now, queue),
                      h.job_id + " " + h.job_name + " " + h.user + "@" + h.machine,
                      ShortDuration(v.now - h.since) + " ago", h.gpus.empty() ? "-" : h.gpus, stale});
    }
    for (const BargeContainer& c : v.containers) {
      rows.push_back({v.host, "container " + c.name + (c.rank.empty() ? "" : " (rank " + c.rank + ")"),
                      c.job_id, "", "", c.status});
    }
    RecordRows(v, &rows);
  }
  return FormatTable(rows);
}

nlohmann::json HostsJson(const std::vector<HostView>& hosts) {
  nlohmann::json out = nlohmann::json::array();
  for (const HostView& v : hosts) {
    nlohmann::json host = {{"host", v.host}, {"holds", nlohmann::json::array()}, {"containers", nlohmann::json::array()}};
    if (!v.error.empty()) host["error"] = v.error;
    const std::vector<Hold> queue = Queue(v.holds, v.now);
    host["record"] = RecordJson(v);
    for (const Hold& h : v.holds) {
      if (IsFault(h)) continue;  // in "record"
      std::optional<long long> at = StaleAt(h);
      host["holds"].push_back({{"name", h.name}, {"job", h.job_id}, {"job_name", h.job_name}, {"user", h.user},
                               {"machine", h.machine}, {"gpus", h.gpus}, {"since", Utc(h.since)},
                               {"stale_at", at ? nlohmann::json(Utc(*at)) : nlohmann::json(nullptr)},
                               {"stale", IsStale(h, v.now)}, {"lease", IsLease(h)},
                               {"ticket", IsTicket(h)},
                               {"queue_position", QueuePosition(h, queue) > 0
                                                      ? nlohmann::json(QueuePosition(h, queue))
                                                      : nlohmann::json(nullptr)},
                               {"lease_renewed", h.lease_renewed ? nlohmann::json(Utc(*h.lease_renewed))
                                                                 : nlohmann::json(nullptr)}});
    }
    for (const BargeContainer& c : v.containers) {
      host["containers"].push_back({{"id", c.id}, {"name", c.name}, {"job", c.job_id}, {"role", c.role},
                                    {"rank", c.rank}, {"status", c.status}});
    }
    if (v.gpus) {
      auto opt = [](const auto& o) { return o ? nlohmann::json(*o) : nlohmann::json(nullptr); };
      host["gpus"] = nlohmann::json::array();
      const std::vector<int> out = gpu::UnhealthyGpus(v.gpu_findings);
      for (const gpu::GpuInfo& g : v.gpus->gpus) {
        host["gpus"].push_back({{"index", g.index}, {"uuid", g.uuid}, {"name", g.name}, {"driver", g.driver},
                                {"memory_mib", opt(g.memory_mib)}, {"ecc_uncorrected", opt(g.ecc_uncorrected)},
                                {"retired_pages_pending", opt(g.retired_pending)}, {"mig", g.mig},
                                {"bus_id", g.bus_id},
                                {"healthy", std::find(out.begin(), out.end(), g.index) == out.end()}});
      }
      host["gpu_findings"] = nlohmann::json::array();
      for (const gpu::Finding& f : v.gpu_findings) {
        const char* sev = f.severity == gpu::Severity::kFatal     ? "fatal"
                          : f.severity == gpu::Severity::kWarning ? "warning"
                                                                  : "unknown";
        host["gpu_findings"].push_back({{"gpu", opt(f.gpu)}, {"problem", f.problem}, {"seen", f.seen}, {"severity", sev}});
      }
      host["host_healthy"] = !gpu::HostUnhealthy(v.gpu_findings);
      host["topology"] = v.topology;
    }
    out.push_back(std::move(host));
  }
  return out;
}

std::string HostGpuLines(const std::string& nvidia_smi, std::chrono::seconds timeout) {
  return SectionMarkers() + gpu::GpuHealthLines(nvidia_smi, timeout) + "bs gputopo; $H_T " + ssh::ShellQuote(nvidia_smi) +
         " topo -m 2>&1; be gputopo $?\n";
}

void ReadHostGpus(std::string_view text, std::optional<int> expected, std::chrono::seconds xid_window,
                  HostView* view) {
  const PreflightReply reply = ParsePreflightReply(text);
  auto section = [&](const char* name) -> std::optional<gpu::SectionText> {
    const PreflightSection* s = reply.Find(name);
    if (!s) return std::nullopt;
    return gpu::SectionText{s->exit, s->text};
  };
  view->gpus = gpu::ReadGpuReport(section("gpuq"), section("gpurm"), section("gpuxid"));
  view->gpu_findings = gpu::Judge(*view->gpus, expected, xid_window);
  if (const PreflightSection* t = reply.Find("gputopo"); t && t->exit == 0) {
    // The driver's own header underlines with terminal escapes: dropped.
    std::string clean;
    for (size_t i = 0; i < t->text.size(); ++i) {
      if (t->text[i] == '\x1b') {
        while (i < t->text.size() && t->text[i] != 'm') ++i;
        continue;
      }
      clean += t->text[i];
    }
    view->topology = clean;
  }
}

std::string HostsGpuTable(const std::vector<HostView>& hosts) {
  std::vector<std::vector<std::string>> rows = {{"HOST", "GPU", "NAME", "MEMORY", "DRIVER", "HEALTH"}};
  std::vector<gpu::HostFindings> findings;
  std::string topo;
  for (const HostView& v : hosts) {
    if (!v.error.empty()) {
      rows.push_back({v.host, "?", "cannot ask: " + v.error, "", "", ""});
      continue;
    }
    if (!v.gpus) continue;
    const std::vector<int> out = gpu::UnhealthyGpus(v.gpu_findings);
    for (const gpu::GpuInfo& g : v.gpus->gpus) {
      const bool bad = std::find(out.begin(), out.end(), g.index) != out.end();
      rows.push_back({v.host, std::to_string(g.index), g.name,
                      g.memory_mib ? std::to_string(*g.memory_mib) + " MiB" : "?", g.driver,
                      bad ? "unhealthy" : "ok"});
    }
    if (v.gpus->gpus.empty()) rows.push_back({v.host, "-", "no GPU seen", "", "", gpu::HostUnhealthy(v.gpu_findings) ? "unhealthy" : ""});
    if (!v.gpu_findings.empty()) findings.push_back({v.host, v.gpu_findings});
    if (!v.topology.empty()) {
      topo += "\n" + v.host + " (nvidia-smi topo -m):\n";
      for (size_t start = 0, end; start < v.topology.size(); start = end + 1) {
        end = v.topology.find('\n', start);
        if (end == std::string::npos) end = v.topology.size();
        topo += "  " + v.topology.substr(start, end - start) + "\n";
      }
    }
  }
  std::string s = FormatTable(rows);
  if (!findings.empty()) s += "\n" + gpu::FindingsTable(findings);
  return s + topo;
}

}  // namespace barge::runner
