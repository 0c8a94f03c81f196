// One member of a job array: the job file's spec with the member's hosts,
// its environment (BARGE_ARRAY_JOB_ID, BARGE_ARRAY_INDEX, BARGE_ARRAY_SIZE,
// AWS_BATCH_JOB_ARRAY_INDEX and the row's columns) and its row's values in
// place of {array.COLUMN} in `command`, `image` and `container.env` (the
// job's, the roles' and the hosts').
//
// Quoting: an env value and a command word are passed to Docker as one
// argument each (quoted once where they cross SSH, like every argument).
// A command read by a shell (a string `command`, i.e. ["sh", "-c", TEXT],
// or a list starting with sh/bash -c) gets each value quoted for that shell
// inside TEXT, so `a b; rm -rf /` arrives as one word.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "cluster/inventory.h"
#include "runner/fleet/array_params.h"
#include "runner/job_spec.h"

namespace barge::runner::fleet {

// `text` with every {array.COLUMN} replaced by row `row`'s value (quoted
// for a POSIX shell when `for_shell`); other braces are left alone. An
// unknown column is an error naming `where` and the columns there are.
[[nodiscard]] Result<std::string> SubstituteArray(std::string_view text, const ArrayParams& params,
                                                  size_t row, bool for_shell, const std::string& where);

// How many hosts of the pool one member takes: hosts_per_member, else
// enough for the head and roles.worker.count workers at the pool's
// smallest `nodes:` per host, else (workers: rest) one host.
size_t HostsPerMember(const JobSpec& spec);

// How many members may run at once: `parallel:` (at most what the pool
// fits), else as many as the pool fits; at least 1.
size_t MembersAtOnce(const JobSpec& spec);

// Member `row`'s spec on `hosts` (taken from the pool), named NAME-ROW.
[[nodiscard]] Result<JobSpec> MemberSpec(const JobSpec& base, const ArrayParams& params, size_t row,
                                         const std::string& array_id,
                                         std::vector<cluster::Host> hosts);

// Checks the whole array before anything starts: every row's substitutions
// and image, and that the pool holds at least one member's hosts.
[[nodiscard]] Status CheckArray(const JobSpec& base, const ArrayParams& params);

}  // namespace barge::runner::fleet
