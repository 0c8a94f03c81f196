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

// Empty when every `{array.` in `command` is data whatever the programs
// are; else the error for the job file, naming the safe forms.
// `string_form`: the job file gave a string, run with sh -c, so all of it is
// code. In an exec form, a placeholder is data only as
//  - a whole argument ({array.X} alone) that is neither the program, nor a
//    shell's or an interpreter's script file (its first operand), nor after
//    an option that reads code (a short-option cluster holding c, e, E or S:
//    sh -c, python3 -c, perl -e, env -S; or --eval, --command, --rcfile...,
//    walking back over options and `--` to the nearest operand), or
//  - an option's value, --NAME=...{array.X}..., under the same rule;
// so no wrapper (sudo, nohup, stdbuf, tini --, mpirun) needs to be known.
std::string ArrayPlaceholderInShell(const std::vector<std::string>& command, bool string_form);

}  // namespace barge::runner
