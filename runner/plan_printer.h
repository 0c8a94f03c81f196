// `barge plan`: the exact command lines `barge run` would send to each host,
// grouped by host, without connecting to anything. Values only a live host
// can supply print as named placeholders ("<gpus of HOST>").
#pragma once

#include <string>

#include "cluster/plan.h"
#include "runner/job_spec.h"

namespace barge::runner {

std::string FormatPlan(const JobSpec& spec, const cluster::Plan& plan);

// What a launch stage waits for before the next one starts, in words:
// "wait until port 29500 listens in each (at most 120 s)".
std::string GateText(const cluster::ReadinessProbe& gate);

}  // namespace barge::runner
