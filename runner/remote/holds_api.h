// Taking a job's holds on one host through its Docker Engine API
// (container/docker_api.h): TakeHoldsScript's steps, with no Docker CLI
// process on the host (each costs it ~0.1 s of CPU, bench/docker-cli-cost.sh).
//
// The steps and their order are the script's (runner/remote/reservation.h has
// the rules), after one listing first (here it costs the engine no
// process): where another job's live ticket comes before the job's place
// (any live ticket, for a job with no place yet: QueuedBehindAnother) it
// creates nothing and answers that listing, so even a job's first try never
// gets in an earlier waiter's way. Then an exclusive or device/port request
// creates its holds and lists after; a GPU count (stale holds removed,
// listed again) creates the lowest free indices in turn. After the listing,
// other jobs' stale holds are removed by container ID, and a name that was
// in use is tried once more (and listed again) when one was. A name in use
// by this job itself (an earlier try's) is held.
//
// The stale rule's facts, the other jobs' leases, are in the same listing
// (reservation.h). The host's clock (the holds' since
// and expires labels, the reply's `now`) is the engine's: the Date header
// of its ping (HostClock).
//
// A controller that goes away mid-way stops calling: what it created is
// removed by its watchdog (armed before, it removes everything labelled
// with the job), or, if that is gone too, goes stale for every other job
// when its lease on the engine lapses.
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

namespace barge::runner {

// The hold image: an empty image, imported from a tar of two zero blocks
// when a create finds it missing.
inline constexpr std::string_view kHoldImageRepo = "barge/hold";
inline constexpr std::string_view kHoldImageTag = "1";

// POST /containers/create?name=NAME's body for the hold `name` (the same
// labels TakeHoldsScript gives it; kind and GPUs follow from the name): the
// hold image, command "hold", no network. `now`: the host's clock.
std::string HoldCreateBody(const HoldOwner& owner, const std::string& name, long long now);

// The holds and leases of an engine's listing (containers labelled
// barge.hold), with the leases applied (ApplyEngineLeases).
std::vector<Hold> HoldsOf(const std::vector<container::PsEntry>& listed);

// Whether a container the holds' listing took by name (kRecordsNameFilter)
// is a hold, lease, ticket or failure record entry: it carries barge.hold or
// barge.fault. A container only named like one is not.
bool IsHoldOrRecordEntry(const container::PsEntry& e);

// The host's clock, seconds since the epoch, from an HTTP Date header
// ("Wed, 25 Nov 2026 04:23:13 GMT", RFC 7231's IMF-fixdate); nullopt when
// it is not one.
std::optional<long long> ParseHttpDate(std::string_view date);

// One host's hold taking through the API. Every call
// is owned by `group` (dropped with it: no callback after that); each
// engine call is bounded by `engine_timeout` and tried again after a
// timeout, `engine_misses` tries in all. `done` runs once, from the loop,
// with the reply (as ParseHoldReply would read the script's) and whether
// the taking failed (the script's non-zero exit: an error in
// `reply.errors`).
struct ApiHoldJob {
  container::DockerApi* api = nullptr;
  HoldRequest request;
  HoldOwner owner;
  long long now = 0;  // the host's clock when the taking begins
  std::chrono::milliseconds engine_timeout{std::chrono::seconds(20)};
  int engine_misses = 3;
};
void TakeHoldsWithApi(CommandGroup& group, const ApiHoldJob& job,
                      std::function<void(HoldReply reply, bool failed)> done);

}  // namespace barge::runner
