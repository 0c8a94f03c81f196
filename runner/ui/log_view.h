// The dashboard's view of a job's kept per-node log files (log_files.h):
// pages of the merged output of a finished job, and a tail that follows a
// running job's files as its controller appends to them. Reads files only:
// no SSH, so server threads may use it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "runner/store/job_store.h"
#include "runner/logs/log_files.h"

namespace barge::runner::ui {

struct ViewLine {
  int rank = 0;
  std::string role;
  std::string host;
  bool is_stderr = false;
  std::string text;
};

struct LogPage {
  std::vector<ViewLine> lines;
  size_t first = 0;  // the index of lines[0] in the merged output
  size_t total = 0;  // lines in the merged output
};

// Lines [first, first + count) of the job's merged output (all nodes, or
// rank `node`); without `first`, the last `count`. The files are read in
// chunks and only the page's lines are kept, so a page of a huge log costs
// one pass over it and `count` lines of memory. A job that is not final
// has its unfinished last lines left out.
[[nodiscard]] Result<LogPage> ReadLogPage(const JobRecord& job,
                                          const std::vector<NodeRecord>& nodes,
                                          std::optional<int> node, std::optional<size_t> first,
                                          size_t count);

// Follows a job's files: each Poll returns the complete lines appended
// since the last (merged by stamp within one poll). Where it stands is a
// cursor, one file offset per rank, that a new LogTail can start from (an
// EventSource's Last-Event-ID). Not thread-safe: one per stream.
class LogTail {
 public:
  LogTail(std::optional<int> node, std::map<int, uint64_t> start_offsets = {});

  // Picks up nodes recorded since, reads what was appended. With
  // `writer_done`, a last line without a newline is taken too. Only the
  // last `keep_last` lines are returned (the others are read and dropped:
  // a stream that starts on a long log shows its end).
  [[nodiscard]] Result<std::vector<ViewLine>> Poll(const JobRecord& job,
                                                   const std::vector<NodeRecord>& nodes,
                                                   bool writer_done,
                                                   size_t keep_last = SIZE_MAX);
  // Whether the last Poll read any byte.
  bool grew() const { return grew_; }
  // "RANK:OFFSET,RANK:OFFSET" of where each file was read up to.
  std::string Cursor() const;
  // The inverse of Cursor; nullopt for text that is not one.
  static std::optional<std::map<int, uint64_t>> ParseCursor(const std::string& text);

 private:
  const std::optional<int> node_;
  const std::map<int, uint64_t> start_offsets_;
  NodeLogs logs_;
  bool grew_ = false;
};

}  // namespace barge::runner::ui
