// Fuzz target for the framing of container output: LineSplitter over a byte
// stream cut into chunks, and ParseTimestampedLine on every line.
//
// Input: byte 0 picks the line cap (0xFF: the real 1 MiB, else 1..64 bytes,
// so that short inputs reach the cutting of long lines), byte 1 seeds the
// chunk sizes, the rest is the stream.
//
// Checks, besides "never crashes":
//   - the emitted lines, rejoined with "\n" (none before a continuation
//     piece), give back the stream;
//   - lines hold no "\n", pieces are no longer than the cap, and only a
//     piece of exactly the cap is continued;
//   - the same lines come out however the stream is cut (in one chunk, in
//     the input's chunking, byte by byte) and when the splitter is reused
//     after Flush;
//   - no more than the cap is held back between chunks;
//   - a parsed line is its timestamp, a space and its text; the time
//     formats back to itself; a refused line's message is short and has no
//     control bytes.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "container/log_line.h"
#include "container/timestamp.h"

namespace {

using barge::container::FormatTimestamp;
using barge::container::LineSplitter;
using barge::container::ParseTimestamp;
using barge::container::ParseTimestampedLine;

[[noreturn]] void Fail(const char* what, std::string_view detail = {}) {
  std::fprintf(stderr, "log_line_fuzz: %s: %.*s\n", what,
               static_cast<int>(std::min<size_t>(detail.size(), 200)), detail.data());
  std::abort();
}

struct Piece {
  std::string bytes;
  bool continuation;
  bool operator==(const Piece&) const = default;
};

// Feeds `stream` to `splitter` in chunks of the sizes `next_size` returns
// (0 included: an empty Feed must change nothing), then flushes.
template <typename NextSize>
void FeedInChunks(LineSplitter& splitter, std::string_view stream, size_t cap, NextSize next_size) {
  while (!stream.empty()) {
    const size_t n = std::min(next_size(), stream.size());
    splitter.Feed(stream.substr(0, n));
    if (splitter.pending_bytes() > cap) Fail("holds back more than the cap");
    if (n > 0 && stream[n - 1] == '\n' && splitter.pending_bytes() != 0) {
      Fail("holds back bytes after a newline");
    }
    stream.remove_prefix(n);
  }
  splitter.Flush();
  if (splitter.pending_bytes() != 0) Fail("holds back bytes after Flush");
}

void CheckPieces(const std::vector<Piece>& pieces, std::string_view stream, size_t cap) {
  std::string rejoined;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const Piece& p = pieces[i];
    if (p.bytes.find('\n') != std::string::npos) Fail("a line holds a newline", p.bytes);
    if (p.bytes.size() > cap) Fail("a piece is longer than the cap", p.bytes);
    if (p.continuation) {
      if (i == 0) Fail("the first line is a continuation", p.bytes);
      if (pieces[i - 1].bytes.size() != cap) Fail("a short piece is continued", p.bytes);
    } else if (i > 0) {
      rejoined += '\n';
    }
    rejoined += p.bytes;
  }
  if (!stream.empty() && stream.back() == '\n') rejoined += '\n';
  if (rejoined != stream) Fail("the lines do not give back the stream", rejoined);
}

void CheckTimestampedLine(std::string_view line) {
  auto parsed = ParseTimestampedLine(line);
  if (!parsed.ok()) {
    const std::string message = parsed.status().message();
    if (message.size() > 400) Fail("a long message", message);
    for (unsigned char c : message) {
      if (c < 0x20 || c == 0x7f) Fail("a control byte in the message", message);
    }
    return;
  }
  const auto& p = *parsed;
  if (p.timestamp.data() != line.data()) Fail("the timestamp is not the line's start", line);
  std::string rebuilt(p.timestamp);
  if (p.timestamp.size() < line.size()) {
    if (p.text.data() != line.data() + p.timestamp.size() + 1) Fail("the text is elsewhere", line);
    rebuilt += ' ';
    rebuilt += p.text;
  } else if (!p.text.empty()) {
    Fail("text without a space", line);
  }
  if (rebuilt != line) Fail("timestamp and text do not give back the line", line);
  auto again = ParseTimestamp(p.timestamp);
  if (!again.ok() || *again != p.ns) Fail("the timestamp parses differently alone", line);
  const std::string formatted = FormatTimestamp(p.ns);
  auto round_trip = ParseTimestamp(formatted);
  if (!round_trip.ok() || *round_trip != p.ns) {
    Fail("FormatTimestamp does not parse back", formatted);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t cap = data[0] == 0xFF ? LineSplitter::kMaxLineBytes : 1 + data[0] % 64;
  uint32_t state = 0x9E3779B9u * (data[1] + 1u);
  const std::string_view stream(reinterpret_cast<const char*>(data) + 2, size - 2);

  std::vector<Piece> pieces;
  LineSplitter splitter(
      [&](std::string_view line, bool continuation) {
        pieces.push_back({std::string(line), continuation});
      },
      cap);
  FeedInChunks(splitter, stream, cap, [&] {
    state ^= state << 13;  // xorshift32
    state ^= state >> 17;
    state ^= state << 5;
    return size_t{state % 19};
  });
  CheckPieces(pieces, stream, cap);

  const std::vector<Piece> chunked = pieces;
  pieces.clear();
  FeedInChunks(splitter, stream, cap, [&] { return stream.size(); });
  if (pieces != chunked) Fail("one chunk gives other lines than the input's chunking");
  pieces.clear();
  FeedInChunks(splitter, stream, cap, [] { return size_t{1}; });
  if (pieces != chunked) Fail("byte by byte gives other lines than the input's chunking");

  for (const Piece& p : chunked) {
    if (!p.continuation) CheckTimestampedLine(p.bytes);
  }
  CheckTimestampedLine(stream);
  (void)ParseTimestamp(stream);
  return 0;
}
