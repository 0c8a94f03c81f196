// Teardown hooks: the user's commands that run once per host after that
// host's containers are gone (power off, a cloud terminate call, ...).
#pragma once

#include <string>

#include "base/status.h"
#include "cluster/inventory.h"

namespace barge::runner {

// Replaces {host.address}, {host.internal_address}, {host.vars.NAME} and
// {job.id} in `hook` by the value, shell-quoted (ssh::ShellQuote), so a
// value can never become shell syntax. Fails on an unknown placeholder or a
// var the host does not set (the job file's validation reports these
// first).
[[nodiscard]] Result<std::string> SubstituteHook(const std::string& hook, const cluster::Host& host,
                                                 const std::string& job_id);

}  // namespace barge::runner
