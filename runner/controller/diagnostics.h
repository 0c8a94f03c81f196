// Diagnostics: when an attempt failed (a node failed, a host was lost, a
// hang, a health fault, the head exited non-zero, the launch failed after
// containers were started, the timeout), what its hosts can still tell is
// kept before the teardown removes it: a bundle under the job's run
// directory, RUN_DIR/diagnostics/attempt-N (N: the restarts before the
// attempt), of
//   index.txt          why, when, how each host answered (or that it gave
//                      no answer within the bound), the files and their
//                      sizes, the caps
//   rank-R-HOST.txt    per node: how barge saw it end, the last lines of
//                      its output (the whole of it: its log file), then its
//                      host's answer to ContainerDiagnosticsScript (docker
//                      inspect, processes with state and wait channel,
//                      kernel stacks)
//   host-HOST.txt      per host: HostDiagnosticsScript's answer (kernel log
//                      since the job began, Xid lines marked; nvidia-smi -q
//                      where the job has GPUs there; disk; memory)
// (runner/remote/diagnostics_commands.h has the questions). The output
// names it ("diagnostics: DIR") and a job event (event::kDiagnostics, its
// detail "DIR: WHY") lets `barge show --diagnostics` and the dashboard find it.
//
// Bounded: every question to every host of the attempt goes at once, on
// the job's loop, in a command group of its own; what has not answered
// kBound after the start is written as no answer and abandoned (its remote
// side kills itself kRemoteSlack later), and an interrupt ends the wait at
// once: the teardown is never held up longer than kBound. A lost host is
// not asked. Caps: kFileCap bytes a file, kBundleCap the whole bundle (a
// file past what is left is cut, then left out; index.txt always written).
// Secret values are masked in every file, as in every message (docker
// inspect shows the container's environment).
//
// Threading: the loop's thread only.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "runner/controller/attempt.h"
#include "runner/controller/job_context.h"

namespace barge::runner::internal {

class Diagnostics : private JobPart {
 public:
  static constexpr seconds kBound{30};
  static constexpr seconds kRemoteSlack{5};
  // Each step of a script (one docker call, the kernel log, nvidia-smi).
  static constexpr seconds kStep{10};
  static constexpr size_t kFileCap = size_t{256} << 10;
  static constexpr size_t kBundleCap = size_t{4} << 20;
  // Kept of the bundle for index.txt.
  static constexpr size_t kIndexCap = size_t{64} << 10;
  // Lines of each node's output in its file.
  static constexpr size_t kTailLines = 50;
  // Kernel lines are kept from this long before the job began (the
  // hosts' clocks are not the controller's).
  static constexpr seconds kClockSlack{60};

  Diagnostics(JobContext* ctx, Attempt* attempt);

  // Collects and writes the bundle of the attempt that just failed, for
  // `why` (its first line goes in the output and the event). Returns the
  // bundle's directory; "" when nothing was written (the job was
  // interrupted, no node had a container, or the directory could not be
  // made: a warning says why).
  // Never fails the job.
  std::string Collect(const std::string& why);

 private:
  int64_t began_epoch_s_;  // when the job began, seconds since the epoch
  Attempt& attempt_;
};

}  // namespace barge::runner::internal
