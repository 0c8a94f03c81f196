// HostRecords (host_records.h): the hosts' failure records in the job.
#include "runner/controller/host_records.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>

#include "runner/console/table.h"
#include "runner/controller/job_state.h"
#include "runner/controller/progress_watch.h"

namespace barge::runner::internal {

namespace {

// Who writes an entry: this machine's user and host name.
void WriterOf(FaultEntry* e) {
  if (const passwd* pw = getpwuid(geteuid())) e->user = pw->pw_name;
  if (e->user.empty()) e->user = std::to_string(geteuid());
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) e->machine = host;
}

// The UUID of GPU `index` as the host's driver said it (preflight's
// query), "" when not asked.
std::string UuidOf(const HostState& hs, int index) {
  if (!hs.gpus.report) return "";
  for (const gpu::GpuInfo& g : hs.gpus.report->gpus) {
    if (g.index == index) return g.uuid;
  }
  return "";
}

constexpr std::string_view kFromRecord = "recorded on the host: ";

// The host's hardware failing (gpu::IsHardwareFault), not read from the
// record itself (a GPU the record put out): the host's news. Not a finding
// of the job's own making (its nodes name GPUs, too few left), a missing
// nvidia-smi or a host without the GPUs the job asks for.
bool WorthRecording(const gpu::Finding& f) {
  return gpu::IsHardwareFault(f) && f.problem.rfind(kFromRecord, 0) != 0;
}

// The line of a hang's detail that names the host it is traced to
// (progress_watch.h), else its first line.
std::string TracedLine(std::string_view detail) {
  size_t at = 0;
  if (detail.rfind(kTracedTo, 0) != 0) {
    const size_t line = detail.find("\n" + std::string(kTracedTo));
    if (line != std::string_view::npos) at = line + 1;
  }
  return std::string(detail.substr(at, detail.find('\n', at) - at));
}

}  // namespace

RecordRule RuleOf(const JobSpec& spec) {
  return {spec.health.host_failures, std::chrono::duration_cast<std::chrono::seconds>(spec.health.host_window)};
}

HostState* HostRecords::Find(const std::string& name) {
  for (HostState* hs : hosts_.All()) {
    if (hs->name == name) return hs;
  }
  for (auto& old : hosts_.retired) {
    if (old->name == name) return old.get();
  }
  return nullptr;
}

void HostRecords::Apply(const std::vector<HostState*>& hosts, std::vector<HostState*>* out) {
  const RecordRule rule = RuleOf(ctx_.spec);
  for (HostState* hs : hosts) {
    if (!hs->holds.reply) continue;
    const std::vector<FaultEntry> record = RecordOf(hs->holds.reply->holds);
    if (record.empty()) continue;
    std::map<int, std::string> uuids;
    if (hs->gpus.report) {
      for (const gpu::GpuInfo& g : hs->gpus.report->gpus) uuids[g.index] = g.uuid;
    }
    const RecordVerdict v = JudgeRecord(record, hs->holds.reply->now, rule, uuids);
    if (v.host_out) {
      const std::string why = OutReason(hs->name, v, rule);
      out_why_[hs->name] = why;
      out->push_back(hs);
      Say(hs->name + ": out of the job's choice: " + why);
      Event(event::kHostAvoided, hs->name, why);
      continue;
    }
    if (!hs->gpus.report) continue;  // no GPU of it asked for
    for (const auto& [index, entry] : v.gpus_out) {
      hs->gpus.findings.push_back({index, GpuOutReason(entry), "", gpu::Severity::kFatal});
    }
  }
}

Status HostRecords::Admit(HostState& host) {
  std::vector<HostState*> out;
  Apply({&host}, &out);
  if (out.empty()) return Status::Ok();
  return Status::Error(out_why_[host.name]);
}

Status HostRecords::OutError(const std::vector<HostState*>& out, size_t total) const {
  std::vector<std::vector<std::string>> cells = {{"HOST", "WHY"}};
  for (const HostState* hs : out) {
    auto it = out_why_.find(hs->name);
    cells.push_back({hs->name, it == out_why_.end() ? "" : it->second});
  }
  std::string table;
  const std::string t = FormatTable(cells);
  for (size_t start = 0, end; start < t.size(); start = end + 1) {
    end = t.find('\n', start);
    if (end == std::string::npos) end = t.size();
    table += "  " + t.substr(start, end - start) + "\n";
  }
  const std::string not_busy = ctx_.options.wait || ctx_.spec.wait
                                   ? "  (unavailable, not busy: a job does not wait for a host its record puts out)\n"
                                   : "";
  return Status::Error(std::to_string(out.size()) + " of " + std::to_string(total) +
                       " host(s) are out by their failure record" +
                       (ctx_.spec.spare_hosts.empty() ? std::string() : " and no spare host is left to take their place") +
                       "; nothing was started:\n" + table + not_busy);
}

