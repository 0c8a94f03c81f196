// Preflight's pure parts: reading the disk check's output and the one table
// of every host's problems.
#pragma once

#include <utility>
#include <string>
#include <vector>

namespace barge::runner {

// The start of the problem reported for a login shell that is not POSIX:
// on such a host only this one is shown (every other check failed with it).
inline constexpr char kNotPosixShell[] = "the login shell is not a POSIX shell";

// Free space below this on the job directory's (/tmp) or the engine's
// filesystem fails preflight: a job cannot start on a full disk.
inline constexpr long long kMinFreeKib = 256 * 1024;

// Problems in `df -Pk` output: one per filesystem with less than
// kMinFreeKib free ("disk full: 12 MiB free on /tmp (barge needs 256 MiB
// there)"), each mount point once.
std::vector<std::string> LowDiskSpace(const std::string& df);

// "preflight failed on 2 of 3 host(s); nothing was started:" and a
// HOST | PROBLEM table, one row per problem, hosts in the order given.
std::string ProblemTable(
    const std::vector<std::pair<std::string, std::vector<std::string>>>& problems, size_t hosts);

}  // namespace barge::runner
