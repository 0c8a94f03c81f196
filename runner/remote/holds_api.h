// Taking a job's holds on one host through its Docker Engine API
// (container/docker_api.h): TakeHoldsScript's steps, with no Docker CLI
// process on the host (each costs it ~0.1 s of CPU, bench/docker-cli-cost.sh).
//
// The steps and their order are the script's (runner/remote/reservation.h has
// the rules): an exclusive or device/port request creates its holds first
// and lists after; a GPU count lists first (stale holds removed, listed
// again), then creates the lowest free indices in turn. After the listing,
// other jobs' stale holds are removed by container ID, and a name that was
// in use is tried once more (and listed again) when one was. A name in use
// by this job itself (an earlier try's) is held.
//
// What only the host knows, the stale rule's facts (another job's directory
// and its lease file's mtime), comes from one shell command, run only when
// the listing shows another job's hold. The host's clock (the holds' since
// and expires labels, the reply's `now`) is the engine's: the Date header
// of its ping (HostClock).
//
// A controller that goes away mid-way stops calling: what it created is
// removed by its watchdog (armed before, it removes everything labelled
// with the job), or, if that is gone too, is stale at once for every other
// job since the job's directory goes with the disarming.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "container/docker_api.h"
#include "container/inspect.h"
#include "runner/remote/command_group.h"
#include "runner/remote/reservation.h"
#include "ssh/executor.h"

namespace barge::runner::fleet {

// The hold image: an empty image, imported from a tar of two zero blocks
// when a create finds it missing.
inline constexpr std::string_view kHoldImageRepo = "barge/hold";
inline constexpr std::string_view kHoldImageTag = "1";

// POST /containers/create?name=NAME's body for the hold `name` (the same
// labels TakeHoldsScript gives it; kind and GPUs follow from the name): the
// hold image, command "hold", no network. `now`: the host's clock.
std::string HoldCreateBody(const HoldOwner& owner, const std::string& name, long long now);

// The holds of an engine's listing (containers labelled barge.hold), with
// every field but the host's facts: `job_id`'s own have job_dir set (its
// directory is there: the watchdog made it), the others have neither.
std::vector<Hold> HoldsOf(const std::vector<container::PsEntry>& listed, const std::string& job_id);

// The job IDs of `holds` other than `job_id`, sorted, each once.
std::vector<std::string> OtherJobs(const std::vector<Hold>& holds, const std::string& job_id);

// A POSIX sh command that prints, for each job of `job_ids` (shell-quoted),
// "JOB<TAB>1<TAB>MTIME" when /tmp/barge-JOB exists (MTIME: its lease file's,
// empty when it cannot be read), "JOB<TAB>0<TAB>" when not. One `stat`
// process per existing directory, none otherwise.
std::string HoldFactsCommand(const std::vector<std::string>& job_ids);

// Sets job_dir and lease_renewed of every hold of a job `out` (the facts
// command's output) names; the holds of jobs it does not name are left
// as they are.
void ApplyHoldFacts(std::string_view out, std::vector<Hold>* holds);

// The host's clock, seconds since the epoch, from an HTTP Date header
// ("Wed, 25 Nov 2026 04:23:13 GMT", RFC 7231's IMF-fixdate); nullopt when
// it is not one.
std::optional<long long> ParseHttpDate(std::string_view date);

// One host's hold taking through the API. Every call and the facts command
// are owned by `group` (dropped with it: no callback after that); each
// engine call is bounded by `engine_timeout` and tried again after a
// timeout, `engine_misses` tries in all. `done` runs once, from the loop,
// with the reply (as ParseHoldReply would read the script's) and whether
// the taking failed (the script's non-zero exit: an error in
// `reply.errors`).
struct ApiHoldJob {
  container::DockerApi* api = nullptr;
  ssh::Executor* exec = nullptr;  // for the facts command
  HoldRequest request;
  HoldOwner owner;
  long long now = 0;  // the host's clock when the taking begins
  std::chrono::milliseconds engine_timeout{std::chrono::seconds(20)};
  int engine_misses = 3;
};
void TakeHoldsWithApi(CommandGroup& group, const ApiHoldJob& job,
                      std::function<void(HoldReply reply, bool failed)> done);

}  // namespace barge::runner::fleet
