// `barge logs JOB [-f] [--node RANK] [--since TIME] [--tail N] [--timestamps]`:
// a job's output from the per-node files the controller kept
// (STATE/runs/<job-id>/<rank>-<host>.log, written by LogSink, log_sink.h),
// long after its hosts are gone, or live with -f.
//
// Output: one line per container line, every node merged in the order of
// Docker's timestamps (equal stamps: lower rank first; one node's lines
// always keep their file order), all on `out`, prefixed like the live
// stream:
//   [0 head 10.0.0.1] step 10 loss 0.52          a stdout line
//   [1 worker 10.0.0.2 stderr] NCCL WARN ...     a stderr line
// A stderr line carries "stderr" as a fourth word inside the brackets, so
// the two streams stay apart in one file and `grep '^\[0 '` still finds
// both of node 0. With `timestamps`, each line starts with Docker's stamp
// in UTC with 9 fraction digits ("2024-05-01T12:00:00.123456789Z ") or
// "- " for a line that carried none.
//
// A line of the file without a readable stamp keeps the stamp of the line
// before it in the same file (so it stays where it was written); one before
// any stamped line sorts first and never passes --since.
//
// Without `follow`, a last line that has no newline yet is printed only if
// the job is final (otherwise its writer is still busy with it). A missing
// log file reads as empty; a job without any prints nothing and exits 0.
//
// Exit codes and errors as in jobs_cli.h: 0, or 125 with "barge: MESSAGE"
// on `err`. A job whose controller is gone is marked lost.
#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <cstdint>

#include "base/status.h"

namespace barge::runner {

// --since as nanoseconds since the epoch: a time (2024-05-01T12:00:00Z) or
// a duration before now (10m, 1h30m, 7d); one reaching before 1970 is the
// earliest stamp (kNoStamp + 1). An error quoting `text` otherwise.
[[nodiscard]] Result<int64_t> SinceStamp(const std::string& text);

struct LogsOptions {
  // After printing what is there, print lines as they are appended, until
  // the job's status is final and its files stopped growing.
  bool follow = false;
  // Only this node. Must be a rank of the job: an error lists its ranks.
  std::optional<int> node;
  // Only lines stamped at or after this time: an RFC 3339 time (anything
  // container::ParseTimestamp takes, e.g. 2024-05-01T12:00:00Z or
  // 2024-05-01T14:00:00.5+02:00) or a duration before now (10m, 1h30m; see
  // ParseDuration).
  std::optional<std::string> since;
  // Only the last N lines of the merged output (after --node and --since);
  // with `follow`, only of what is already there. 0 prints none of it.
  std::optional<int> tail;
  bool timestamps = false;
};

// `barge logs JOB`. `job_text` is resolved like every verb (JobStore::
// ResolveJob: id, latest of that name, or unique id prefix).
//
// With `follow`: prints what the files hold, then polls every 200 ms: it
// re-reads the job (marking it lost when its controller is gone) and its
// nodes (a node recorded later joins in), prints the complete lines
// appended since (a line written in pieces waits for its newline), and
// returns 0 once a poll finds the job final and no file grew; a last line
// still without a newline is printed then. Lines of one poll are merged by
// stamp; across polls they print in the order they arrived.
int LogsCommand(const std::string& state_dir, const std::string& job_text,
                const LogsOptions& options, std::FILE* out, std::FILE* err = stderr);

}  // namespace barge::runner
