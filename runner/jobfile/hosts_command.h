// `hosts_command:`: the job's inventory printed by a command run on this
// (the controller's) machine, e.g. `terraform output -json hosts | jq -r
// '.[]'`, a cloud CLI, or `scontrol show hostnames "$SLURM_JOB_NODELIST"`.
//
// The job file reader runs it once, at validation, and the output is
// recorded with the job (RecordedHostsCommand, runner/jobfile/overrides.h): `down`,
// `exec`, `attach` and `rerun` read the recorded output and never run the
// command again.
//
// Its stdout is either one address per line (blank lines and lines starting
// with '#' are skipped), or, when its first non-blank character is '[', a
// JSON list of host entries of the same shape as `hosts:` entries
// (`["10.0.0.5", {"address": "10.0.0.6", "gpus": 8}]`).
#pragma once

#include <chrono>
#include <string>

#include "base/status.h"

namespace barge::runner {

// How long a hosts_command may run.
inline constexpr std::chrono::seconds kHostsCommandTimeout{60};
// The most of its stdout that is read (more is an error).
inline constexpr size_t kMaxHostsCommandOutput = 1 << 20;

// Runs `command` with /bin/sh -c in directory `dir` (the job file's), with
// stdin from /dev/null, in a process group of its own; returns its stdout.
// Fails with a message naming the command when it cannot start, exits
// non-zero (the exit code or signal, and the last lines of its stderr),
// runs longer than `timeout` (its whole process group is killed), prints
// more than kMaxHostsCommandOutput bytes, or prints nothing but blanks.
// Blocks the calling thread until then.
[[nodiscard]] Result<std::string> RunHostsCommand(const std::string& command, const std::string& dir,
                                                  std::chrono::milliseconds timeout = kHostsCommandTimeout);

// The output as YAML text of a list of host entries, line for line (so that
// an error in the output's line N is reported at line N): a JSON list is
// YAML already and returned as it is; otherwise each non-blank line not
// starting with '#' becomes a list item holding that line, trimmed, as a
// double-quoted string.
std::string HostsCommandOutputAsYaml(const std::string& output);

}  // namespace barge::runner
