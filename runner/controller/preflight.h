// Preflight: per host, in parallel and before anything starts, the engine
// answers, every image is there (pulled, or pushed when image_pull says so:
// push.cc), GPUs work where asked for (and are healthy: gpu_gate.h), the login shell is POSIX, the disks
// have room, the rendezvous port is free, the job's holds are taken and the
// watchdog is armed, in one round of commands per host. Every host's
// problems are reported together, in one table. Its pure parts first:
// reading the disk check's output and the table.
#pragma once

#include <map>
#include <utility>
#include <string>
#include <vector>

#include "runner/controller/gpu_gate.h"
#include "runner/controller/holds.h"
#include "runner/controller/host_set.h"
#include "runner/controller/job_context.h"
#include "runner/controller/leases.h"
#include "runner/controller/planner.h"
#include "runner/controller/transfers.h"

namespace barge::runner {

// The start of the problem reported for a login shell that is not POSIX:
// on such a host only this one is shown (every other check failed with it).
inline constexpr char kNotPosixShell[] = "the login shell is not a POSIX shell";

// Free space below this on the job directory's (/tmp) or the engine's
// filesystem fails preflight: a job cannot start on a full disk.
inline constexpr long long kMinFreeKib = 256 * 1024;

// Problems in `df -Pk` output: one per filesystem with less than
// kMinFreeKib free ("disk full: 12 MiB free on /tmp (barge needs 256 MiB
// there)"), each mount point once.
std::vector<std::string> LowDiskSpace(const std::string& df);

// "preflight failed on 2 of 3 host(s); nothing was started:" and a
// HOST | PROBLEM table, one row per problem, hosts in the order given.
std::string ProblemTable(
    const std::vector<std::pair<std::string, std::vector<std::string>>>& problems, size_t hosts);

namespace internal {

// The job's images on a host: reference → image ID, as preflight (or a
// pull, or a push) found them; the store records each node's.
struct HostImages {
  std::map<std::string, std::string> ids;
};

class Preflight : private JobPart {
 public:
  Preflight(JobContext* ctx, HostSet* hosts, Planner* planner, Holds* holds,
            Leases* leases, Transfers* transfers, GpuGate* gpu_gate)
      : JobPart(ctx),
        hosts_(*hosts),
        planner_(*planner),
        holds_(*holds),
        leases_(*leases),
        transfers_(*transfers),
        gpu_gate_(*gpu_gate) {}

  // Engine, images, GPUs, rendezvous port, disk, shell, the holds and the
  // watchdog on `targets`, in one round of commands per host; then the
  // lease renewals (Leases) run. On failure, every host's problems in one
  // table (ProblemTable), or why the round did not finish.
  Status Run(const std::vector<HostState*>& targets);

 private:
  HostSet& hosts_;
  Planner& planner_;  // what preflight finds of a host goes there
  const cluster::Plan& plan_ = planner_.plan();  // the current plan
  // preflight.cc: one Run's commands in flight, what they found by host,
  // and its steps (a host's script, its engine's part by the API or a
  // second script, missing images, the verdict).
  class Round;

  // push.cc (image_pull: push): streams the local `docker save IMAGE` into
  // `docker load` on every target host in parallel, then records each
  // host's image ID; failures go to `errors` by host.
  void Push(const std::string& image, const std::vector<HostState*>& targets,
            std::map<size_t, std::vector<std::string>>* errors);

  Holds& holds_;
  Leases& leases_;
  Transfers& transfers_;
  GpuGate& gpu_gate_;
};

}  // namespace internal
}  // namespace barge::runner
