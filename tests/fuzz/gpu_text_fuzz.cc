// Fuzz target for what a host's NVIDIA driver and DCGM answer
// (runner/remote/gpu_health.h): ReadGpuReport with the input as each of
// the three sections (so ParseGpuQuery, ParseRemappedRows and ParseXids
// each read it once), ParseGpuQuery with the basic fields, Judge, and
// ReadDcgmDiag: every one on every input, so that the real outputs in
// tests/data/nvidia-smi seed them all unedited.
//
// Checks, besides "never crashes" and the sanitizers:
//   - query rows: the index is not negative, no field holds a line break,
//     every field error is a driver error answer of a field the query
//     asks; a row without errors written back as nvidia-smi writes it
//     (", "-separated, "[N/A]" for no value) reads back the same;
//   - remapped rows: a GPU- UUID or an error answer, counts not negative;
//     written back, a row without errors reads back the same;
//   - Xid events: a code of at most 5 digits, a time not negative, a PCI
//     address of hex groups, the text from "NVRM: Xid" and at most 300 bytes;
//   - findings (the report's under Judge, and DCGM's): a problem on one
//     line, GPU indices not negative; UnhealthyGpus and HostUnhealthy agree
//     with them; FindingsTable lays them out.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "runner/remote/gpu_health.h"
#include "tests/fuzz/fuzz_checks.h"

namespace {

namespace gpu = barge::runner::gpu;

constexpr char kTarget[] = "gpu_text_fuzz";

void Check(bool ok, const char* what, std::string_view detail = {}) {
  if (!ok) barge::fuzz::Fail(kTarget, what, detail);
}

bool OneLine(std::string_view s) { return s.find('\n') == std::string_view::npos; }

std::string Opt(const std::optional<long long>& v) { return v ? std::to_string(*v) : "[N/A]"; }
std::string Opt(const std::optional<bool>& v) { return v ? (*v ? "Yes" : "No") : "[N/A]"; }
std::string Text(const std::string& v) { return v.empty() ? "[N/A]" : v; }

// `g` as nvidia-smi's csv,noheader,nounits row ("\r\n": a field may end in
// "\r", which a bare "\n" would lose).
std::string QueryRow(const gpu::GpuInfo& g, bool basic) {
  std::string row = std::to_string(g.index) + ", " + g.uuid + ", " + g.name + ", " + g.driver + ", " +
                    Opt(g.memory_mib);
  if (!basic) {
    row += ", " + Opt(g.ecc_uncorrected) + ", " + Opt(g.retired_pending) + ", " + Text(g.mig) + ", " +
           Text(g.bus_id);
  }
  return row + "\r\n";
}

bool SameGpu(const gpu::GpuInfo& a, const gpu::GpuInfo& b) {
  return a.index == b.index && a.uuid == b.uuid && a.name == b.name && a.driver == b.driver &&
         a.memory_mib == b.memory_mib && a.ecc_uncorrected == b.ecc_uncorrected &&
         a.retired_pending == b.retired_pending && a.mig == b.mig && a.bus_id == b.bus_id &&
         a.errors.empty() && b.errors.empty();
}

void CheckErrors(const std::vector<gpu::FieldError>& errors, std::string_view query) {
  for (const gpu::FieldError& e : errors) {
    Check(gpu::IsDriverError(e.answer), "an error that is not a driver error answer", e.answer);
    Check(query.find(e.field) != std::string_view::npos, "an error of a field not asked", e.field);
  }
}

void CheckQuery(const std::vector<gpu::GpuInfo>& gpus, std::string_view text, bool basic) {
  Check(gpus.size() <= static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) + 1,
        "query: more GPUs than lines");
  for (const gpu::GpuInfo& g : gpus) {
    Check(g.index >= 0, "query: a negative index", QueryRow(g, basic));
    for (const std::string* f : {&g.uuid, &g.name, &g.driver, &g.mig, &g.bus_id}) {
      Check(OneLine(*f), "query: a field holding a line break", *f);
    }
    CheckErrors(g.errors, basic ? gpu::kBasicQuery : gpu::kFullQuery);
    if (!g.errors.empty()) continue;
    const std::vector<gpu::GpuInfo> again = gpu::ParseGpuQuery(QueryRow(g, basic), basic);
    Check(again.size() == 1 && SameGpu(again[0], g), "query: a row reads back otherwise", QueryRow(g, basic));
  }
}

