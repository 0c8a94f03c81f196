// The GPU health gate: what preflight asks each host's NVIDIA driver (in
// the same round trip as its other checks, each command under a timeout:
// nvidia-smi can hang on a dead GPU), the reading of the answers, and the
// rules that decide what is unhealthy. Pure, but for the script text.
//
// Asked, as preflight sections (preflight_script.h):
//   "gpuq"   nvidia-smi --query-gpu=<kFullQuery> (csv, no header, no units);
//            one unknown field fails a whole query, so when the driver
//            refuses a field the script asks <kBasicQuery> instead, and says
//            which ("fields full" / "fields basic").
//   "gpurm"  nvidia-smi --query-remapped-rows (Ampere and newer; refused on
//            older GPUs and under MIG: then unknown).
//   "gpuxid" the driver's Xid events from the kernel log (dmesg, else the
//            kernel journal of this boot), with /proc/uptime, so that each
//            event's age is known: the last 200 lines in the driver's own
//            format (kXidLinePattern, filtered on the host before the
//            count), so that lines a local user can make the kernel print
//            (a process named "NVRM: Xid (PCI:" that segfaults) neither
//            count nor push a real event out of view. Where the SSH user may not read the
//            kernel log (dmesg_restrict), the result is "unknown", never
//            "healthy".
//
// Rules (Judge). Fatal, for the whole host: nvidia-smi fails or hangs, or
// the driver sees fewer GPUs than the host's inventory says. Fatal, for one
// GPU: a field the driver answers with an error in place of a value
// (kDriverErrorAnswers: a lost GPU answers "[GPU is lost]" for every field),
// in the query or the remapped rows; uncorrectable ECC errors since the
// driver loaded (volatile), pages pending retirement, a row remapping
// pending or failed, an Xid of kFatalXids within the window. Warnings (shown, not blocking): the Xids of
// kWarningXids. Unknown (shown as such, not blocking): the kernel log or
// the remapped rows could not be read. Xid 63 (a row marked for remapping)
// is covered by the pending-remap flag. Which Xids are fatal, warnings or
// not counted is the job's to change, code by code (XidPolicy).
//
// The same rules run while a job runs (GpuWatchCommand; GpuWatch in
// runner/controller/gpu_watch.h), with the GPUs' utilisation.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace barge::runner::gpu {

inline constexpr std::string_view kFullQuery =
    "index,uuid,name,driver_version,memory.total,ecc.errors.uncorrected.volatile.total,"
    "retired_pages.pending,mig.mode.current,pci.bus_id";
inline constexpr std::string_view kBasicQuery = "index,uuid,name,driver_version,memory.total";
inline constexpr std::string_view kRemapQuery =
    "gpu_uuid,remapped_rows.correctable,remapped_rows.uncorrectable,remapped_rows.pending,"
    "remapped_rows.failure";

// The driver's answers in place of a value that say the GPU is broken
// (fatal for that GPU); "[N/A]" and "[Not Supported]" only say the field
// does not apply and are read as no value.
inline constexpr std::string_view kDriverErrorAnswers[] = {"[GPU is lost]", "[Unknown Error]", "ERR!"};
bool IsDriverError(std::string_view answer);

// A line of the kernel log in the driver's Xid format (POSIX ERE, the same
// text for the host's grep -E and the parser's std::regex): an optional
// "[ seconds]" stamp, an optional caller id ("[T1234]"), the journal's
// "HOST kernel: ", then "NVRM: Xid (PCI:DDDD:BB:DD[.F]): CODE, ". Groups: 2
// the stamp's seconds, 6 the PCI address, 8 the code.
inline constexpr std::string_view kXidLinePattern =
    "^(\\[ *([0-9]+\\.[0-9]+)] )?(\\[ *[TC][0-9]+] )?([^ ]+ kernel: )?NVRM: Xid "
    "\\((PCI:)?([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})(\\.[0-9a-fA-F])?\\): ([0-9]{1,5}), ";

// How hard preflight looks (the job's `health: {gpus: ...}`).
enum class HealthLevel { kOff, kBasic };

