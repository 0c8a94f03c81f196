#include "runner/logs/log_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <queue>

#include "container/timestamp.h"
#include "runner/logs/log_sink.h"

namespace barge::runner {

namespace {
constexpr size_t kReadChunk = size_t{64} * 1024;
}  // namespace

LogLine ParseLogLine(std::string_view raw, int64_t previous) {
  LogLine line;
  line.stamp = previous;
  line.text = std::string(raw);
  const size_t stamp_end = raw.find(' ');
  if (stamp_end == std::string_view::npos) return line;
  const std::string_view rest = raw.substr(stamp_end + 1);
  const size_t stream_end = rest.find(' ');
  const std::string_view stream = rest.substr(0, stream_end);
  const std::optional<Stream> which = ValueOf(kStreamNames, stream);
  if (!which) return line;
  line.is_stderr = *which == Stream::kStderr;
  line.text = stream_end == std::string_view::npos ? "" : std::string(rest.substr(stream_end + 1));
  if (stamp_end > 0) {
    Result<int64_t> ns = container::ParseTimestamp(raw.substr(0, stamp_end));
    if (ns.ok()) {
      line.stamp = *ns;
      line.stamped = true;
    }
  }
  return line;
}

NodeLog::NodeLog(const NodeRecord& node, std::string path, uint64_t start_offset)
    : rank_(node.rank),
      role_(node.role),
      host_(node.host),
      prefix_("[" + std::to_string(node.rank) + " " + node.role + " " + node.host),
      path_(std::move(path)),
      start_offset_(start_offset),
      bytes_read_(start_offset) {}

NodeLog::~NodeLog() {
  if (fd_ >= 0) close(fd_);
}

Result<std::optional<LogLine>> NodeLog::Next(bool writer_done) {
  while (ahead_.size() < kLookahead) {
    const uint64_t start = InFileOffset();
    Result<std::optional<LogLine>> next = NextInFile(writer_done);
    if (!next.ok()) return next.status();
    if (!*next) break;
    ahead_.push_back(Ahead{std::move(**next), start});
  }
  if (ahead_.empty()) return std::optional<LogLine>();
  // The first line of each stream is the earliest of its stream; the
  // earlier of the two goes first when both carry stamps of their own.
  size_t pick = 0;
  const bool first_is_err = ahead_[0].line.is_stderr;
  for (size_t i = 1; i < ahead_.size(); ++i) {
    if (ahead_[i].line.is_stderr == first_is_err) continue;
    if (ahead_[i].line.stamped && ahead_[0].line.stamped && ahead_[i].line.stamp < ahead_[0].line.stamp) {
      pick = i;
    }
    break;
  }
  LogLine line = std::move(ahead_[pick].line);
  ahead_.erase(ahead_.begin() + static_cast<std::ptrdiff_t>(pick));
  return std::optional<LogLine>(std::move(line));
}

Result<std::optional<LogLine>> NodeLog::NextInFile(bool writer_done) {
  for (;;) {
    const size_t newline = buf_.find('\n', scanned_);
    if (newline != std::string::npos) {
      LogLine line = Take(std::string_view(buf_).substr(pos_, newline - pos_));
      pos_ = scanned_ = newline + 1;
      return std::optional<LogLine>(std::move(line));
    }
    buf_.erase(0, pos_);
    pos_ = 0;
    scanned_ = buf_.size();
    Result<size_t> got = Read();
    if (!got.ok()) return got.status();
    if (*got > 0) continue;
    if (writer_done && !buf_.empty()) {
      LogLine line = Take(buf_);
      buf_.clear();
      scanned_ = 0;
      return std::optional<LogLine>(std::move(line));
    }
    return std::optional<LogLine>();
  }
}

LogLine NodeLog::Take(std::string_view raw) {
  LogLine line = ParseLogLine(raw, last_stamp_);
  last_stamp_ = line.stamp;
  return line;
}

Result<size_t> NodeLog::Read() {
  if (fd_ < 0) {
    fd_ = open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) {
      if (errno == ENOENT) return size_t{0};
      return Status::Error("cannot read " + path_ + ": " + std::strerror(errno));
    }
    if (start_offset_ > 0 && lseek(fd_, static_cast<off_t>(start_offset_), SEEK_SET) < 0) {
      return Status::Error("cannot seek in " + path_ + ": " + std::strerror(errno));
    }
  }
  char chunk[kReadChunk];
  ssize_t n;
  do {
    n = read(fd_, chunk, sizeof chunk);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return Status::Error("cannot read " + path_ + ": " + std::strerror(errno));
  buf_.append(chunk, static_cast<size_t>(n));
  bytes_read_ += static_cast<uint64_t>(n);
  return static_cast<size_t>(n);
}

std::string NodeLogPath(const JobRecord& job, const NodeRecord& node) {
  if (!node.log_path.empty()) return node.log_path;
  if (job.run_dir.empty()) return "";
  return job.run_dir + "/" + std::to_string(node.rank) + "-" + node.host + ".log";
}

void AddNewNodeLogs(const JobRecord& job, const std::vector<NodeRecord>& nodes,
                    std::optional<int> only, NodeLogs* logs,
                    const std::map<int, uint64_t>& start_offsets) {
  for (const NodeRecord& node : nodes) {
    if (only && node.rank != *only) continue;
    if (logs->count(node.rank)) continue;
    std::string path = NodeLogPath(job, node);
    if (path.empty()) continue;
    auto start = start_offsets.find(node.rank);
    logs->emplace(node.rank,
                  std::make_unique<NodeLog>(node, std::move(path),
                                            start == start_offsets.end() ? 0 : start->second));
  }
}

uint64_t BytesRead(const NodeLogs& logs) {
  uint64_t total = 0;
  for (const auto& [rank, log] : logs) total += log->bytes_read();
  return total;
}

Status MergeAvailable(const NodeLogs& logs, bool writer_done, const EmitLogLine& emit) {
  struct Head {
    LogLine line;
    NodeLog* log;
  };
  auto later = [](const Head& a, const Head& b) {
    if (a.line.stamp != b.line.stamp) return a.line.stamp > b.line.stamp;
    return a.log->rank() > b.log->rank();
  };
  std::priority_queue<Head, std::vector<Head>, decltype(later)> heads(later);
  auto advance = [&](NodeLog* log) -> Status {
    Result<std::optional<LogLine>> next = log->Next(writer_done);
    if (!next.ok()) return next.status();
    if (*next) heads.push(Head{std::move(**next), log});
    return Status::Ok();
  };
  for (const auto& [rank, log] : logs) {
    if (Status s = advance(log.get()); !s.ok()) return s;
  }
  while (!heads.empty()) {
    Head head = heads.top();
    heads.pop();
    emit(*head.log, head.line);
    if (Status s = advance(head.log); !s.ok()) return s;
  }
  return Status::Ok();
}

std::string FormatLogLine(const NodeLog& log, const LogLine& line, bool timestamps) {
  std::string s;
  if (timestamps) s += (line.stamped ? container::FormatTimestamp(line.stamp) : "-") + " ";
  s += log.prefix();
  s += line.is_stderr ? " stderr] " : "] ";
  s += line.text;
  s += '\n';
  return s;
}

}  // namespace barge::runner
