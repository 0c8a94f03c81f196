// What `barge reap` removes from one host and what it keeps, decided from
// the host's own answer: its clock and every container labelled barge.job
// (the jobs' containers, holds and leases). Pure logic (no I/O); the verb
// is Controller::Reap (runner/controller/verbs.cc).
//
// Rule. A container of job J is an orphan, and goes, only when the host
// itself says J is gone: J has no lease on the engine
// (runner/remote/reservation.h) that is still live (renewed within its lease
// plus the grace), whoever's job J is, and J is not a live job of the local
// store (`is_live`). So another user's running job, from another store or
// another machine, is kept as long as its controller (or, with it gone,
// its watchdog's time) renews its lease; a job whose lease lapsed is gone
// for every user alike, and its lease goes with its containers.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "container/inspect.h"
#include "runner/remote/docker_commands.h"

namespace barge::runner {

struct ReapChoice {
  std::string id;
  std::string name;
  std::string job_id;
  bool keep = false;
  // For people: "job 19794d42, alice@box, lease renewed 3s ago" (kept) or
  // "job 0rphan00, Exited (0) 2 minutes ago" (removed).
  std::string why;
};

// One choice per entry of `listed` (the host's `docker ps -a` of barge.job
// containers), in its order; `now` is the host's clock.
std::vector<ReapChoice> ChooseReaped(const std::vector<container::PsEntry>& listed, long long now,
                                     const std::function<bool(const std::string&)>& is_live);

// The host's clock (`date +%s`), then every container labelled barge.job.
std::string ReapListingLine(const DockerCommands& docker);

// The host's clock and listing from ReapListingLine's output: its first
// line is the clock, the rest `docker ps --format {{json .}}` lines.
struct ReapListing {
  long long now = 0;
  std::vector<container::PsEntry> entries;
};
Result<ReapListing> ParseReapListing(std::string_view out);

}  // namespace barge::runner
