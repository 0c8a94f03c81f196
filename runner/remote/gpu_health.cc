// The GPU health gate (gpu_health.h): the driver's answers and the rules.
#include "runner/remote/gpu_health.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <regex>
#include <set>

#include <nlohmann/json.hpp>

#include "base/json_depth.h"
#include "base/lines.h"
#include "runner/console/table.h"
#include "runner/remote/preflight_script.h"
#include "ssh/quote.h"

namespace barge::runner::gpu {

namespace {

// The starts of the findings' problems that IsHardwareFault reads: each is
// written only here.
constexpr std::string_view kSmiNoAnswer = "nvidia-smi did not answer in time (killed by its timeout)";
constexpr std::string_view kDcgmNoAnswer = "dcgmi diag did not answer in time (killed by its timeout)";
constexpr std::string_view kXidStart = "Xid ";
constexpr std::string_view kRemappedStart = "remapped rows: ";
constexpr std::string_view kRemappingStart = "row remapping ";
constexpr std::string_view kDcgmTestStart = "DCGM diagnostic: ";

struct XidRule {
  int code;
  bool fatal;
  const char* what;
  const char* action;
};

// The Xids the rules act on, with what NVIDIA's Xid catalog (Ampere and
// newer) has the operator do about each. 63 (a row marked for remapping)
// is read from the pending-remap flag instead.
constexpr XidRule kXids[] = {
    {48, true, "double-bit ECC error", "reset the GPU"},
    {64, true, "ECC page retirement or row remapping failed", "reset the GPU; contact support if it recurs"},
    {74, true, "NVLink error", "reset the GPU"},
    {79, true, "GPU has fallen off the bus", "reboot the host"},
    {92, false, "high single-bit ECC error rate", "watch it; none needed now"},
    {94, false, "contained ECC error", "restart the application; reset the GPU when convenient"},
    {95, true, "uncontained ECC error", "reset the GPU"},
    {119, true, "GSP RPC timeout", "reset the GPU"},
    {120, true, "GSP error", "reset the GPU"},
    {154, true, "GPU recovery action changed", "do the reset or reboot the log line names"},
};

const XidRule* RuleOf(int code) {
  for (const XidRule& r : kXids) {
    if (r.code == code) return &r;
  }
  return nullptr;
}


std::vector<std::string> Fields(std::string_view line) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (true) {
    size_t comma = line.find(',', pos);
    std::string_view f = line.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    while (!f.empty() && f.front() == ' ') f.remove_prefix(1);
    while (!f.empty() && f.back() == ' ') f.remove_suffix(1);
    out.emplace_back(f);
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return out;
}

bool Unreadable(const std::string& v) { return v.empty() || v.front() == '[' || v == "N/A" || IsDriverError(v); }

// The field names of a query ("index,uuid,...").
std::vector<std::string> QueryFields(std::string_view query) { return Fields(query); }

// Every value of `f` the driver answered with an error, named by `names`.
std::vector<FieldError> ErrorsIn(const std::vector<std::string>& f, const std::vector<std::string>& names) {
  std::vector<FieldError> out;
  for (size_t i = 0; i < f.size() && i < names.size(); ++i) {
    if (IsDriverError(f[i])) out.push_back({names[i], f[i]});
  }
  return out;
}

// "the driver answers [GPU is lost] for every field it was asked (reboot
// the host)", or "... [Unknown Error] for memory.total, mig.mode.current
// (reset the GPU)": one phrase per answer, the fields named.
std::string ErrorsProblem(const std::vector<FieldError>& errors, size_t fields_asked) {
  std::vector<std::string> answers;
  for (const FieldError& e : errors) {
    if (std::find(answers.begin(), answers.end(), e.answer) == answers.end()) answers.push_back(e.answer);
  }
  std::string out;
  bool lost = false;
  for (const std::string& a : answers) {
    std::string fields;
    size_t n = 0;
    for (const FieldError& e : errors) {
      if (e.answer != a) continue;
      fields += (fields.empty() ? "" : ", ") + e.field;
      ++n;
    }
    lost = lost || a == "[GPU is lost]";
    out += (out.empty() ? "the driver answers " : "; ") + a + " for " +
           (n == fields_asked && answers.size() == 1 ? "every field it was asked (" + fields + ")" : fields);
  }
  return out + (lost ? " (reboot the host)" : " (reset the GPU)");
}

std::optional<long long> Number(const std::string& v) {
  if (Unreadable(v)) return std::nullopt;
  if (!std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; }) || v.size() > 15) {
    return std::nullopt;
  }
  return std::stoll(v);
}