// The shell lines (preflight's `bs`/`be` sections "gpuq", "gpurm",
// "gpuxid") that ask the driver. `nvidia_smi`: the program (quoted here);
// each call is bounded by `timeout` where the host has timeout(1).
std::string GpuHealthLines(std::string_view nvidia_smi, std::chrono::seconds timeout);

// A field the driver answered with one of kDriverErrorAnswers.
struct FieldError {
  std::string field;   // as the query names it: "memory.total"
  std::string answer;  // "[GPU is lost]"
};

// One GPU as the driver sees it. Optional fields are nullopt where the
// driver reads "[N/A]" or "[Not Supported]" (or an error answer, then in
// `errors`), or the basic query was used. Where the index itself is an
// error answer, `index` is the row's place (nvidia-smi lists GPUs in index
// order); text fields keep the driver's answer.
struct GpuInfo {
  int index = -1;
  std::string uuid;
  std::string name;
  std::string driver;
  std::optional<long long> memory_mib;
  std::optional<long long> ecc_uncorrected;  // since the driver loaded
  std::optional<bool> retired_pending;       // [N/A] on Ampere and Hopper
  std::string mig;                           // "Enabled", "Disabled", "" unknown
  std::string bus_id;                        // "00000000:00:06.0"
  std::vector<FieldError> errors;            // fields answered with an error
};

struct RemappedRows {
  std::string uuid;
  long long correctable = 0;
  long long uncorrectable = 0;
  bool pending = false;
  bool failure = false;
  std::vector<FieldError> errors;  // fields answered with an error (uuid too)
};

struct XidEvent {
  std::string pci;  // as the log names the GPU: "0000:00:06"
  int code = 0;
  double at = 0;    // seconds since boot (the log's timestamp)
  std::string text;  // the log line, from "NVRM:"
};

// What one host answered.
struct GpuReport {
  // The query: ok, or why not (the driver's words; "timed out").
  bool query_ok = false;
  std::string query_error;
  bool basic_fields = false;  // the driver refused a field of kFullQuery
  std::vector<GpuInfo> gpus;
  // nullopt: could not be read (unsupported, MIG, no permission).
  std::optional<std::vector<RemappedRows>> remapped;
  std::string remapped_error;
  // nullopt: the kernel log could not be read (why in xid_error).
  std::optional<std::vector<XidEvent>> xids;
  std::string xid_error;
  std::string xid_source;  // "dmesg" or "journal"
  std::optional<double> uptime;  // seconds since boot
};

// The rows of a csv,noheader,nounits query (", "-separated).
std::vector<GpuInfo> ParseGpuQuery(std::string_view text, bool basic_fields);
std::vector<RemappedRows> ParseRemappedRows(std::string_view text);
// The Xid lines of a kernel log, those that match kXidLinePattern
// ("[   12.345678] NVRM: Xid (PCI:0000:10:1c): 79, pid=1896, name=python3,
// GPU has fallen off the bus."; older drivers have no "name=", some events
// "pid='<unknown>'"; the journal's short-monotonic form has the same
// bracket and "HOST kernel: "); other lines are skipped.
std::vector<XidEvent> ParseXids(std::string_view log);
// From the three sections' text and exit status.
struct SectionText {
  int exit = -1;
  std::string text;
};
GpuReport ReadGpuReport(const std::optional<SectionText>& query, const std::optional<SectionText>& remapped,
                        const std::optional<SectionText>& xid);

// health.xids: the job's Xid lists, over the catalog's defaults (kXids in
// gpu_health.cc: 48 64 74 79 95 119 120 154 fatal, 92 94 warnings) code by
// code: a code listed fatal is fatal, one listed warning only warns, one
// listed ignore is not counted; codes in no list keep their default (most
// Xids, 13 31 43 among them, are the application's: not counted).
struct XidPolicy {
  std::vector<int> fatal;
  std::vector<int> warning;
  std::vector<int> ignore;
  // Counts only events the kernel log stamped after this (its seconds since
  // boot): the in-run checks (GpuWatch) count those since the job began.
  // An event without a stamp is then not counted (its time is unknown).
  std::optional<double> after;
};
enum class XidClass { kFatal, kWarning, kNotCounted };
XidClass ClassOfXid(int code, const XidPolicy& policy);

