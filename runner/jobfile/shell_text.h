// Which words of a command a shell reads as code: where a job file may not
// put values it does not control ({array.COLUMN}: a row's text).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace barge::runner {

// In an exec-form command (argv), the index of the argument a shell runs as
// its script, if any: after `env` (its options and NAME=VALUE words),
// `exec`, `nice` (and its options) and `timeout` (its options and
// DURATION), a program whose basename is sh, bash, dash, zsh, ksh or ash
// (or busybox followed by one of them), the argument after its first
// option that contains `c` (-c, -lc, -ec, ...). nullopt when no shell reads
// any of them as code.
std::optional<size_t> ShellScriptArgument(const std::vector<std::string>& argv);

// Empty when `{array.` appears nowhere a shell reads code in `command`
// (`string_form`: the job file gave a string, run with sh -c, so all of it
// is code); else the error for the job file, naming the safe forms.
std::string ArrayPlaceholderInShell(const std::vector<std::string>& command, bool string_form);

}  // namespace barge::runner
