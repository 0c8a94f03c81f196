// Shell completion scripts and the man page, both generated from the CLI11
// command tree that `--help` prints, so that they cannot drift from it.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace CLI {
class App;
}

namespace barge::runner {

// What a positional argument or an option's value completes to, by its
// name: "job_file" and "--hosts-file" to *.yaml files, "job" to the job ids
// and names of the local store (through `barge __complete-jobs`), "shell"
// to bash, zsh and fish, "--color" to its three modes.
//
// The script for `shell` ("bash", "zsh" or "fish"): subcommands, their
// options, and those values. Hidden subcommands (empty group) are left out.
[[nodiscard]] Result<std::string> CompletionScript(const CLI::App& app, std::string_view shell);

// barge(1) in roff (man(7) macros): every visible subcommand with its
// arguments and options, then the exit codes, the environment and the
// files. `date` is "YYYY-MM-DD" for the page's footer.
std::string ManPage(const CLI::App& app, std::string_view version, std::string_view date);

}  // namespace barge::runner