enum class Severity { kFatal, kWarning, kUnknown };
struct Finding {
  std::optional<int> gpu;  // nullopt: the whole host
  std::string problem;
  std::string seen;  // "now", "12m ago", ""
  Severity severity = Severity::kFatal;
};

// What the rules find in `report`. `expected_gpus`: the host's inventory
// count (nullopt: not said). `xid_window`: Xids older than this are not
// counted. `xids`: which codes count, and how (the defaults without it).
std::vector<Finding> Judge(const GpuReport& report, std::optional<int> expected_gpus,
                           std::chrono::seconds xid_window, const XidPolicy& xids = {});

// The GPU indices a fatal finding names (taken out of what the host
// offers), and whether a fatal finding is the whole host's.
std::vector<int> UnhealthyGpus(const std::vector<Finding>& findings);
bool HostUnhealthy(const std::vector<Finding>& findings);

// Whether a finding of Judge or ReadDcgmDiag is the host's hardware failing
// (what a host's failure record keeps, runner/remote/host_record.h): a
// fatal finding of one GPU (its error answers, uncorrectable ECC, pages
// pending retirement, row remapping, a fatal Xid, a failed DCGM test), a
// fatal Xid, remapping or DCGM failure of the whole host, or a driver that
// does not answer (nvidia-smi or dcgmi killed by their timeout). Not: a
// host without the GPUs a job asks for or without a working nvidia-smi
// (nvidia-smi missing, exit 127, or failing: no driver there; the driver
// seeing no GPU, or fewer than the inventory says), a DCGM diagnostic that
// named no test, warnings and unknowns.
bool IsHardwareFault(const Finding& f);

// HOST | GPU | PROBLEM | SEEN, one row per finding of each host.
struct HostFindings {
  std::string host;
  std::vector<Finding> findings;
};
std::string FindingsTable(const std::vector<HostFindings>& hosts);

// health.gpus: dcgm. DCGM's quick diagnostic (`dcgmi diag -r 1 -j`, its
// deployment checks, seconds long) on `gpus` alone (the job's, never
// another job's), killed at `timeout`; prints "dcgm absent" where `dcgmi`
// is not installed. Exits with the diagnostic's status.
std::string DcgmDiagCommand(std::string_view dcgmi, const std::vector<int>& gpus, std::chrono::seconds timeout);
// Its answer's findings: a test whose status is Fail is fatal, for the GPU
// its result names (the host where it names none); a diagnostic that could
// not run (no dcgmi, no nv-hostengine to connect to, an answer that is not
// its JSON) is unknown, never healthy; one killed by its timeout is fatal
// for the host. Reads both JSON forms (DCGM 3's "DCGM GPU Diagnostic", 4's
// "DCGM Diagnostic"): any object with a "status" and a GPU id field.
std::vector<Finding> ReadDcgmDiag(const SectionText& answer);

// The in-run check (GpuWatch, runner/controller/gpu_watch.h): one command
// per host and period, bounded like preflight's (every nvidia-smi and
// dmesg call under `timeout -s KILL timeout`), its reply in preflight's
// section form (ParsePreflightReply; first line "barge-gpuwatch"). With
// `health`: GpuHealthLines' three sections (the Xid lines are judged
// against XidPolicy::after). With `util`: section "gpuutil", the query
// kUtilQuery (csv, no header, no units: "0, 97" per GPU).
inline constexpr std::string_view kUtilQuery = "index,utilization.gpu";
std::string GpuWatchCommand(std::string_view nvidia_smi, std::chrono::seconds timeout, bool health, bool util);

// One GPU's utilisation: the percentage of the driver's last sample period
// during which a kernel ran. nullopt where the driver answers no number
// ("[N/A]", an error answer).
struct GpuUtil {
  int index = -1;
  std::optional<int> percent;
};
std::vector<GpuUtil> ParseGpuUtil(std::string_view text);

// What NVIDIA's Xid catalog has the operator do, for the Xids the rules
// know; "" for others.
std::string XidAction(int code);
bool IsFatalXid(int code);
bool IsWarningXid(int code);

}  // namespace barge::runner::gpu
