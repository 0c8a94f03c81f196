// The one way barge puts a controller in the background (`run -d`, an
// array's `run -d`): a child process in a session of its own, so closing
// the terminal does not stop it, reading nothing and writing its output to
// a log file.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>

#include "base/status.h"

namespace barge::runner {

// Forks a child that calls setsid(), takes /dev/null as stdin and
// `log_path` (appended, created 0600) as stdout and stderr, runs `body` and
// exits with what it returns (without running this process's exit
// handlers). Flushes every stdio stream first. Returns the child's pid.
[[nodiscard]] Result<pid_t> SpawnDetached(const std::string& log_path, const std::function<int()>& body);

}  // namespace barge::runner