void HostRecords::Note(const std::string& host, HostFaultKind kind, const std::string& detail, std::optional<int> gpu,
                       const std::string& serial) {
  std::vector<FaultEntry>& list = noted_[host];
  const std::string name(NameOf(kHostFaultKindNames, kind));
  for (const FaultEntry& e : list) {
    if (e.kind == name && e.gpu == gpu) return;  // once per job
  }
  FaultEntry e;
  e.kind = name;
  e.job_id = ctx_.job_id;
  e.job_name = ctx_.spec.name;
  e.gpu = gpu;
  e.serial = serial;
  e.detail = FaultDetail(ctx_.redact(detail));
  WriterOf(&e);
  list.push_back(std::move(e));
}

void HostRecords::HostEnded(const HostPhase& p, TimePoint, bool ok, std::string_view detail) {
  if (ok || p.rank) return;
  // A host whose record put it out is not failing anew.
  if (detail.find("its failure record") != std::string_view::npos) return;
  const char* phase = ToString(p.phase);
  const HostState* hs = Find(p.host);
  const std::optional<HostFaultKind> kind = RecordedFailureOf(phase, detail, hs && hs->exec);
  if (kind) Note(p.host, *kind, std::string(phase) + ": " + std::string(detail));
}

void HostRecords::JobEvent(std::string_view kind, const std::optional<std::string>& host, std::string_view detail,
                           TimePoint) {
  if (!host || host->empty()) return;
  if (kind == event::kHostLost) {
    Note(*host, HostFaultKind::kHostLost, std::string(detail));
  } else if (kind == event::kHang) {
    // A hang that names a host is traced to it (progress_watch.h): the
    // entry keeps the line that says why.
    Note(*host, HostFaultKind::kHang, TracedLine(detail));
  } else if (kind == event::kGpuUnhealthy) {
    // While the job ran (gpu_watch.h): its GPUs found unhealthy, or the
    // whole host; the start's findings are read at the end.
    HostState* hs = Find(*host);
    if (!hs) return;
    for (int g : hs->gpus.failed_while_running) Note(*host, HostFaultKind::kHealth, std::string(detail), g, UuidOf(*hs, g));
    // (Not out_while_running itself: too few GPUs left, or a missing
    // nvidia-smi, put the host out without its hardware failing.)
    if (!hs->gpus.hardware_fault_while_running.empty()) {
      Note(*host, HostFaultKind::kHealth, hs->gpus.hardware_fault_while_running);
    }
  }
}

void HostRecords::NoteGpuFindings() {
  std::vector<HostState*> all = hosts_.All();
  for (auto& old : hosts_.retired) all.push_back(old.get());
  const RecordRule rule = RuleOf(ctx_.spec);
  for (HostState* hs : all) {
    // A host its record put out was not used: what its driver says is
    // known already, and would only fill the record.
    if (out_why_.count(hs->name)) continue;
    // A GPU the record holds out already is not written again (an Xid
    // stays in the kernel log for every later job to see).
    std::map<int, FaultEntry> known;
    if (hs->holds.reply) {
      known = JudgeRecord(RecordOf(hs->holds.reply->holds), hs->holds.reply->now, rule).gpus_out;
    }
    for (const gpu::Finding& f : hs->gpus.findings) {
      if (!WorthRecording(f) || (f.gpu && known.count(*f.gpu))) continue;
      const std::string detail = (f.gpu ? "GPU " + std::to_string(*f.gpu) + ": " : std::string()) + f.problem +
                                 (f.seen.empty() ? "" : " (" + f.seen + ")");
      Note(hs->name, HostFaultKind::kHealth, detail, f.gpu, f.gpu ? UuidOf(*hs, *f.gpu) : "");
    }
  }
}

void HostRecords::WriteRecords() {
  NoteGpuFindings();
  if (noted_.empty()) return;
  CommandGroup group(&ctx_.loop, &ctx_.redact);
  const auto timeout = std::chrono::duration_cast<std::chrono::seconds>(ctx_.spec.ssh.engine_timeout);
  int seq = 0;
  for (const auto& [name, entries] : noted_) {
    HostState* hs = Find(name);
    ++seq;
    if (!hs || !hs->exec || !hs->docker) {
      Say(name + ": its failure record could not be written (no session to it): " + entries.front().kind);
      continue;
    }
    // (A copy: a structured binding cannot be captured before C++20's
    // P1091 is in every compiler CI builds with; clang 14 lacks it.)
    group.Run(*hs->exec, RecordFaultsCommand(*hs->docker, entries, seq, timeout), [this, host = name](const Outcome& o) {
      if (!o.ok()) Say(host + ": its failure record could not be written: " + o.Reason());
    });
    Say(name + ": recorded on the host: " + std::to_string(entries.size()) + " host-caused failure(s) (" +
        entries.front().kind + (entries.size() > 1 ? ", ..." : "") + "); `barge hosts` shows the record");
  }
  RunWhileProgressing(group, std::chrono::seconds(10));
  group.Cancel();
}

}  // namespace barge::runner::internal
