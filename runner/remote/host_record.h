// A host's failure record, kept on the host's own engine: what went wrong
// there for the jobs of every barge user of the host, so that every job
// avoids a host that keeps failing them. No server: like the holds
// (runner/remote/reservation.h), each entry is a container that is created
// and never started, named barge-fault-T-JOB-N (T the host's clock when it
// was written) and labelled (no barge.hold label: older barge versions
// list holds by it and would take an entry for a hold):
//   barge.fault          the kind (HostFaultKind's names, or "forgiven");
//                        the holds' ONE listing, which every job's preflight
//                        makes anyway, reads the record too, by name (no
//                        engine call of its own; kRecordsNameFilter)
//   barge.hold.since     T;  barge.hold.name, .user, .machine: the job's
//                        name and who ran it;  barge.hold.gpus: the GPU's
//                        index (GPU-level entries)
//   barge.fault.job      the job it failed;  barge.fault.serial: the GPU's
//                        serial;  barge.fault.detail: what was seen
//                        (one line, at most kFaultDetailMax bytes)
// It carries no barge.job label: no job's release, watchdog, teardown or
// `barge reap` removes it, and the holds' stale rule leaves it alone.
//
// Bounded: every write removes, after its own create, the entries beyond
// the newest kRecordCap and those older than kRecordMaxAge. Entries are
// written only when a failure is seen, never on the way of a good job.
//
// The rule (Judge): host-level entries (no GPU) newer than the window and
// than the record's last "forgiven" entry are counted; a host with more
// than `allowed` of them is out of every job's choice. A GPU-level entry
// counts for its GPU only: a GPU with one fatal entry in the window (the
// same serial, where the job knows the serial now) is out, and the host
// stays usable for jobs that fit on its other GPUs.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/enum_names.h"
#include "runner/remote/docker_commands.h"
#include "runner/remote/reservation.h"

namespace barge::runner {

// At most this many entries per host (the newest are kept).
inline constexpr size_t kRecordCap = 20;
// No entry is kept longer than this (seconds: 30 days); also the longest
// window a job may ask for.
inline constexpr long long kRecordMaxAge = 30LL * 24 * 3600;
// A detail is cut to this many bytes.
inline constexpr size_t kFaultDetailMax = 160;
// The kind of a "forgiven" entry (`barge hosts --forgive`): entries older
// than it do not count.
inline constexpr std::string_view kForgivenKind = "forgiven";

// What failed a job on the host.
enum class HostFaultKind {
  kConnect,   // the host's session could not be opened or failed in preflight
  kEngine,    // its engine did not answer or failed (preflight, or mid-run)
  kHealth,    // a fatal GPU health finding (at the start or while it ran)
  kHostLost,  // the host was lost while the job ran
  kHang,      // a hang traced to the host (controller/progress_watch.h: TraceHang)
};
inline constexpr auto kHostFaultKindNames = std::to_array<EnumName<HostFaultKind>>({
    {HostFaultKind::kConnect, "connect"},
    {HostFaultKind::kEngine, "engine"},
    {HostFaultKind::kHealth, "gpu_health"},
    {HostFaultKind::kHostLost, "host_lost"},
    {HostFaultKind::kHang, "hang"},
});
static_assert(ListsEveryValueInOrder(kHostFaultKindNames));

// Which failures of a host the record keeps: the host failing, never a
// host that does not fit the job. `phase` and `outcome`: a host's phase
// that ended with that outcome (not "ok"). Connect: only where this job
// had reached the host before (`reached_before`): a host never reached may
// be a wrong address or one that is off, and no entry can be written there.
// Preflight: an engine that did not answer within the engine timeout
// (preflight's own check, or the holds' engine calls), or a preflight that
// did not finish. Not: an engine that is not there or refuses the user
// ("docker is not reachable"), a host without the GPUs the job asks for, a
// full disk, a watchdog that cannot be armed, a check that did not report,
// an image or a port the job names. (GPU findings: gpu::IsHardwareFault;
// a host lost while the job ran is kHostLost.)
std::optional<HostFaultKind> RecordedFailureOf(std::string_view phase, std::string_view outcome,
                                               bool reached_before);

// One entry of a host's record, as written or as listed.
struct FaultEntry {
  std::string id;    // container ID (listed)
  std::string name;  // barge-fault-... (listed)
  long long at = 0;  // host clock
  std::string kind;  // kHostFaultKindNames, or kForgivenKind
  std::string job_id;
  std::string job_name;
  std::string user;
  std::string machine;
  std::optional<int> gpu;  // a GPU-level entry: the GPU's index
  std::string serial;      // its serial, where known
  std::string detail;
};

// The record among a holds listing's entries (IsFault), newest first.
std::vector<FaultEntry> RecordOf(const std::vector<Hold>& listed);

// How many host-caused failures a host may have in the window.
struct RecordRule {
  int allowed = 1;                                      // out with more than this
  std::chrono::seconds window{std::chrono::hours(24)};  // at most kRecordMaxAge
};

// What a host's record means for a job, judged at `now` (host clock).
struct RecordVerdict {
  bool host_out = false;
  // The host-level entries that count (newer than the window and than the
  // last forgiveness), newest first.
  std::vector<FaultEntry> counted;
  // GPU index -> its entry that counts (the newest): those GPUs are out.
  std::map<int, FaultEntry> gpus_out;
  // The last forgiveness, if any.
  std::optional<FaultEntry> forgiven;
};
// `serials`: the host's GPUs' serials by index now, where known (a GPU
// entry whose serial differs is of a GPU that was replaced: it does not
// count); empty = unknown, every GPU entry counts.
RecordVerdict JudgeRecord(const std::vector<FaultEntry>& record, long long now, const RecordRule& rule,
                    const std::map<int, std::string>& serials = {});

// One line for a job's message: "its failure record on HOST has 2
// host-caused failures in 24h (more than 1 allowed): engine 05:01Z job
// 1a2b (alice), gpu_health ...; `barge hosts --forgive HOST` clears it".
std::string OutReason(const std::string& host, const RecordVerdict& verdict, const RecordRule& rule);
// "recorded on the host: gpu_health 05:01Z job 1a2b (alice): Xid 79".
std::string GpuOutReason(const FaultEntry& entry);

// A detail as an entry keeps it: one line (control characters as spaces),
// at most kFaultDetailMax bytes (cut at a UTF-8 character's start).
std::string FaultDetail(std::string_view text);

// The shell that writes `entries` on a host (their `at` is the host's
// clock when the shell runs; their `name`, `id` are made there) and then
// caps the record. It returns at once: the writing goes on in the
// background, detached from the session (nohup), because the engine of a
// host that just failed may not answer yet (frozen, restarting): each
// create is bounded by `engine_timeout` and tried again every 10 s for up
// to `give_up`; a name already in use (a create that the engine carried
// out late) counts as written. `seq`: distinguishes this job's writes on
// one host (part of each name).
std::string RecordFaultsCommand(const DockerCommands& docker, const std::vector<FaultEntry>& entries, int seq,
                                std::chrono::seconds engine_timeout,
                                std::chrono::seconds give_up = std::chrono::minutes(10));
// The shell that writes the entries in the foreground (the same create and
// cap, one try each: `barge hosts --forgive`, which says whether it
// worked): exits non-zero when a create failed.
std::string RecordFaultsNowCommand(const DockerCommands& docker, const std::vector<FaultEntry>& entries, int seq,
                                   std::chrono::seconds engine_timeout);

}  // namespace barge::runner