void CheckRemapped(const std::vector<gpu::RemappedRows>& rows) {
  for (const gpu::RemappedRows& r : rows) {
    Check(r.uuid.rfind("GPU-", 0) == 0 || gpu::IsDriverError(r.uuid), "remapped: not a GPU's row", r.uuid);
    Check(r.correctable >= 0 && r.uncorrectable >= 0, "remapped: a negative count");
    CheckErrors(r.errors, gpu::kRemapQuery);
    if (!r.errors.empty()) continue;
    const std::string row = r.uuid + ", " + std::to_string(r.correctable) + ", " + std::to_string(r.uncorrectable) +
                            ", " + (r.pending ? "Yes" : "No") + ", " + (r.failure ? "Yes" : "No") + "\r\n";
    const std::vector<gpu::RemappedRows> again = gpu::ParseRemappedRows(row);
    Check(again.size() == 1 && again[0].uuid == r.uuid && again[0].correctable == r.correctable &&
              again[0].uncorrectable == r.uncorrectable && again[0].pending == r.pending &&
              again[0].failure == r.failure && again[0].errors.empty(),
          "remapped: a row reads back otherwise", row);
  }
}

void CheckXids(const std::vector<gpu::XidEvent>& events) {
  for (const gpu::XidEvent& e : events) {
    Check(e.code >= 0 && e.code <= 99999, "xid: a code of more than 5 digits");
    Check(e.at >= 0, "xid: a negative time");
    Check(!e.pci.empty() && e.pci.find_first_not_of("0123456789abcdefABCDEF:") == std::string::npos,
          "xid: a PCI address that is not hex groups", e.pci);
    Check(e.text.rfind("NVRM: Xid", 0) == 0 && e.text.size() <= 300, "xid: the text is not the event's", e.text);
  }
}

void CheckFindings(const std::vector<gpu::Finding>& findings) {
  std::set<int> fatal_gpus;
  bool host_fatal = false;
  for (const gpu::Finding& f : findings) {
    Check(!f.problem.empty() && OneLine(f.problem), "a problem not on one line", f.problem);
    Check(OneLine(f.seen), "a seen not on one line", f.seen);
    if (f.gpu) Check(*f.gpu >= 0, "a finding on a negative GPU index", f.problem);
    if (f.severity == gpu::Severity::kFatal) {
      if (f.gpu) fatal_gpus.insert(*f.gpu);
      host_fatal = host_fatal || !f.gpu;
    }
  }
  const std::vector<int> unhealthy = gpu::UnhealthyGpus(findings);
  Check(unhealthy == std::vector<int>(fatal_gpus.begin(), fatal_gpus.end()), "UnhealthyGpus disagrees");
  Check(gpu::HostUnhealthy(findings) == host_fatal, "HostUnhealthy disagrees");
}

void CheckReports(std::string_view text) {
  const gpu::SectionText ok{0, std::string(text)};
  const std::optional<int> expected = text.empty() ? std::nullopt : std::optional<int>(static_cast<int>(text.size() % 9));
  const std::chrono::seconds window(3600);
  const gpu::GpuReport whole = gpu::ReadGpuReport(ok, ok, ok);
  Check(whole.query_ok && whole.query_error.empty(), "a query that exited 0 failed", whole.query_error);
  Check(whole.remapped.has_value() && whole.xids.has_value(), "a section that exited 0 unread");
  CheckQuery(whole.gpus, text, whole.basic_fields);
  CheckRemapped(*whole.remapped);
  CheckXids(*whole.xids);
  const gpu::SectionText failed{1, std::string(text)}, killed{137, std::string(text)};
  std::vector<gpu::HostFindings> hosts = {
      {"judged", gpu::Judge(whole, expected, window)},
      {"no-window", gpu::Judge(whole, std::nullopt, std::chrono::seconds(0))},
      {"failed", gpu::Judge(gpu::ReadGpuReport(failed, failed, failed), expected, window)},
      {"killed", gpu::Judge(gpu::ReadGpuReport(killed, std::nullopt, killed), expected, window)},
      {"dcgm", gpu::ReadDcgmDiag(ok)},
      {"dcgm-killed", gpu::ReadDcgmDiag(killed)}};
  for (const gpu::HostFindings& h : hosts) CheckFindings(h.findings);
  (void)gpu::FindingsTable(hosts);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  CheckReports(text);
  CheckQuery(gpu::ParseGpuQuery(text, true), text, true);
  return 0;
}
