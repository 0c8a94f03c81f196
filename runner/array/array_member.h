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

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "cluster/inventory.h"
#include "runner/array/array_params.h"
#include "runner/jobfile/job_spec.h"

namespace barge::runner::array {

// `text` with every {array.COLUMN} replaced by row `row`'s value (quoted
// for a POSIX shell when `for_shell`); other braces are left alone. An
// unknown column is an error naming `where` and the columns there are.
[[nodiscard]] Result<std::string> SubstituteArray(std::string_view text, const ArrayParams& params,
                                                  size_t row, bool for_shell, const std::string& where);

// The reserved column naming the host group (JobSpec::host_groups) a row's
// member draws its hosts from, with that group's ssh settings. Not exported
// under its own name: the member sees it as BARGE_HOST_GROUP (set only when
// the row names a group). An empty value, or no such column: the job's own
// hosts.
inline constexpr std::string_view kHostGroupColumn = "host_group";

// How many hosts of the pool one member takes: hosts_per_member, else
// enough for the head and roles.worker.count workers at the pool's
// smallest `nodes:` per host, else (workers: rest) one host. The pool is
// the job's hosts, or `pool` (a host group's).
size_t HostsPerMember(const JobSpec& spec);
size_t HostsPerMember(const JobSpec& spec, const std::vector<cluster::Host>& pool);

// The host group row `row` names: an index into spec.host_groups, nullopt
// for the job's own hosts. A name that is no group is an error naming the
// row and the group.
[[nodiscard]] Result<std::optional<size_t>> MemberGroup(const JobSpec& spec, const ArrayParams& params,
                                                        size_t row);

// How many members may run at once: `parallel:` (at most what the pools
// fit), else as many as the pools fit; at least 1. The pools are the job's
// hosts and, with `params`, each host group its rows name (without
// `params`, the job's hosts only).
size_t MembersAtOnce(const JobSpec& spec);
size_t MembersAtOnce(const JobSpec& spec, const ArrayParams& params);

// Member `row`'s spec on `hosts` (taken from the pool of its row's host
// group, or the job's), named NAME-ROW. A member of a host group gets the
// group's ssh settings (JobSpec::ssh) and BARGE_HOST_GROUP.
[[nodiscard]] Result<JobSpec> MemberSpec(const JobSpec& base, const ArrayParams& params, size_t row,
                                         const std::string& array_id,
                                         std::vector<cluster::Host> hosts);

// Checks the whole array before anything starts: every row's host group,
// substitutions and image, and that each pool the rows use holds at least
// one member's hosts.
[[nodiscard]] Status CheckArray(const JobSpec& base, const ArrayParams& params);

}  // namespace barge::runner::array
