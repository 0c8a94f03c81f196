// HostRecords: the hosts' failure records (runner/remote/host_record.h) in
// the job. Reading costs nothing of its own: the holds' listing that
// preflight makes on every host carries the record (HostHolds::reply).
//  - Apply, after preflight and before the GPU gate: a host whose record
//    has more than health.host_failures host-caused failures in
//    health.host_window is out (a spare takes its place, or the job stops
//    naming the record: unavailable, not busy, so a waiting job does not
//    wait for it); a GPU the record takes out becomes a fatal finding of
//    that GPU, which the GPU gate then keeps out of the job's choice.
//    Admit: the same for a spare that would take a host's place at a
//    restart (spares.cc): one its record puts out is passed over.
//  - While the job runs, as an observer of its phases and events, it notes
//    each failure of the host itself it sees (RecordedFailureOf: an engine
//    that did not answer, a preflight that did not finish; not a host that
//    does not fit the job), a host lost, a fatal finding of the GPU
//    hardware at the start or while it ran (gpu::IsHardwareFault; by GPU
//    where there is one, with the GPU's UUID; not a missing nvidia-smi nor
//    too few GPUs), a hang traced to the host (a `hang` event that names
//    it: progress_watch.h's TraceHang; a hang of the whole job names none).
//  - WriteRecords, at the job's end while its sessions are still open:
//    one command per host with something noted (detached on the host: the
//    engine that just failed may come back later). Each (host, kind, GPU)
//    is written once per job; findings that came from the record itself are
//    not written again.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "runner/controller/host_set.h"
#include "runner/controller/job_context.h"
#include "runner/controller/job_observer.h"
#include "runner/remote/host_record.h"

namespace barge::runner::internal {

// The rule of a job: health.host_failures in health.host_window.
RecordRule RuleOf(const JobSpec& spec);

class HostRecords : private JobPart, public JobObserver {
 public:
  HostRecords(JobContext* ctx, HostSet* hosts) : JobPart(ctx), hosts_(*hosts) {}

  // See above. Hosts out by their record are added to `out`, each with a
  // fatal finding that names the record and a kHostAvoided event.
  void Apply(const std::vector<HostState*>& hosts, std::vector<HostState*>* out);
  // Apply for one host that would take another's place (a spare at a
  // restart): an error naming its record when the record puts it out (then
  // said and evented as Apply does).
  Status Admit(HostState& host);
  // Why the job stops with `out` (of `total` hosts) out by their records.
  Status OutError(const std::vector<HostState*>& out, size_t total) const;
  // Writes what was noted (see above); waits only for the commands to be
  // handed over (they return at once), at most a few seconds per host.
  void WriteRecords();

  // JobObserver: the failures seen.
  void HostEnded(const HostPhase& p, TimePoint at, bool ok, std::string_view detail) override;
  void JobEvent(std::string_view kind, const std::optional<std::string>& host, std::string_view detail,
                TimePoint at) override;

 private:
  HostSet& hosts_;
  // The host's name -> what to write there, once per (kind, GPU).
  std::map<std::string, std::vector<FaultEntry>> noted_;
  // Hosts out by their record, with why (OutError's table).
  std::map<std::string, std::string> out_why_;
  void Note(const std::string& host, HostFaultKind kind, const std::string& detail,
            std::optional<int> gpu = std::nullopt, const std::string& serial = "");
  // The GPU findings of every host the job used, into noted_.
  void NoteGpuFindings();
  HostState* Find(const std::string& name);
};

}  // namespace barge::runner::internal
