#include "runner/logs_cli.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <queue>
#include <string_view>
#include <thread>
#include <vector>

#include "base/status.h"
#include "container/timestamp.h"
#include "runner/job_store.h"
#include "runner/jobs_cli.h"
#include "runner/units.h"

namespace barge::runner {

namespace {

// barge's exit code for its own failures (kExitBargeFailure in controller.h).
constexpr int kExitError = 125;
constexpr std::chrono::milliseconds kPollInterval{200};
// The stamp of a line read before any stamped line of its file.
constexpr int64_t kNoStamp = std::numeric_limits<int64_t>::min();
constexpr size_t kReadChunk = size_t{64} * 1024;

int Fail(std::FILE* err, const std::string& message) {
  std::fprintf(err, "barge: %s\n", message.c_str());
  return kExitError;
}

// One line of a node's log file.
struct LogLine {
  int64_t stamp = kNoStamp;  // ns since the epoch: the line's own, or inherited
  bool stamped = false;      // the line carried a readable stamp of its own
  bool is_stderr = false;
  std::string text;
};

// "<stamp> <stdout|stderr> <text>", as LogSink writes it (the stamp may be
// empty). A line of any other shape is stdout text as a whole. A line
// without a readable stamp takes `previous`.
LogLine ParseLine(std::string_view raw, int64_t previous) {
  LogLine line;
  line.stamp = previous;
  line.text = std::string(raw);
  const size_t stamp_end = raw.find(' ');
  if (stamp_end == std::string_view::npos) return line;
  const std::string_view rest = raw.substr(stamp_end + 1);
  const size_t stream_end = rest.find(' ');
  const std::string_view stream = rest.substr(0, stream_end);
  if (stream != "stdout" && stream != "stderr") return line;
  line.is_stderr = stream == "stderr";
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

// One node's log file, read forward: each line is returned once, and only
// once its newline has been written (see Next). The file may appear later
// than the node: until then it reads as empty. Owns its file descriptor.
class NodeLog {
 public:
  NodeLog(const NodeRecord& node, std::string path)
      : rank_(node.rank),
        prefix_("[" + std::to_string(node.rank) + " " + node.role + " " + node.host),
        path_(std::move(path)) {}
  ~NodeLog() {
    if (fd_ >= 0) close(fd_);
  }
  NodeLog(const NodeLog&) = delete;
  NodeLog& operator=(const NodeLog&) = delete;

  int rank() const { return rank_; }
  // "[RANK ROLE HOST", without the closing bracket.
  const std::string& prefix() const { return prefix_; }
  // Bytes read from the file so far.
  uint64_t bytes_read() const { return bytes_read_; }

  // The next complete line, or nullopt when the file holds no further
  // complete line now. With `writer_done`, a last line without a newline
  // counts as complete. Fails only when the file exists but cannot be read.
  [[nodiscard]] Result<std::optional<LogLine>> Next(bool writer_done) {
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

 private:
  LogLine Take(std::string_view raw) {
    LogLine line = ParseLine(raw, last_stamp_);
    last_stamp_ = line.stamp;
    return line;
  }

  // Appends up to one chunk of what the file holds past what was read to
  // buf_; returns how many bytes (0: nothing new, or no file yet).
  Result<size_t> Read() {
    if (fd_ < 0) {
      fd_ = open(path_.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd_ < 0) {
        if (errno == ENOENT) return size_t{0};
        return Status::Error("cannot read " + path_ + ": " + std::strerror(errno));
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

  const int rank_;
  const std::string prefix_;
  const std::string path_;
  int fd_ = -1;
  std::string buf_;  // bytes read and not yet returned start at pos_
  size_t pos_ = 0;
  size_t scanned_ = 0;  // buf_ holds no newline in [pos_, scanned_)
  uint64_t bytes_read_ = 0;
  int64_t last_stamp_ = kNoStamp;
};

// The node files being read, by rank.
using NodeLogs = std::map<int, std::unique_ptr<NodeLog>>;

// Where the node's lines are: the path recorded for it, else where LogSink
// puts them; empty when neither is known.
std::string LogPath(const JobRecord& job, const NodeRecord& node) {
  if (!node.log_path.empty()) return node.log_path;
  if (job.run_dir.empty()) return "";
  return job.run_dir + "/" + std::to_string(node.rank) + "-" + node.host + ".log";
}

// Adds a reader for every node of `nodes` (all, or rank `only`) that has
// none yet: nodes are recorded as their containers start, so a followed
// job gains them as it goes.
void AddNewNodes(const JobRecord& job, const std::vector<NodeRecord>& nodes,
                 std::optional<int> only, NodeLogs* logs) {
  for (const NodeRecord& node : nodes) {
    if (only && node.rank != *only) continue;
    if (logs->count(node.rank)) continue;
    std::string path = LogPath(job, node);
    if (path.empty()) continue;
    logs->emplace(node.rank, std::make_unique<NodeLog>(node, std::move(path)));
  }
}

uint64_t BytesRead(const NodeLogs& logs) {
  uint64_t total = 0;
  for (const auto& [rank, log] : logs) total += log->bytes_read();
  return total;
}

using Emit = std::function<void(const NodeLog&, const LogLine&)>;

// Hands every complete line now in `logs` to `emit`, merged by stamp, ties
// by rank; each node's lines in their file order.
Status MergeAvailable(const NodeLogs& logs, bool writer_done, const Emit& emit) {
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

// "[0 head h1] text", "[0 head h1 stderr] text", with `timestamps`
// preceded by the stamp ("-" for a line without one).
std::string Format(const NodeLog& log, const LogLine& line, bool timestamps) {
  std::string s;
  if (timestamps) s += (line.stamped ? container::FormatTimestamp(line.stamp) : "-") + " ";
  s += log.prefix();
  s += line.is_stderr ? " stderr] " : "] ";
  s += line.text;
  s += '\n';
  return s;
}

// --since as nanoseconds since the epoch: a time, or a duration before now.
Result<int64_t> SinceStamp(const std::string& text) {
  Result<int64_t> at = container::ParseTimestamp(text);
  if (at.ok()) return at;
  Result<std::chrono::milliseconds> ago = ParseDuration(text);
  if (!ago.ok()) {
    return Status::Error("--since: '" + text +
                         "' is neither a time (e.g. 2024-05-01T12:00:00Z) nor a duration "
                         "(e.g. 10m, 1h30m)");
  }
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  // A duration reaching before 1970 admits every stamped line.
  if (ago->count() >= now_ms) return kNoStamp + 1;
  return (now_ms - ago->count()) * 1'000'000;
}

// "job ab12cd34 (train) has no node 5; its ranks are 0, 1". The ranks are
// the recorded nodes' and those the job was planned with.
std::string UnknownRank(const JobRecord& job, const std::vector<NodeRecord>& nodes, int rank) {
  std::vector<int> ranks;
  for (const NodeRecord& n : nodes) ranks.push_back(n.rank);
  for (int r = 0; r < job.nodes; ++r) ranks.push_back(r);
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string msg = "job " + job.id + " (" + job.name + ") has no node " + std::to_string(rank);
  if (ranks.empty()) return msg + "; it has no nodes";
  msg += "; its ranks are ";
  for (size_t i = 0; i < ranks.size(); ++i) msg += (i ? ", " : "") + std::to_string(ranks[i]);
  return msg;
}

bool IsRankOf(const JobRecord& job, const std::vector<NodeRecord>& nodes, int rank) {
  if (rank >= 0 && rank < job.nodes) return true;
  return std::any_of(nodes.begin(), nodes.end(),
                     [rank](const NodeRecord& n) { return n.rank == rank; });
}

// The job as the store has it now, marked lost if its controller is gone.
Result<JobRecord> CurrentJob(JobStore& store, const std::string& id) {
  Result<JobRecord> job = store.GetJob(id);
  if (!job.ok()) return job;
  if (Status s = MarkLostIfControllerGone(store, &*job); !s.ok()) return s;
  return job;
}

}  // namespace

int LogsCommand(const std::string& state_dir, const std::string& job_text,
                const LogsOptions& options, std::FILE* out, std::FILE* err) {
  if (options.tail && *options.tail < 0) return Fail(err, "--tail must be 0 or more");
  std::optional<int64_t> since;
  if (options.since) {
    Result<int64_t> stamp = SinceStamp(*options.since);
    if (!stamp.ok()) return Fail(err, stamp.status().message());
    since = *stamp;
  }

  // Like the other verbs: no database is an empty store, and is not created.
  std::error_code ec;
  if (!std::filesystem::exists(state_dir + "/barge.db", ec)) {
    return Fail(err, "no job matches '" + job_text + "'");
  }
  Result<std::unique_ptr<JobStore>> opened = JobStore::Open(state_dir);
  if (!opened.ok()) return Fail(err, opened.status().message());
  JobStore& store = **opened;
  Result<std::string> id = store.ResolveJob(job_text);
  if (!id.ok()) return Fail(err, id.status().message());
  Result<JobRecord> job = CurrentJob(store, *id);
  if (!job.ok()) return Fail(err, job.status().message());
  Result<std::vector<NodeRecord>> nodes = store.GetNodes(*id);
  if (!nodes.ok()) return Fail(err, nodes.status().message());
  if (options.node && !IsRankOf(*job, *nodes, *options.node)) {
    return Fail(err, UnknownRank(*job, *nodes, *options.node));
  }

  NodeLogs logs;
  AddNewNodes(*job, *nodes, options.node, &logs);

  // Output errors: the first errno of a failed write. A reader that went
  // away (EPIPE: `barge logs -f | head`) ends the command quietly.
  int write_errno = 0;
  auto print = [&](const std::string& text) {
    if (write_errno != 0) return;
    errno = 0;
    if (std::fwrite(text.data(), 1, text.size(), out) != text.size()) {
      write_errno = errno ? errno : EIO;
    }
  };
  // nullopt while `out` takes the output, else the exit code to return.
  auto flush = [&]() -> std::optional<int> {
    errno = 0;
    if (std::fflush(out) != 0 && write_errno == 0) write_errno = errno ? errno : EIO;
    if (write_errno == 0) return std::nullopt;
    if (write_errno == EPIPE) return 0;
    return Fail(err, std::string("cannot write the output: ") + std::strerror(write_errno));
  };
  auto wanted = [&](const LogLine& line) { return !since || line.stamp >= *since; };

  // What is there now: without -f, a final job's unfinished last line too.
  std::deque<std::string> tail;
  const Emit first_pass = [&](const NodeLog& log, const LogLine& line) {
    if (!wanted(line)) return;
    std::string text = Format(log, line, options.timestamps);
    if (!options.tail) return print(text);
    if (*options.tail == 0) return;
    tail.push_back(std::move(text));
    if (tail.size() > static_cast<size_t>(*options.tail)) tail.pop_front();
  };
  if (Status s = MergeAvailable(logs, !options.follow && IsFinal(job->status), first_pass);
      !s.ok()) {
    return Fail(err, s.message());
  }
  for (const std::string& text : tail) print(text);
  if (std::optional<int> code = flush()) return *code;
  if (!options.follow) return 0;

  const Emit follow_pass = [&](const NodeLog& log, const LogLine& line) {
    if (wanted(line)) print(Format(log, line, options.timestamps));
  };
  for (;;) {
    std::this_thread::sleep_for(kPollInterval);
    // The job before the files: once it is final, its controller wrote its
    // last line before this read of the files begins.
    job = CurrentJob(store, *id);
    if (!job.ok()) return Fail(err, job.status().message());
    nodes = store.GetNodes(*id);
    if (!nodes.ok()) return Fail(err, nodes.status().message());
    AddNewNodes(*job, *nodes, options.node, &logs);
    const uint64_t before = BytesRead(logs);
    if (Status s = MergeAvailable(logs, false, follow_pass); !s.ok()) return Fail(err, s.message());
    const bool grew = BytesRead(logs) != before;
    if (IsFinal(job->status) && !grew) {
      // Nobody writes any more: an unfinished last line is all there is.
      if (Status s = MergeAvailable(logs, true, follow_pass); !s.ok()) {
        return Fail(err, s.message());
      }
      return flush().value_or(0);
    }
    if (std::optional<int> code = flush()) return *code;
  }
}

}  // namespace barge::runner
