// barge's exit codes, all of them, in one place. docs/reference/command-line.md
// and docs/guide/running-jobs.md list them for users; a change here changes
// those tables too.
//
//   the head's own  `barge run` and `rerun`: the job ran; barge exits with the
//                   head container's exit code.
//   0               success, for every other command (and a job array whose
//                   members all succeeded).
//   123             the job hung (no progress as its `progress:` block says)
//                   and was stopped: `on_hang: stop`, or no restart left.
//   124             the job reached its `timeout:` and was stopped (as
//                   timeout(1)).
//   125             barge's own failure: a bad job file or override, a usage
//                   error, a host that cannot be reached, fails preflight or is
//                   held by another job, a container that fails to start, a
//                   failed worker, a job array with a member that did not
//                   succeed (as `docker run`).
//   130             interrupted (Ctrl-C, SIGTERM or SIGHUP): the job was
//                   stopped and its containers removed (as a shell's 128 +
//                   SIGINT).
#pragma once

namespace barge::runner {

inline constexpr int kExitHung = 123;
inline constexpr int kExitTimedOut = 124;
inline constexpr int kExitBargeFailure = 125;
inline constexpr int kExitInterrupted = 130;

}  // namespace barge::runner
