// kept_lines: what a node's kept log file (LogSink's "<stamp> <stdout|stderr>
// <text>" lines) already holds of its current container, counted per
// stream, so that `barge attach` of a later controller can fill the gap
// from the engine's whole log by skipping exactly that many lines per
// stream (node_streams_api.cc explains why counts and not stamps).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace barge::runner {

struct KeptLines {
  bool found = false;                 // the file could be read
  std::array<uint64_t, 2> lines{};    // stdout, stderr
  std::array<size_t, 2> last_hash{};  // std::hash of the last counted line's text, per stream
};

// Counts the lines of the file at `path` stamped at or after `from_ns`
// (the job's latest restart: earlier lines are an earlier container's;
// all lines when nullopt). A line without a stamp of its own (a long
// line's continuation piece) is not a line of its own.
KeptLines CountKeptLines(const std::string& path, std::optional<int64_t> from_ns);

}  // namespace barge::runner
