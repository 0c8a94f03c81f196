#include "container/log_line.h"

#include <cassert>
#include <utility>

namespace barge::container {

LineSplitter::LineSplitter(Sink sink, size_t max_line_bytes)
    : sink_(std::move(sink)), max_line_bytes_(max_line_bytes) {
  assert(max_line_bytes_ >= 1);
}

void LineSplitter::Emit(std::string_view line) {
  const bool continuation = continuing_;
  sink_(line, continuation);
}

void LineSplitter::Feed(std::string_view chunk) {
  while (!chunk.empty()) {
    const size_t newline = chunk.find('\n');
    std::string_view part = chunk.substr(0, newline);
    // The line is known to exceed the cap: cut a full piece off its front.
    while (pending_.size() + part.size() > max_line_bytes_) {
      const size_t take = max_line_bytes_ - pending_.size();
      if (pending_.empty()) {
        Emit(part.substr(0, take));
      } else {
        pending_.append(part.substr(0, take));
        Emit(pending_);
        pending_.clear();
      }
      continuing_ = true;
      part.remove_prefix(take);
    }
    if (newline == std::string_view::npos) {
      pending_.append(part);
      return;
    }
    if (pending_.empty()) {
      Emit(part);  // no copy on the common path
    } else {
      pending_.append(part);
      Emit(pending_);
      pending_.clear();
    }
    continuing_ = false;
    chunk.remove_prefix(newline + 1);
  }
}

void LineSplitter::Flush() {
  if (!pending_.empty()) {
    Emit(pending_);
    pending_.clear();
  }
  continuing_ = false;
}

Result<TimestampedLine> ParseTimestampedLine(std::string_view line) {
  const size_t space = line.find(' ');
  const std::string_view stamp = line.substr(0, space);
  Result<int64_t> ns = ParseTimestamp(stamp);
  if (!ns.ok()) {
    // Quote the start of the line, control bytes escaped, so that a message
    // never carries a megabyte of output or a terminal escape sequence.
    constexpr size_t kQuoted = 60;
    std::string start;
    for (unsigned char c : line.substr(0, kQuoted)) {
      if (c < 0x20 || c == 0x7f) {
        static constexpr char kHex[] = "0123456789abcdef";
        start += "\\x";
        start += kHex[c >> 4];
        start += kHex[c & 0xf];
      } else {
        start += static_cast<char>(c);
      }
    }
    if (line.size() > kQuoted) start += "...";
    return Status::Error("log line \"" + start + "\" does not start with a Docker timestamp");
  }
  TimestampedLine parsed;
  parsed.timestamp = stamp;
  parsed.ns = *ns;
  if (space != std::string_view::npos) parsed.text = line.substr(space + 1);
  return parsed;
}

}  // namespace barge::container
