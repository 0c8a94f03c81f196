// Framing of a container's output: bytes in arbitrary chunks → lines, and
// the timestamps `docker logs --timestamps` puts in front of each line.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "container/timestamp.h"

namespace barge::container {

// Cuts a byte stream into lines. Feed it the stream's chunks in order, however
// they were cut; call Flush once at end of stream. The lines it emits do not
// depend on where the chunks were cut.
//
// A line is emitted without its "\n"; every other byte is kept as it is (a
// "\r" before the "\n" stays, so CRLF output arrives as "text\r"). A line
// longer than `max_line_bytes` is emitted in pieces of exactly
// `max_line_bytes`, the last piece holding the rest (1..max bytes); pieces
// after the first have `continuation` set. Memory held is bounded by
// `max_line_bytes` plus the current chunk.
//
// Not thread-safe; one stream per splitter. Copyable and movable.
class LineSplitter {
 public:
  static constexpr size_t kMaxLineBytes = size_t{1} << 20;  // 1 MiB

  // Called synchronously from Feed and Flush, once per line (or piece), in
  // stream order. `line` is valid only during the call. The sink must not
  // call Feed or Flush on the same splitter.
  using Sink = std::function<void(std::string_view line, bool continuation)>;

  // Precondition: max_line_bytes >= 1.
  explicit LineSplitter(Sink sink, size_t max_line_bytes = kMaxLineBytes);

  // Emits every line that `chunk` completes; keeps the unfinished rest.
  void Feed(std::string_view chunk);

  // End of stream: emits the unfinished last line, if any bytes of it are
  // pending (a stream ending in "\n" emits nothing more). The splitter is
  // then empty and may be fed a new stream.
  void Flush();

  // Drops the unfinished line without emitting it (its stream broke off:
  // the whole line will be read again from elsewhere). The splitter is
  // then empty and may be fed a new stream.
  void Discard() {
    pending_.clear();
    continuing_ = false;
  }

  // Bytes of the unfinished line held back; 0 right after a "\n" or Flush.
  size_t pending_bytes() const { return pending_.size(); }

 private:
  void Emit(std::string_view line);

  Sink sink_;
  size_t max_line_bytes_;
  std::string pending_;
  bool continuing_ = false;  // pieces of the current line were already emitted
};

// One line of `docker logs --timestamps` output: "<RFC 3339 time> <text>".
// Views point into the line that was parsed.
struct TimestampedLine {
  std::string_view timestamp;  // as Docker wrote it
  int64_t ns = 0;              // the same time, in ns since the epoch (ParseTimestamp)
  std::string_view text;       // everything after the single space; may be empty
};

// Splits a line into Docker's timestamp and the container's own text. Docker
// separates them by one space, also for an empty line ("<time> "); a line
// that is nothing but a timestamp is accepted with empty text. Fails when
// the line does not start with a valid timestamp (for instance the second
// piece of a line LineSplitter cut at its cap); the message quotes the
// start of the line.
[[nodiscard]] Result<TimestampedLine> ParseTimestampedLine(std::string_view line);

}  // namespace barge::container
