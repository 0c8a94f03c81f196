#include "runner/cli/logs_cli.h"

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
#include "runner/console/failure.h"
#include "runner/store/job_store.h"
#include "runner/cli/jobs_cli.h"
#include "runner/logs/log_files.h"
#include "runner/jobfile/units.h"

namespace barge::runner {

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

namespace {

constexpr std::chrono::milliseconds kPollInterval{200};

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
  if (options.tail && *options.tail < 0) return SayFailure(err, "--tail must be 0 or more");
  std::optional<int64_t> since;
  if (options.since) {
    Result<int64_t> stamp = SinceStamp(*options.since);
    if (!stamp.ok()) return SayFailure(err, stamp.status().message());
    since = *stamp;
  }

  // Like the other verbs: no database is an empty store, and is not created.
  std::error_code ec;
  if (!std::filesystem::exists(state_dir + "/barge.db", ec)) {
    return SayFailure(err, "no job matches '" + job_text + "'");
  }
  Result<std::unique_ptr<JobStore>> opened = JobStore::Open(state_dir);
  if (!opened.ok()) return SayFailure(err, opened.status().message());
  JobStore& store = **opened;
  Result<std::string> id = store.ResolveJob(job_text);
  if (!id.ok()) return SayFailure(err, id.status().message());
  Result<JobRecord> job = CurrentJob(store, *id);
  if (!job.ok()) return SayFailure(err, job.status().message());
  Result<std::vector<NodeRecord>> nodes = store.GetNodes(*id);
  if (!nodes.ok()) return SayFailure(err, nodes.status().message());
  if (options.node && !IsRankOf(*job, *nodes, *options.node)) {
    return SayFailure(err, UnknownRank(*job, *nodes, *options.node));
  }

  NodeLogs logs;
  AddNewNodeLogs(*job, *nodes, options.node, &logs);

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
    return SayFailure(err, std::string("cannot write the output: ") + std::strerror(write_errno));
  };
  auto wanted = [&](const LogLine& line) { return !since || line.stamp >= *since; };

  // What is there now: without -f, a final job's unfinished last line too.
  std::deque<std::string> tail;
  const EmitLogLine first_pass = [&](const NodeLog& log, const LogLine& line) {
    if (!wanted(line)) return;
    std::string text = FormatLogLine(log, line, options.timestamps);
    if (!options.tail) return print(text);
    if (*options.tail == 0) return;
    tail.push_back(std::move(text));
    if (tail.size() > static_cast<size_t>(*options.tail)) tail.pop_front();
  };
  if (Status s = MergeAvailable(logs, !options.follow && IsFinal(job->status), first_pass);
      !s.ok()) {
    return SayFailure(err, s.message());
  }
  for (const std::string& text : tail) print(text);
  if (std::optional<int> code = flush()) return *code;
  if (!options.follow) return 0;

  const EmitLogLine follow_pass = [&](const NodeLog& log, const LogLine& line) {
    if (wanted(line)) print(FormatLogLine(log, line, options.timestamps));
  };
  for (;;) {
    std::this_thread::sleep_for(kPollInterval);
    // The job before the files: once it is final, its controller wrote its
    // last line before this read of the files begins.
    job = CurrentJob(store, *id);
    if (!job.ok()) return SayFailure(err, job.status().message());
    nodes = store.GetNodes(*id);
    if (!nodes.ok()) return SayFailure(err, nodes.status().message());
    AddNewNodeLogs(*job, *nodes, options.node, &logs);
    const uint64_t before = BytesRead(logs);
    if (Status s = MergeAvailable(logs, false, follow_pass); !s.ok()) return SayFailure(err, s.message());
    const bool grew = BytesRead(logs) != before;
    if (IsFinal(job->status) && !grew) {
      // Nobody writes any more: an unfinished last line is all there is.
      if (Status s = MergeAvailable(logs, true, follow_pass); !s.ok()) {
        return SayFailure(err, s.message());
      }
      return flush().value_or(0);
    }
    if (std::optional<int> code = flush()) return *code;
  }
}

}  // namespace barge::runner
