// Reading a job's kept per-node log files (STATE/runs/<job-id>/<rank>-<host>.log,
// written by LogSink, log_sink.h): one reader per node file, lines merged
// across nodes by Docker's timestamps. Shared by `barge logs` (logs_cli.h)
// and the dashboard (ui/), so both read and order lines the same way.
//
// A line of the file is "<stamp> <stdout|stderr> <text>" (the stamp may be
// empty); a line of any other shape is stdout text as a whole. A line
// without a readable stamp keeps the stamp of the line before it in the
// same file (so it stays where it was written); one before any stamped
// line sorts first.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "runner/store/job_store.h"

namespace barge::runner {

// The stamp of a line read before any stamped line of its file.
inline constexpr int64_t kNoStamp = std::numeric_limits<int64_t>::min();

// One line of a node's log file.
struct LogLine {
  int64_t stamp = kNoStamp;  // ns since the epoch: the line's own, or inherited
  bool stamped = false;      // the line carried a readable stamp of its own
  bool is_stderr = false;
  std::string text;
};

// Parses one line as LogSink writes it; a line without a readable stamp
// takes `previous`.
LogLine ParseLogLine(std::string_view raw, int64_t previous);

// One node's log file, read forward from `start_offset` (a line start: 0,
// or an offset() returned before): each line is returned once, and only
// once its newline has been written (see Next). The file may appear later
// than the node: until then it reads as empty. Owns its file descriptor.
// Not thread-safe.
class NodeLog {
 public:
  NodeLog(const NodeRecord& node, std::string path, uint64_t start_offset = 0);
  ~NodeLog();
  NodeLog(const NodeLog&) = delete;
  NodeLog& operator=(const NodeLog&) = delete;

  int rank() const { return rank_; }
  const std::string& role() const { return role_; }
  const std::string& host() const { return host_; }
  // "[RANK ROLE HOST", without the closing bracket.
  const std::string& prefix() const { return prefix_; }
  // Bytes read from the file so far (from offset 0).
  uint64_t bytes_read() const { return bytes_read_; }
  // The file offset of the first line not returned by Next yet (lines past
  // it may have been: see Next).
  uint64_t offset() const { return ahead_.empty() ? InFileOffset() : ahead_.front().start; }

  // The next complete line, or nullopt when the file holds no further
  // complete line now. With `writer_done`, a last line without a newline
  // counts as complete. Fails only when the file exists but cannot be read.
  // Lines come in file order, except that stdout and stderr lines are put
  // back in the order of their own stamps: the two streams reach the file
  // through separate pipes, so a stderr line can land after stdout lines
  // the container wrote later. Within one stream the file order is kept.
  // Up to kLookahead lines are read ahead for that.
  [[nodiscard]] Result<std::optional<LogLine>> Next(bool writer_done);

  static constexpr size_t kLookahead = 1024;

 private:
  struct Ahead {
    LogLine line;
    uint64_t start;  // the line's file offset
  };
  // The next line in file order.
  Result<std::optional<LogLine>> NextInFile(bool writer_done);
  uint64_t InFileOffset() const { return bytes_read_ - (buf_.size() - pos_); }
  LogLine Take(std::string_view raw);
  // Appends up to one chunk of what the file holds past what was read to
  // buf_; returns how many bytes (0: nothing new, or no file yet).
  Result<size_t> Read();

  const int rank_;
  const std::string role_;
  const std::string host_;
  const std::string prefix_;
  const std::string path_;
  const uint64_t start_offset_;
  int fd_ = -1;
  std::string buf_;  // bytes read and not yet returned start at pos_
  size_t pos_ = 0;
  size_t scanned_ = 0;  // buf_ holds no newline in [pos_, scanned_)
  uint64_t bytes_read_ = 0;
  int64_t last_stamp_ = kNoStamp;
  std::deque<Ahead> ahead_;  // read, not returned yet, in file order
};

// The node files being read, by rank.
using NodeLogs = std::map<int, std::unique_ptr<NodeLog>>;

// Where the node's lines are: the path recorded for it, else where LogSink
// puts them; empty when neither is known.
std::string NodeLogPath(const JobRecord& job, const NodeRecord& node);

// Adds a reader for every node of `nodes` (all, or rank `only`) that has
// none yet: nodes are recorded as their containers start, so a followed
// job gains them as it goes. A new reader of rank r starts at
// `start_offsets[r]` when given, else at 0.
void AddNewNodeLogs(const JobRecord& job, const std::vector<NodeRecord>& nodes,
                    std::optional<int> only, NodeLogs* logs,
                    const std::map<int, uint64_t>& start_offsets = {});

// The sum of bytes_read() over `logs`.
uint64_t BytesRead(const NodeLogs& logs);

using EmitLogLine = std::function<void(const NodeLog&, const LogLine&)>;

// Hands every complete line now in `logs` to `emit`, merged by stamp, ties
// by rank; each node's lines in their file order.
[[nodiscard]] Status MergeAvailable(const NodeLogs& logs, bool writer_done,
                                    const EmitLogLine& emit);

// "[0 head h1] text\n", "[0 head h1 stderr] text\n", with `timestamps`
// preceded by the stamp ("-" for a line without one).
std::string FormatLogLine(const NodeLog& log, const LogLine& line, bool timestamps);

}  // namespace barge::runner
