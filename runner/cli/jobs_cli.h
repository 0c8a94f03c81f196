// The job-history verbs: `barge ls`, `barge show JOB`, `barge rm JOB` and
// `barge prune --older-than D`, over the job store (job_store.h). main.cc
// parses the arguments (CLI11) and calls these.
//
// Each command opens the store itself, prints its result to `out` and any
// error to `err` as "barge: MESSAGE", and returns barge's exit code: 0, or
// 125 on an error. A state directory without a database reads as an empty
// store: nothing is created by ls, show, rm or prune.
//
// A job whose status is not final but whose controller process is gone is
// marked `lost` when one of these commands meets it.
//
// Times: tables print local time ("2024-05-01 12:34:56"); JSON prints
// ISO-8601 UTC with milliseconds ("2024-05-01T12:34:56.789Z").
#pragma once

#include <chrono>
#include <cstdio>
#include <optional>
#include <set>
#include <utility>
#include <vector>
#include <string>

#include "base/status.h"
#include "runner/console/time_format.h"
#include "runner/store/job_lookup.h"
#include "runner/store/job_store.h"

namespace barge::runner {

struct ListOptions {
  std::optional<std::string> status;  // as typed; checked against JobStatus
  std::optional<std::string> name;    // exact
  int limit = 0;                      // 0 = all
  bool json = false;
  // Job arrays (runner/array/): their members' jobs are not listed one by
  // one; each array is one extra row (ID NAME STATUS ... as the job rows),
  // placed by its time among the jobs. In --json, each array is one extra
  // object (`extra_json`, JSON object text), placed the same way; the job
  // objects keep their fields.
  std::set<std::string> hide;
  std::vector<std::pair<TimePoint, std::vector<std::string>>> extra_rows;
  std::vector<std::pair<TimePoint, std::string>> extra_json;
};

// `barge ls`: one line per job, newest first:
//   ID  NAME  STATUS  NODES  STARTED  DURATION  EXIT  HOST-H  GPU-H
// STARTED is when `barge run` began (the record's `created`); DURATION runs
// from then to the end, or to now while the job is live; EXIT is "-" until
// the job has one; HOST-H and GPU-H are the hours it held its hosts and
// GPUs (usage_cli.h; "*": GPUs of an unknown count left out). With `json`,
// one JSON array of objects: id, name, status, exit_code (int|null), nodes,
// created, started (the first container started; null if none did), ended
// (null while live), duration_s, restart_count, controller_pid, run_dir,
// host_hours, gpu_hours (null when unreadable), gpus_unknown.
int ListJobsCommand(const std::string& state_dir, const ListOptions& options, std::FILE* out,
                    std::FILE* err = stderr);

// `barge show JOB`: the job's header (with the user it ran as and the
// hours it held, as ls), its nodes (rank, role, host,
// container, image id, exit, log path), where its files went in object
// storage when it sent any (runner/store/upload_store.h: file, s3://
// name, size, MD5, outcome) and its events with timestamps.
// With a recorded run request, also how the job was run ("run as: barge run
// FILE --set ...") and how to run it again. With `json`: {"job": {...as in
// ls, plus spec and run_request (null when none)}, "nodes": [...],
// "events": [...], "uploads": [{name, url, endpoint, local, state, size,
// md5, etag, parts, parts_sent, upload_id (null when none), detail,
// outcome, at}]}.
int ShowJobCommand(const std::string& state_dir, const std::string& job_text, bool json,
                   std::FILE* out, std::FILE* err = stderr);

// `barge show JOB --diagnostics`: the diagnostics bundles its failed
// attempts left (runner/store/diagnostics_bundles.h), in attempt order:
// each one's directory, when, why, and its files with their sizes; a line
// saying there are none otherwise. With `json`: {"job": ID, "bundles":
// [{"attempt", "dir", "why", "at", "files": [{"name", "path", "bytes"}]}]}.
int ShowDiagnosticsCommand(const std::string& state_dir, const std::string& job_text, bool json,
                           std::FILE* out, std::FILE* err = stderr);

// `barge rm JOB`: refuses a job that is not final and whose controller
// still runs; otherwise removes its run directory (logs, artifacts) and its
// record, and prints what it freed. A run directory outside
// STATE_DIR/runs/ is left in place (with a warning), never removed.
int RemoveJobCommand(const std::string& state_dir, const std::string& job_text, std::FILE* out,
                     std::FILE* err = stderr);

// `barge prune --older-than D`: removes every job with a final status that
// ended before now - `older_than`, with its run directory; prints each job
// removed and the bytes freed. Jobs whose ids are in `keep` (members of job
// arrays that stay) are left alone.
int PruneCommand(const std::string& state_dir, std::chrono::milliseconds older_than, std::FILE* out,
                 std::FILE* err = stderr, const std::set<std::string>& keep = {});

}  // namespace barge::runner
