// Where the job's own output goes: every line of every container, to the
// terminal (prefixed by node, stdout to stdout and stderr to stderr, a
// colour per node on a TTY) and to a per-node log file that outlives the
// hosts: STATE/runs/<job-id>/<rank>-<host>.log, one line per line as
//   <docker timestamp> <stdout|stderr> <text>
// With a StdioWriter (relay/stdio_writer.h) the terminal copy never blocks:
// while the writer is behind, lines go only to the files, and the writer
// catches up from them (this sink is its Backlog); the files are then
// flushed once per loop pass rather than once per line.
// Not thread-safe: used from the event loop's thread only.
#pragma once

#include <cstdio>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "runner/console/stdio_writer.h"

namespace barge::runner {

class LogSink : public StdioWriter::Backlog {
 public:
  struct Node {
    int rank;
    std::string role;
    std::string host;  // as shown in the prefix and the file name
  };

  // Opens (creates, 0600) one file per node under `run_dir`. With `writer`
  // (not owned; must outlive this) the terminal copy goes through it;
  // without, straight to stdout and stderr, each file flushed per line.
  [[nodiscard]] static Result<std::unique_ptr<LogSink>> Open(const std::string& run_dir,
                                                             const std::vector<Node>& nodes,
                                                             bool echo_to_terminal,
                                                             StdioWriter* writer = nullptr);
  // Gives the writer every line it has not echoed yet (blocking) first.
  ~LogSink() override;

  // `timestamp` is Docker's RFC3339Nano stamp of the line (may be empty).
  void Line(int rank, Stream stream, std::string_view timestamp, std::string_view text);

  // Around every line echoed to the terminal: `before` runs first and
  // `after` last (e.g. to clear and redraw a status line).
  void set_echo_guard(std::function<void()> before, std::function<void()> after) {
    before_echo_ = std::move(before);
    after_echo_ = std::move(after);
  }

  // StdioWriter::Backlog: echoes lines the writer was behind on, from the
  // files; makes the files readable.
  bool Refill(StdioWriter& writer) override;
  void Flush() override;

  std::string path(int rank) const;
  // The last `n` lines seen from `rank` (for error messages).
  std::vector<std::string> Tail(int rank, size_t n) const;

 private:
  struct File;
  LogSink() = default;
  // `text` as echoed: prefixed by its node, coloured on a terminal.
  std::string Echoed(const File& file, Stream stream, std::string_view text) const;
  std::vector<std::unique_ptr<File>> files_;  // by rank
  StdioWriter* writer_ = nullptr;
  bool echo_ = true;
  bool stdout_tty_ = false;  // colour on stdout (runner/console/color.h), not only a terminal
  bool stderr_tty_ = false;
  std::function<void()> before_echo_;
  std::function<void()> after_echo_;
};

}  // namespace barge::runner