std::optional<bool> YesNo(const std::string& v) {
  if (v == "Yes") return true;
  if (v == "No") return false;
  return std::nullopt;
}

// (domain, bus, device) of a PCI address as nvidia-smi ("00000000:00:06.0")
// or the kernel log ("0000:00:06") writes it.
std::optional<std::tuple<long, long, long>> PciKey(std::string_view s) {
  if (s.rfind("PCI:", 0) == 0) s.remove_prefix(4);
  const size_t dot = s.find('.');
  if (dot != std::string_view::npos) s = s.substr(0, dot);
  std::vector<std::string> parts;
  size_t pos = 0;
  while (true) {
    size_t colon = s.find(':', pos);
    parts.emplace_back(s.substr(pos, colon == std::string_view::npos ? std::string_view::npos : colon - pos));
    if (colon == std::string_view::npos) break;
    pos = colon + 1;
  }
  if (parts.size() != 3) return std::nullopt;
  long v[3];
  for (int i = 0; i < 3; ++i) {
    if (parts[i].empty() || parts[i].size() > 8) return std::nullopt;
    char* end = nullptr;
    v[i] = std::strtol(parts[i].c_str(), &end, 16);
    if (end == nullptr || *end != '\0') return std::nullopt;
  }
  return std::make_tuple(v[0], v[1], v[2]);
}

std::string Ago(double seconds) {
  const long long s = std::llround(std::max(0.0, seconds));
  char buf[32];
  if (s < 60) {
    std::snprintf(buf, sizeof buf, "%llds ago", s);
  } else if (s < 3600) {
    std::snprintf(buf, sizeof buf, "%lldm ago", s / 60);
  } else if (s < 86400) {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm ago", s / 3600, s % 3600 / 60);
  } else {
    std::snprintf(buf, sizeof buf, "%lldd ago", s / 86400);
  }
  return buf;
}

std::string FirstLine(std::string_view text) {
  std::vector<std::string_view> lines = SplitLines(text);
  for (std::string_view l : lines) {
    if (!l.empty()) return std::string(l.substr(0, 200));
  }
  return "";
}

}  // namespace

bool IsDriverError(std::string_view answer) {
  return std::find(std::begin(kDriverErrorAnswers), std::end(kDriverErrorAnswers), answer) !=
         std::end(kDriverErrorAnswers);
}

std::string XidAction(int code) {
  const XidRule* r = RuleOf(code);
  return r ? r->action : "";
}
bool IsFatalXid(int code) {
  const XidRule* r = RuleOf(code);
  return r && r->fatal;
}
bool IsWarningXid(int code) {
  const XidRule* r = RuleOf(code);
  return r && !r->fatal;
}

XidClass ClassOfXid(int code, const XidPolicy& policy) {
  auto listed = [code](const std::vector<int>& v) { return std::find(v.begin(), v.end(), code) != v.end(); };
  if (listed(policy.ignore)) return XidClass::kNotCounted;
  if (listed(policy.fatal)) return XidClass::kFatal;
  if (listed(policy.warning)) return XidClass::kWarning;
  const XidRule* r = RuleOf(code);
  if (r == nullptr) return XidClass::kNotCounted;
  return r->fatal ? XidClass::kFatal : XidClass::kWarning;
}

std::string GpuWatchCommand(std::string_view nvidia_smi, std::chrono::seconds timeout, bool health, bool util) {
  const std::string t = std::to_string(std::max<long long>(1, timeout.count()));
  // The section markers (preflight_script.h) first: the reply is read as
  // preflight's.
  std::string s = SectionMarkers() + "echo barge-gpuwatch\nH_T=; command -v timeout >/dev/null 2>&1 && H_T='timeout -s KILL " + t + "'\n";
  if (health) s += GpuHealthLines(nvidia_smi, timeout);
  if (util) {
    s += "bs gpuutil; $H_T " + ssh::ShellQuote(std::string(nvidia_smi)) + " --query-gpu=" + std::string(kUtilQuery) +
         " --format=csv,noheader,nounits 2>&1; be gpuutil $?\n";
  }
  return s;
}

