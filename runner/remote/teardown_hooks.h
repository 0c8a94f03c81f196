// Teardown hooks: the user's commands that run once per host after that
// host's containers are gone (power off, a cloud terminate call, ...).
#pragma once

#include <string>

#include "base/status.h"
#include "cluster/inventory.h"

namespace barge::runner {

// The prefix of the variable a hook reads a host's var NAME from:
// "$BARGE_VAR_NAME".
inline constexpr char kHookVarPrefix[] = "BARGE_VAR_";

// The hook's shell line: `hook` with {host.address},
// {host.internal_address} and {job.id} replaced by their values,
// shell-quoted (ssh::ShellQuote; each is validated as an address or an id),
// after `export` of BARGE_JOB_ID, BARGE_HOST_ADDRESS,
// BARGE_HOST_INTERNAL_ADDRESS, BARGE_JOB_DIR (the job's directory on that
// host, `job_dir`, when given) and BARGE_VAR_NAME for each of the host's
// vars. A var's value is never pasted into the hook's text (inside quotes
// the user wrote, a quoted value could still break out): {host.vars.NAME}
// fails, naming "$BARGE_VAR_NAME" instead, as does an unknown placeholder
// (the job file's validation reports both first).
[[nodiscard]] Result<std::string> SubstituteHook(const std::string& hook, const cluster::Host& host,
                                                 const std::string& job_id, const std::string& job_dir = "");

}  // namespace barge::runner
