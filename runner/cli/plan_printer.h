// `barge plan`: the exact command lines `barge run` would send to each host,
// grouped by host, without connecting to anything. Values only a live host
// can supply print as named placeholders ("<gpus of HOST>").
#pragma once

#include <map>
#include <string>

#include "cluster/plan.h"
#include "runner/jobfile/job_spec.h"

namespace barge::runner {

// `address_notes`: by host index, a line printed under the host's heading
// (AddressesFromSshConfig, host_address.h).
std::string FormatPlan(const JobSpec& spec, const cluster::Plan& plan,
                       const std::map<size_t, std::string>& address_notes = {});

// What a launch stage waits for before the next one starts, in words:
// "wait until port 29500 listens in each (at most 120 s)".
std::string GateText(const cluster::ReadinessProbe& gate);

}  // namespace barge::runner
