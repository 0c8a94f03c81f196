// What a job's records say its hosts did: which hosts caused its failure,
// and which the GPU health gate found unavailable. Read by job arrays (a
// retry moves off a failing host) and by Slurm jobs (the drain command an
// operator may run for a node).
#pragma once

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "runner/store/job_store.h"

namespace barge::runner {

// The hosts (by address, as the job's records name them) that a
// job's failure came from, each with what happened there: a host lost (its
// session, or its engine that stopped answering) or preempted while the
// job ran (its events), or one that could not be connected to or whose
// preflight failed for the host's own state: its engine, disk, GPUs or
// session, not an image or a port the job names (its phases).
std::map<std::string, std::string> HostCausedFailures(const std::vector<EventRecord>& events,
                                                      const std::vector<PhaseRecord>& phases);

// Whether a host's `phase` that ended with `outcome` (not "ok") failed for
// the host's own state: any connect failure; a preflight failure of its
// engine, disk, GPUs or session, not an image or a port the job names.
bool IsHostsOwnFailure(std::string_view phase, std::string_view outcome);

// The hosts (by address) that a member job found unavailable rather than
// busy: those the GPU health gate put out (event kGpuUnhealthy, "the host
// is out") or whose failure record did (event kHostAvoided), where nothing
// of the job started.
std::set<std::string> UnavailableHosts(const std::vector<EventRecord>& events);

}  // namespace barge::runner