std::vector<GpuUtil> ParseGpuUtil(std::string_view text) {
  std::vector<GpuUtil> out;
  for (std::string_view line : SplitLines(text)) {
    std::vector<std::string> f = Fields(line);
    if (f.size() != 2) continue;
    std::optional<long long> index = Number(f[0]);
    if (!index || *index > std::numeric_limits<int>::max()) continue;
    std::optional<long long> percent = Number(f[1]);
    if (percent && *percent > 100) percent.reset();
    out.push_back({static_cast<int>(*index), percent ? std::optional<int>(static_cast<int>(*percent)) : std::nullopt});
  }
  return out;
}

std::string GpuHealthLines(std::string_view nvidia_smi, std::chrono::seconds timeout) {
  const std::string smi = ssh::ShellQuote(std::string(nvidia_smi));
  // The driver's lines only, before the count (gpu_health.h).
  const std::string xid_lines = "grep -E " + ssh::ShellQuote(std::string(kXidLinePattern)) + " | tail -n 200";
  const std::string t = std::to_string(std::max<long long>(1, timeout.count()));
  std::string s;
  s += "H_T=; command -v timeout >/dev/null 2>&1 && H_T='timeout -s KILL " + t + "'\n";
  // The query: the full fields, or the basic ones where the driver refuses
  // one of them (a whole query fails on one unknown field).
  s += "bs gpuq; H_q=$($H_T " + smi + " --query-gpu=" + std::string(kFullQuery) +
       " --format=csv,noheader,nounits 2>&1); H_r=$?; case $H_q in *'is not a valid field'*) echo 'fields basic'; "
       "H_q=$($H_T " + smi + " --query-gpu=" + std::string(kBasicQuery) +
       " --format=csv,noheader,nounits 2>&1); H_r=$?;; *) echo 'fields full';; esac; "
       "printf '%s\\n' \"$H_q\"; be gpuq $H_r\n";
  s += "bs gpurm; $H_T " + smi + " --query-remapped-rows=" + std::string(kRemapQuery) +
       " --format=csv,noheader,nounits 2>&1; be gpurm $?\n";
  // The kernel log: dmesg, else this boot's kernel journal (whose hint
  // about missing permissions means it showed nothing).
  s += "bs gpuxid; H_u=; read -r H_u H_x </proc/uptime 2>/dev/null; echo \"uptime ${H_u:-?}\"; "
       "if H_k=$($H_T dmesg 2>&1); then echo 'source dmesg'; printf '%s\\n' \"$H_k\" | " + xid_lines +
       "; be gpuxid 0; elif command -v journalctl >/dev/null 2>&1 && H_j=$($H_T journalctl -k -b --no-pager -o short-monotonic 2>&1) "
       "&& case $H_j in *'insufficient permissions'*|*'not seeing messages'*) false;; *) :;; esac; then "
       "echo 'source journal'; printf '%s\\n' \"$H_j\" | " + xid_lines + "; be gpuxid 0; "
       "else printf 'unreadable: %s\\n' \"$(printf '%s' \"$H_k\" | head -n 1)\"; be gpuxid 1; fi\n";
  return s;
}

std::vector<GpuInfo> ParseGpuQuery(std::string_view text, bool basic_fields) {
  std::vector<GpuInfo> out;
  const std::vector<std::string> names = QueryFields(basic_fields ? kBasicQuery : kFullQuery);
  for (std::string_view line : SplitLines(text)) {
    std::vector<std::string> f = Fields(line);
    if (f.size() != names.size()) continue;
    std::optional<long long> index = Number(f[0]);
    if (index && *index > std::numeric_limits<int>::max()) continue;  // no GPU's index
    // A row whose index is an error answer is still a GPU: the row's place.
    if (!index && IsDriverError(f[0])) index = static_cast<long long>(out.size());
    if (!index) continue;
    GpuInfo g;
    g.index = static_cast<int>(*index);
    g.uuid = f[1];
    g.name = f[2];
    g.driver = f[3];
    g.memory_mib = Number(f[4]);
    if (!basic_fields) {
      g.ecc_uncorrected = Number(f[5]);
      g.retired_pending = YesNo(f[6]);
      g.mig = Unreadable(f[7]) ? "" : f[7];
      g.bus_id = Unreadable(f[8]) ? "" : f[8];
    }
    g.errors = ErrorsIn(f, names);
    out.push_back(std::move(g));
  }
  return out;
}

