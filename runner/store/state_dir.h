// Where barge keeps what outlives a job's hosts: the job store, per-node
// logs and artifacts. $BARGE_HOME, else $XDG_STATE_HOME/barge when
// XDG_STATE_HOME is an absolute path (a relative one is ignored, as the XDG
// Base Directory spec says), else ~/.local/state/barge with ~ as the spec
// takes it: $HOME, else the passwd entry's home (base/user_home.h,
// HomeRule::kXdg). Created 0700.
#pragma once

#include <string>

#include "base/status.h"

namespace barge::runner {

// The state directory's path (not created).
std::string StateDir();

// STATE/runs: the parent of every run directory (not created).
std::string RunsDir(const std::string& state_dir);
// STATE/runs/<id>: the run directory of job (or job array) `id`, where its
// per-node logs, its artifacts and a detached controller's log go (not
// created). The one place that path is built.
std::string RunDir(const std::string& state_dir, const std::string& id);

// Creates `path` and its parents, each new directory mode 0700.
[[nodiscard]] Status MakeDirs(const std::string& path);

// A fresh job id: 8 lowercase hex digits from /dev/urandom.
std::string NewJobId();

}  // namespace barge::runner
