// Where the job's own output goes: every line of every container, to the
// terminal (prefixed by node, stdout to stdout and stderr to stderr, a
// colour per node on a TTY) and to a per-node log file that outlives the
// hosts: STATE/runs/<job-id>/<rank>-<host>.log, one line per line as
//   <docker timestamp> <stdout|stderr> <text>
// Not thread-safe: used from the event loop's thread only.
#pragma once

#include <array>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/enum_names.h"
#include "base/status.h"

namespace barge::runner {

enum class Stream { kStdout, kStderr };
// As a log file's second field spells them.
inline constexpr auto kStreamNames =
    std::to_array<EnumName<Stream>>({{Stream::kStdout, "stdout"}, {Stream::kStderr, "stderr"}});
static_assert(ListsEveryValueInOrder(kStreamNames));

class LogSink {
 public:
  struct Node {
    int rank;
    std::string role;
    std::string host;  // as shown in the prefix and the file name
  };

  // Opens (creates, 0600) one file per node under `run_dir`.
  [[nodiscard]] static Result<std::unique_ptr<LogSink>> Open(const std::string& run_dir,
                                                             const std::vector<Node>& nodes,
                                                             bool echo_to_terminal);
  ~LogSink();

  // `timestamp` is Docker's RFC3339Nano stamp of the line (may be empty).
  void Line(int rank, Stream stream, std::string_view timestamp, std::string_view text);

  // Around every line echoed to the terminal: `before` runs first and
  // `after` last (e.g. to clear and redraw a status line).
  void set_echo_guard(std::function<void()> before, std::function<void()> after) {
    before_echo_ = std::move(before);
    after_echo_ = std::move(after);
  }

  std::string path(int rank) const;
  // The last `n` lines seen from `rank` (for error messages).
  std::vector<std::string> Tail(int rank, size_t n) const;

 private:
  struct File;
  LogSink() = default;
  std::vector<std::unique_ptr<File>> files_;  // by rank
  bool echo_ = true;
  bool stdout_tty_ = false;  // colour on stdout (runner/color.h), not only a terminal
  bool stderr_tty_ = false;
  std::function<void()> before_echo_;
  std::function<void()> after_echo_;
};

}  // namespace barge::runner