std::vector<RemappedRows> ParseRemappedRows(std::string_view text) {
  std::vector<RemappedRows> out;
  const std::vector<std::string> names = QueryFields(kRemapQuery);
  for (std::string_view line : SplitLines(text)) {
    std::vector<std::string> f = Fields(line);
    if (f.size() != names.size() || (f[0].rfind("GPU-", 0) != 0 && !IsDriverError(f[0]))) continue;
    RemappedRows r;
    r.uuid = f[0];
    r.correctable = Number(f[1]).value_or(0);
    r.uncorrectable = Number(f[2]).value_or(0);
    r.pending = YesNo(f[3]).value_or(false);
    r.failure = YesNo(f[4]).value_or(false);
    r.errors = ErrorsIn(f, names);
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<XidEvent> ParseXids(std::string_view log) {
  static const std::regex kLine(std::string(kXidLinePattern), std::regex::extended);
  std::vector<XidEvent> out;
  for (std::string_view line : SplitLines(log)) {
    // The pattern is anchored: tried at the line's start only (a search
    // would set up a match at every byte), on lines that can match.
    if (line.find("NVRM: Xid ") == std::string_view::npos) continue;
    std::match_results<std::string_view::const_iterator> m;
    if (!std::regex_search(line.begin(), line.end(), m, kLine, std::regex_constants::match_continuous)) continue;
    XidEvent e;
    if (m[2].matched) e.at = std::strtod(m[2].str().c_str(), nullptr);
    e.pci = m[6].str();
    e.code = std::stoi(m[8].str());
    e.text = std::string(line.substr(line.find("NVRM: Xid"), 300));
    out.push_back(std::move(e));
  }
  return out;
}

GpuReport ReadGpuReport(const std::optional<SectionText>& query, const std::optional<SectionText>& remapped,
                        const std::optional<SectionText>& xid) {
  GpuReport r;
  if (!query) {
    r.query_error = "the GPU query did not report";
  } else {
    std::string_view text = query->text;
    if (text.rfind("fields basic\n", 0) == 0 || text == "fields basic") {
      r.basic_fields = true;
      text.remove_prefix(std::min(text.size(), size_t{13}));
    } else if (text.rfind("fields full\n", 0) == 0 || text == "fields full") {
      text.remove_prefix(std::min(text.size(), size_t{12}));
    }
    if (query->exit == 137) {
      r.query_error = std::string(kSmiNoAnswer);
    } else if (query->exit != 0) {
      const std::string said = FirstLine(text);
      r.query_error = "nvidia-smi failed (exit " + std::to_string(query->exit) + ")" + (said.empty() ? "" : ": " + said);
    } else {
      r.query_ok = true;
      r.gpus = ParseGpuQuery(text, r.basic_fields);
    }
  }
  if (remapped && remapped->exit == 0) {
    r.remapped = ParseRemappedRows(remapped->text);
  } else {
    r.remapped_error = remapped ? FirstLine(remapped->text) : "did not report";
  }
  if (xid) {
    std::string_view text = xid->text;
    std::vector<std::string_view> lines = SplitLines(text);
    for (std::string_view l : lines) {
      if (l.rfind("uptime ", 0) == 0) {
        std::string v(l.substr(7));
        char* end = nullptr;
        const double u = std::strtod(v.c_str(), &end);
        if (end != v.c_str()) r.uptime = u;
      } else if (l.rfind("source ", 0) == 0) {
        r.xid_source = std::string(l.substr(7));
      } else if (l.rfind("unreadable: ", 0) == 0) {
        r.xid_error = std::string(l.substr(12));
      }
    }
    if (xid->exit == 0) {
      r.xids = ParseXids(text);
    } else if (r.xid_error.empty()) {
      r.xid_error = xid->exit == 137 ? "reading it timed out" : "exit " + std::to_string(xid->exit);
    }
  } else {
    r.xid_error = "did not report";
  }
  return r;
}

std::vector<Finding> Judge(const GpuReport& report, std::optional<int> expected_gpus,
                           std::chrono::seconds xid_window, const XidPolicy& xids) {
  std::vector<Finding> out;
  if (!report.query_ok) {
    out.push_back({std::nullopt, report.query_error, "now", Severity::kFatal});
    return out;
  }
  const int seen = static_cast<int>(report.gpus.size());
  if (seen == 0) {
    out.push_back({std::nullopt, "the driver sees no GPU", "now", Severity::kFatal});
  } else if (expected_gpus && seen < *expected_gpus) {
    out.push_back({std::nullopt,
                   "the driver sees " + std::to_string(seen) + " GPU(s), the inventory says " +
                       std::to_string(*expected_gpus),
                   "now", Severity::kFatal});
  }
  std::map<std::string, int> by_uuid;
  std::map<std::tuple<long, long, long>, int> by_pci;
  const size_t fields_asked = QueryFields(report.basic_fields ? kBasicQuery : kFullQuery).size();
  for (const GpuInfo& g : report.gpus) {
    if (!IsDriverError(g.uuid)) by_uuid[g.uuid] = g.index;
    if (auto k = PciKey(g.bus_id)) by_pci[*k] = g.index;
    if (!g.errors.empty()) {
      out.push_back({g.index, ErrorsProblem(g.errors, fields_asked), "now", Severity::kFatal});
    }
    if (g.ecc_uncorrected && *g.ecc_uncorrected > 0) {
      out.push_back({g.index,
                     std::to_string(*g.ecc_uncorrected) +
                         " uncorrectable ECC error(s) since the driver loaded (reset the GPU)",
                     "now", Severity::kFatal});
    }
    if (g.retired_pending && *g.retired_pending) {
      out.push_back({g.index, "pages pending retirement (reset the GPU)", "now", Severity::kFatal});
    }
  }
  if (report.remapped) {
    const std::vector<RemappedRows>& rows = *report.remapped;
    for (size_t i = 0; i < rows.size(); ++i) {
      const RemappedRows& r = rows[i];
      auto it = by_uuid.find(r.uuid);
      std::optional<int> gpu = it == by_uuid.end() ? std::nullopt : std::optional<int>(it->second);
      // A row whose UUID is an error answer: its place, where the rows are
      // one per GPU; else the whole host's.
      if (!gpu && IsDriverError(r.uuid) && rows.size() == report.gpus.size()) gpu = report.gpus[i].index;
      if (!r.errors.empty()) {
        out.push_back({gpu, std::string(kRemappedStart) + ErrorsProblem(r.errors, QueryFields(kRemapQuery).size()), "now",
                       Severity::kFatal});
        continue;
      }
      if (r.failure) {
        out.push_back({gpu, std::string(kRemappingStart) + "failed (contact support)", "now", Severity::kFatal});
      } else if (r.pending) {
        out.push_back({gpu, std::string(kRemappingStart) + "pending (reset the GPU)", "now", Severity::kFatal});
      }
    }
  } else if (std::any_of(report.gpus.begin(), report.gpus.end(),
                         [](const GpuInfo& g) { return !g.retired_pending.has_value(); })) {
    // Neither retired pages nor remapped rows could be read.
    out.push_back({std::nullopt,
                   "remapped rows unknown (" + (report.remapped_error.empty() ? std::string("not readable")
                                                                              : report.remapped_error) +
                       ")",
                   "", Severity::kUnknown});
  }
  if (!report.xids) {
    out.push_back({std::nullopt,
                   "Xid events unknown: the kernel log cannot be read" +
                       (report.xid_error.empty() ? std::string() : " (" + report.xid_error + ")"),
                   "", Severity::kUnknown});
  } else {
    // The newest event of each code on each GPU, within the window.
    std::set<std::pair<std::string, int>> said;
    for (auto it = report.xids->rbegin(); it != report.xids->rend(); ++it) {
      const XidEvent& e = *it;
      const XidClass cls = ClassOfXid(e.code, xids);
      if (cls == XidClass::kNotCounted) continue;
      if (xids.after && !(e.at > *xids.after)) continue;
      const XidRule* rule = RuleOf(e.code);
      const std::optional<double> age =
          report.uptime ? std::optional<double>(*report.uptime - e.at) : std::nullopt;
      if (age && *age > static_cast<double>(xid_window.count())) continue;
      if (!said.insert({e.pci, e.code}).second) continue;
      std::optional<int> gpu;
      if (auto k = PciKey(e.pci)) {
        auto g = by_pci.find(*k);
        if (g != by_pci.end()) gpu = g->second;
      }
      // A code the catalog does not describe counts because health.xids lists it.
      const std::string what = rule ? std::string(rule->what) + " (" + rule->action + ")"
                                    : std::string(cls == XidClass::kFatal ? "fatal" : "a warning") +
                                          " by health.xids";
      out.push_back({gpu, std::string(kXidStart) + std::to_string(e.code) + ": " + what + (gpu ? "" : " on PCI " + e.pci),
                     age ? Ago(*age) : "since boot", cls == XidClass::kFatal ? Severity::kFatal : Severity::kWarning});
    }
  }
  return out;
}

bool IsHardwareFault(const Finding& f) {
  if (f.severity != Severity::kFatal) return false;
  if (f.gpu) return true;  // Judge and ReadDcgmDiag name a GPU only for its own errors
  const std::string_view p = f.problem;
  for (std::string_view start : {kXidStart, kRemappedStart, kRemappingStart, kDcgmTestStart}) {
    if (p.rfind(start, 0) == 0) return true;
  }
  return p == kSmiNoAnswer || p == kDcgmNoAnswer;
}

std::vector<int> UnhealthyGpus(const std::vector<Finding>& findings) {
  std::set<int> out;
  for (const Finding& f : findings) {
    if (f.severity == Severity::kFatal && f.gpu) out.insert(*f.gpu);
  }
  return {out.begin(), out.end()};
}

bool HostUnhealthy(const std::vector<Finding>& findings) {
  return std::any_of(findings.begin(), findings.end(),
                     [](const Finding& f) { return f.severity == Severity::kFatal && !f.gpu; });
}

std::string FindingsTable(const std::vector<HostFindings>& hosts) {
  std::vector<std::vector<std::string>> rows = {{"HOST", "GPU", "PROBLEM", "SEEN"}};
  for (const HostFindings& h : hosts) {
    for (const Finding& f : h.findings) {
      std::string problem = f.problem;
      if (f.severity == Severity::kWarning) problem = "warning: " + problem;
      if (f.severity == Severity::kUnknown) problem = "unknown: " + problem;
      rows.push_back({h.host, f.gpu ? std::to_string(*f.gpu) : "-", problem, f.seen.empty() ? "-" : f.seen});
    }
  }
  return FormatTable(rows);
}

std::string DcgmDiagCommand(std::string_view dcgmi, const std::vector<int>& gpus, std::chrono::seconds timeout) {
  const std::string d = ssh::ShellQuote(std::string(dcgmi));
  std::string ids;
  for (int g : gpus) ids += (ids.empty() ? "" : ",") + std::to_string(g);
  const std::string t = std::to_string(std::max<long long>(1, timeout.count()));
  return "command -v " + d + " >/dev/null 2>&1 || { echo 'dcgm absent'; exit 0; }; "
         "H_T=; command -v timeout >/dev/null 2>&1 && H_T='timeout -s KILL " + t + "'; "
         "$H_T " + d + " diag -r 1 -j" + (ids.empty() ? std::string() : " -i " + ids) + " 2>&1";
}

namespace {

// A JSON value's text: strings as they are, numbers written, else "".
std::string Text(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return std::to_string(v.get<long long>());
  return "";
}

// The GPU indices a result names: "gpu_id": 0, "gpu_ids": "0,1" or [0, 1],
// "entity_id" of a GPU entity (DCGM 4).
std::vector<int> ResultGpus(const nlohmann::json& r) {
  std::vector<int> out;
  auto add_text = [&](const std::string& t) {
    size_t start = 0;
    while (start < t.size()) {
      size_t end = t.find(',', start);
      if (end == std::string::npos) end = t.size();
      const std::optional<long long> n = Number(t.substr(start, end - start));
      if (n && *n <= std::numeric_limits<int>::max()) out.push_back(static_cast<int>(*n));
      start = end + 1;
    }
  };
  for (const char* key : {"gpu_id", "gpu_ids", "entity_id"}) {
    auto it = r.find(key);
    if (it == r.end()) continue;
    if (std::string(key) == "entity_id" && r.contains("entity_group") && Text(r["entity_group"]) != "GPU") continue;
    if (it->is_array()) {
      for (const auto& v : *it) add_text(Text(v));
    } else {
      add_text(Text(*it));
    }
  }
  return out;
}

// What a failed result says: its warnings' or info's text, one line.
std::string ResultWords(const nlohmann::json& r) {
  std::string words;
  auto add = [&](const nlohmann::json& v) {
    std::string t = v.is_object() ? Text(v.value("warning", nlohmann::json())) + Text(v.value("message", nlohmann::json()))
                                  : Text(v);
    if (t.empty()) return;
    std::replace(t.begin(), t.end(), '\n', ' ');
    words += (words.empty() ? "" : "; ") + t;
  };
  for (const char* key : {"warnings", "errors", "info"}) {
    auto it = r.find(key);
    if (it == r.end()) continue;
    if (it->is_array()) {
      for (const auto& v : *it) add(v);
    } else {
      add(*it);
    }
    if (!words.empty()) break;
  }
  if (words.size() > 200) words = words.substr(0, 200) + "...";
  return words;
}

// Every failed result under `v`, `test` the nearest test name above it.
void CollectFailures(const nlohmann::json& v, const std::string& test, std::vector<Finding>* out) {
  if (v.is_array()) {
    for (const auto& e : v) CollectFailures(e, test, out);
    return;
  }
  if (!v.is_object()) return;
  std::string name = test;
  if (auto n = v.find("name"); n != v.end() && n->is_string()) {
    name = n->get<std::string>();
    std::replace(name.begin(), name.end(), '\n', ' ');  // a finding is one line
  }
  if (auto st = v.find("status"); st != v.end() && st->is_string()) {
    std::string status = st->get<std::string>();
    std::transform(status.begin(), status.end(), status.begin(), [](unsigned char c) { return std::tolower(c); });
    if (status == "fail") {
      const std::string words = ResultWords(v);
      const std::string problem = std::string(kDcgmTestStart) + (name.empty() ? std::string("a test") : name) + " failed" +
                                  (words.empty() ? "" : ": " + words);
      const std::vector<int> gpus = ResultGpus(v);
      if (gpus.empty()) {
        out->push_back({std::nullopt, problem, "now", Severity::kFatal});
      } else {
        for (int g : gpus) out->push_back({g, problem, "now", Severity::kFatal});
      }
    }
  }
  for (const auto& [key, child] : v.items()) {
    if (child.is_structured()) CollectFailures(child, name, out);
  }
}

}  // namespace

std::vector<Finding> ReadDcgmDiag(const SectionText& answer) {
  const std::string& t = answer.text;
  auto first_line = [&] {
    std::string l = t.substr(0, t.find('\n'));
    return l.size() > 200 ? l.substr(0, 200) + "..." : l;
  };
  if (t.rfind("dcgm absent", 0) == 0) {
    return {{std::nullopt, "DCGM diagnostic unknown: dcgmi is not installed", "", Severity::kUnknown}};
  }
  if (answer.exit == 137 || answer.exit == 124) {
    return {{std::nullopt, std::string(kDcgmNoAnswer), "now", Severity::kFatal}};
  }
  const size_t open = t.find('{');
  const size_t close = t.rfind('}');
  const std::string body =
      open == std::string::npos || close == std::string::npos || close < open ? std::string() : t.substr(open, close - open + 1);
  nlohmann::json doc = JsonNestingWithin(body) ? nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false)
                                               : nlohmann::json(nlohmann::json::value_t::discarded);
  if (doc.is_discarded()) {
    // No JSON: the diagnostic did not run (typically no nv-hostengine to
    // connect to). Unknown, said with DCGM's words.
    return {{std::nullopt, "DCGM diagnostic unknown: " + (t.empty() ? std::string("no output") : first_line()), "",
             Severity::kUnknown}};
  }
  std::vector<Finding> out;
  CollectFailures(doc, "", &out);
  if (out.empty() && answer.exit != 0) {
    out.push_back({std::nullopt, "DCGM diagnostic failed (exit " + std::to_string(answer.exit) + ") and named no test",
                   "now", Severity::kFatal});
  }
  return out;
}

}  // namespace barge::runner::gpu
