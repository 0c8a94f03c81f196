// The command-line entry points of the dashboard: `barge ui` and `barge
// show JOB --timeline`. main.cc parses the arguments (CLI11) and calls
// these; each returns barge's exit code (0, or 125 with "barge: MESSAGE" on
// `err`).
#pragma once

#include <cstdio>
#include <string>

#include "runner/ui/server.h"

namespace barge::runner::ui {

// "HOST:PORT" (an IPv6 host in brackets) into options->listen_host and
// options->port; an error naming the accepted form otherwise.
[[nodiscard]] Status ParseListen(const std::string& text, UiOptions* options);

// `barge ui --job-file FILE` or `--hosts a,b` (at most one): the hosts the
// hosts page asks live, as `barge hosts FILE` / `barge hosts --hosts a,b`
// would. The file must be readable; it is kept as an absolute path.
[[nodiscard]] Status SetLiveHosts(const std::string& job_file, const std::string& hosts, UiOptions* options);

// The dashboard's token, never from the command line (any user of this
// machine reads /proc/PID/cmdline): from `token_file` (a regular file of
// this user's that no one else may read or write; its first line), else
// from $BARGE_UI_TOKEN, else "" (a new random one). A token on the command
// line (`cli_token` non-empty) is refused. A token must have at least
// kMinTokenLength characters and no whitespace.
inline constexpr size_t kMinTokenLength = 32;
[[nodiscard]] Result<std::string> ResolveToken(const std::string& cli_token, const std::string& token_file);

// `barge ui`: serves until SIGINT or SIGTERM. Prints the URL with the
// token to `out` first (one line: "barge ui: http://127.0.0.1:8765/s/HEX/?token=...";
// the token in it logs in once).
int UiCommand(const UiOptions& options, std::FILE* out, std::FILE* err = stderr);

// `barge show JOB --timeline`: the job's timeline as text bars.
int TimelineCommand(const std::string& state_dir, const std::string& job_text, std::FILE* out,
                    std::FILE* err = stderr);

}  // namespace barge::runner::ui
