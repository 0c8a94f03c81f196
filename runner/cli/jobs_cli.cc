#include "runner/cli/jobs_cli.h"

#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "base/shell_word.h"
#include "runner/console/exit_codes.h"
#include "runner/console/failure.h"
#include "runner/console/table.h"
#include "runner/console/time_format.h"
#include "runner/cli/usage_cli.h"
#include "runner/controller/slurm_run.h"
#include "runner/store/diagnostics_bundles.h"
#include "runner/store/job_lookup.h"
#include "runner/store/state_dir.h"
#include "runner/store/upload_store.h"

namespace barge::runner {

namespace fs = std::filesystem;
// Keys print in the order written: id, name and status first.
using Json = nlohmann::ordered_json;
using std::chrono::milliseconds;

namespace {


milliseconds Since(TimePoint from, TimePoint to) { return to - from; }

// From `barge run` to the end, or to now while the job is live.
milliseconds Duration(const JobRecord& j, TimePoint now) {
  return Since(j.created, j.ended ? *j.ended : now);
}

Json OptIso(const std::optional<TimePoint>& t) { return t ? Json(IsoUtc(*t)) : Json(nullptr); }
template <typename T>
Json OptJson(const std::optional<T>& v) {
  return v ? Json(*v) : Json(nullptr);
}

// With the hours it held (usage_cli.h) where they could be read.
Json JobJson(const JobRecord& j, TimePoint now, const Result<Usage>& usage) {
  Json job{
      {"id", j.id},
      {"name", j.name},
      {"status", ToString(j.status)},
      {"exit_code", OptJson(j.exit_code)},
      {"nodes", j.nodes},
      {"created", IsoUtc(j.created)},
      {"started", OptIso(j.started)},
      {"ended", OptIso(j.ended)},
      {"duration_s", static_cast<double>(Duration(j, now).count()) / 1000.0},
      {"restart_count", j.restart_count},
      {"controller_pid", OptJson(j.controller_pid)},
      {"run_dir", j.run_dir},
  };
  job["host_hours"] = usage.ok() ? Json(usage->host_hours) : Json(nullptr);
  job["gpu_hours"] = usage.ok() ? Json(usage->gpu_hours) : Json(nullptr);
  job["gpus_unknown"] = usage.ok() && usage->gpus_unknown;
  return job;
}

// Job text may hold bytes that are not UTF-8 (a container's output in an
// event's detail); they print as U+FFFD instead of failing.
void PrintJson(std::FILE* out, const Json& j) {
  std::string text = j.dump(2, ' ', false, Json::error_handler_t::replace);
  std::fprintf(out, "%s\n", text.c_str());
}

std::string ShortImageId(const std::string& id) {
  std::string hex = id.rfind("sha256:", 0) == 0 ? id.substr(7) : id;
  return hex.substr(0, 12);
}

// True when `run_dir` lies strictly inside STATE_DIR/runs (symlinks
// resolved), so removing it can never reach anything barge did not make.
bool InsideRuns(const std::string& state_dir, const std::string& run_dir) {
  std::error_code ec;
  fs::path runs = fs::weakly_canonical(RunsDir(state_dir), ec);
  if (ec) return false;
  fs::path dir = fs::weakly_canonical(run_dir, ec);
  if (ec) return false;
  fs::path rel = dir.lexically_relative(runs);
  return !rel.empty() && rel != "." && *rel.begin() != "..";
}

// Bytes in regular files under `path` (symlinks not followed).
uint64_t DirSize(const std::string& path) {
  std::error_code ec;
  uint64_t total = 0;
  fs::recursive_directory_iterator it(path, fs::directory_options::skip_permission_denied, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code entry_ec;
    if (!fs::is_regular_file(it->symlink_status(entry_ec))) continue;
    uint64_t size = it->file_size(entry_ec);
    if (!entry_ec) total += size;
  }
  return total;
}

// Removes the job's run directory; returns the bytes it held. A directory
// outside STATE_DIR/runs is left alone with a warning on `err`.
Result<uint64_t> RemoveRunDir(const std::string& state_dir, const JobRecord& job, std::FILE* err) {
  if (job.run_dir.empty()) return uint64_t{0};
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(job.run_dir, ec))) return uint64_t{0};
  if (!InsideRuns(state_dir, job.run_dir)) {
    std::fprintf(err, "barge: warning: job %s: leaving %s in place: it is not under %s/runs\n",
                 job.id.c_str(), job.run_dir.c_str(), state_dir.c_str());
    return uint64_t{0};
  }
  uint64_t size = DirSize(job.run_dir);
  fs::remove_all(job.run_dir, ec);
  if (ec) return Status::Error("cannot remove " + job.run_dir + ": " + ec.message());
  return size;
}

std::string ExitText(const std::optional<int>& code) { return code ? std::to_string(*code) : "-"; }

// Continuation lines of a multi-line detail, indented to `column`.
std::string IndentContinuations(const std::string& text, size_t column) {
  std::string out;
  for (char c : text) {
    out += c;
    if (c == '\n') out += std::string(column, ' ');
  }
  while (!out.empty() && (out.back() == ' ' || out.back() == '\n')) out.pop_back();
  return out;
}

Json NodesJson(const std::vector<NodeRecord>& nodes) {
  Json out = Json::array();
  for (const NodeRecord& n : nodes) {
    out.push_back({{"rank", n.rank},
                   {"role", n.role},
                   {"host", n.host},
                   {"container_name", n.container_name},
                   {"container_id", n.container_id},
                   {"image_id", n.image_id},
                   {"exit_code", OptJson(n.exit_code)},
                   {"log_path", n.log_path}});
  }
  return out;
}

Json EventsJson(const std::vector<EventRecord>& events) {
  Json out = Json::array();
  for (const EventRecord& e : events) {
    out.push_back({{"at", IsoUtc(e.at)}, {"kind", e.kind}, {"host", OptJson(e.host)}, {"detail", e.detail}});
  }
  return out;
}

// A record still `sending` of an ended job reads as interrupted
// (UploadOutcomeText).
Json UploadsJson(const std::vector<UploadRecord>& uploads, bool job_ended) {
  Json out = Json::array();
  for (const UploadRecord& u : uploads) {
    const bool cut = job_ended && u.state == UploadState::kSending;
    out.push_back({{"name", u.name},
                   {"url", u.url},
                   {"endpoint", u.endpoint},
                   {"local", u.local},
                   {"state", cut ? "interrupted" : ToString(u.state)},
                   {"size", u.size},
                   {"md5", u.md5},
                   {"etag", u.etag},
                   {"parts", u.parts},
                   {"parts_sent", u.parts_sent},
                   {"upload_id", u.upload_id.empty() ? Json(nullptr) : Json(u.upload_id)},
                   {"detail", u.detail},
                   {"outcome", UploadOutcomeText(u, job_ended)},
                   {"at", IsoUtc(u.at)}});
  }
  return out;
}

// The uploads table of `barge show`: each file (relative to the run
// directory when inside it), where it went, its size, MD5 and outcome.
void PrintUploads(std::FILE* out, const std::vector<UploadRecord>& uploads, bool job_ended,
                  const std::string& run_dir) {
  if (uploads.empty()) return;
  std::fprintf(out, "\n");
  std::vector<std::vector<std::string>> rows = {{"FILE", "SENT TO", "SIZE", "MD5", "OUTCOME"}};
  for (const UploadRecord& u : uploads) {
    std::string file = u.local;
    if (!run_dir.empty() && file.starts_with(run_dir + "/")) file = file.substr(run_dir.size() + 1);
    rows.push_back({file, u.name, u.size > 0 ? FormatBytes(u.size) : "-", u.md5.empty() ? "-" : u.md5,
                    UploadOutcomeText(u, job_ended)});
  }
  PrintTable(out, rows);
}

}  // namespace

int ListJobsCommand(const std::string& state_dir, const ListOptions& options, std::FILE* out,
                    std::FILE* err) {
  JobFilter filter;
  if (options.status) {
    Result<JobStatus> status = ParseJobStatus(*options.status);
    if (!status.ok()) return SayFailure(err, "--status: " + status.status().message());
    filter.status = *status;
  }
  if (options.limit < 0) return SayFailure(err, "--limit must be 0 (all) or more");
  filter.name = options.name;
  filter.limit = options.limit;

  std::vector<JobRecord> jobs;
  // Jobs whose controller died become lost first, so a status filter sees
  // what is true now.
  std::unique_ptr<JobStore> store;
  if (Result<std::vector<JobRecord>> all = ListJobsNow(state_dir, &store); !all.ok()) {
    return SayFailure(err, all.status().message());
  }
  if (store) {
    Result<std::vector<JobRecord>> listed = store->ListJobs(filter);
    if (!listed.ok()) return SayFailure(err, listed.status().message());
    jobs = std::move(listed).value();
    std::erase_if(jobs, [&](const JobRecord& j) { return options.hide.contains(j.id); });
  }

  const TimePoint now = WallNow();
  if (options.json) {
    Json array = Json::array();
    auto extra = options.extra_json.begin();  // newest first, as the jobs
    auto add_extra = [&] {
      Json j = Json::parse(extra->second, nullptr, /*allow_exceptions=*/false);
      if (!j.is_discarded()) array.push_back(std::move(j));
      ++extra;
    };
    for (const JobRecord& j : jobs) {
      while (extra != options.extra_json.end() && extra->first >= j.created) add_extra();
      array.push_back(JobJson(j, now, JobUsage(*store, j, now)));
    }
    while (extra != options.extra_json.end()) add_extra();
    PrintJson(out, array);
    return 0;
  }
  std::vector<std::vector<std::string>> rows = {
      {"ID", "NAME", "STATUS", "NODES", "STARTED", "DURATION", "EXIT", "HOST-H", "GPU-H"}};
  auto extra = options.extra_rows.begin();  // newest first, as the jobs
  for (const JobRecord& j : jobs) {
    for (; extra != options.extra_rows.end() && extra->first >= j.created; ++extra) rows.push_back(extra->second);
    // A slurm: job's allocation, by Slurm's id.
    std::string status = ToString(j.status);
    if (store) {
      Result<RecordedAllocation> allocation = ReadRecordedAllocation(*store, j.id);
      if (allocation.ok() && !allocation->slurm_id.empty()) status += " (slurm " + allocation->slurm_id + ")";
    }
    const Result<Usage> usage = JobUsage(*store, j, now);
    rows.push_back({j.id, j.name, status, std::to_string(j.nodes),
                    LocalTime(j.created, false), FormatDuration(Duration(j, now)),
                    ExitText(j.exit_code), usage.ok() ? FormatHours(usage->host_hours) : "-",
                    usage.ok() ? FormatHours(usage->gpu_hours, usage->gpus_unknown) : "-"});
  }
  for (; extra != options.extra_rows.end(); ++extra) rows.push_back(extra->second);
  PrintTable(out, rows);
  return 0;
}

int ShowJobCommand(const std::string& state_dir, const std::string& job_text, bool json,
                   std::FILE* out, std::FILE* err) {
  Result<FoundJob> found = FindJob(state_dir, job_text);
  if (!found.ok()) return SayFailure(err, found.status().message());
  JobStore& store = *found->store;
  Result<JobRecord> job = found->job;
  const std::string* id = &found->job.id;
  Result<std::vector<NodeRecord>> nodes = store.GetNodes(*id);
  if (!nodes.ok()) return SayFailure(err, nodes.status().message());
  Result<std::vector<EventRecord>> events = store.GetEvents(*id);
  if (!events.ok()) return SayFailure(err, events.status().message());
  const JobRecord& j = *job;
  const TimePoint now = WallNow();
  const Result<Usage> usage = JobUsage(store, j, now);
  // How the job was run (a RunRequest, runner/jobfile/overrides.h), when recorded.
  Json request;
  if (Result<std::optional<std::string>> text = store.GetRunRequest(*id); text.ok() && *text) {
    request = Json::parse(**text, nullptr, /*allow_exceptions=*/false);
    if (request.is_discarded() || !request.is_object()) request = Json();
  }
  // Where its files went in object storage (upload_store.h).
  std::vector<UploadRecord> uploads;
  if (Result<std::unique_ptr<UploadStore>> u = UploadStore::OpenIfPresent(state_dir); u.ok() && *u) {
    if (Result<std::vector<UploadRecord>> r = (*u)->ForJob(*id); r.ok()) uploads = std::move(r).value();
  }
  if (json) {
    Json job_json = JobJson(j, now, usage);
    job_json["spec"] = j.spec;
    job_json["run_request"] = request;
    PrintJson(out, Json{{"job", job_json},
                        {"nodes", NodesJson(*nodes)},
                        {"events", EventsJson(*events)},
                        {"uploads", UploadsJson(uploads, IsFinal(j.status))}});
    return 0;
  }
  auto field = [out](const char* label, const std::string& value) {
    std::fprintf(out, "%-11s %s\n", label, value.c_str());
  };
  std::fprintf(out, "job %s (%s)\n", j.id.c_str(), j.name.c_str());
  field("status:", std::string(ToString(j.status)) +
                       (j.exit_code ? ", exit code " + std::to_string(*j.exit_code) : ""));
  field("created:", LocalTime(j.created, false));
  field("started:", j.started ? LocalTime(*j.started, false) : "-");
  field("ended:", j.ended ? LocalTime(*j.ended, false) : "-");
  field("duration:", FormatDuration(Duration(j, now)) + (j.ended ? "" : " so far"));
  field("nodes:", std::to_string(j.nodes));
  field("restarts:", std::to_string(j.restart_count));
  field("user:", JobUser(j));
  if (usage.ok()) {
    field("held:", FormatHours(usage->host_hours) + " host-hours, " +
                       FormatHours(usage->gpu_hours, usage->gpus_unknown) + " GPU-hours" +
                       (usage->gpus_unknown ? " (* leaves out nodes given `gpus: all` whose count was not asked)" : "") +
                       (IsFinal(j.status) ? "" : " so far"));
  }
  field("controller:", j.controller_pid ? "pid " + std::to_string(*j.controller_pid) +
                                              (IsFinal(j.status) ? "" : " (running)")
                                        : "-");
  field("run dir:", j.run_dir.empty() ? "-" : j.run_dir);
  if (const size_t bundles = ListDiagnostics(j.run_dir.empty() ? RunDir(state_dir, j.id) : j.run_dir).size()) {
    field("diagnostics:", std::to_string(bundles) + " bundle(s) of failed attempts: barge show " + j.id +
                              " --diagnostics");
  }
  if (Result<RecordedAllocation> allocation = ReadRecordedAllocation(store, *id);
      allocation.ok() && !allocation->slurm_id.empty()) {
    std::string nodes_text;
    for (const SlurmNode& n : allocation->nodes) nodes_text += (nodes_text.empty() ? "" : ",") + n.name;
    field("slurm:", "job " + allocation->slurm_id +
                        (nodes_text.empty() ? ", never granted" : ", nodes " + nodes_text) +
                        (allocation->released ? ", released" : ""));
  }
  if (request.is_object() && request["file"].is_string()) {
    std::string line = "barge run " + ShellWord(request["file"].get<std::string>());
    if (request["overrides"].is_array()) {
      for (const Json& o : request["overrides"]) {
        if (!o.is_object() || !o["flag"].is_string() || !o["argument"].is_string()) continue;
        line += " " + o["flag"].get<std::string>() + " " + ShellWord(o["argument"].get<std::string>());
      }
    }
    field("run as:", line);
    if (request["hosts_file"].is_object() && request["hosts_file"]["path"].is_string()) {
      field("inventory:", request["hosts_file"]["path"].get<std::string>() + " (as read then; rerun uses that)");
    }
    if (request.contains("hosts_command") && request["hosts_command"].is_object() &&
        request["hosts_command"]["command"].is_string()) {
      field("inventory:", "what hosts_command `" + request["hosts_command"]["command"].get<std::string>() +
                              "` printed then (down, exec, attach and rerun use that; it is not run again)");
    }
    field("rerun:", "barge rerun " + j.id);
  }

  std::fprintf(out, "\n");
  std::vector<std::vector<std::string>> node_rows = {
      {"RANK", "ROLE", "HOST", "CONTAINER", "IMAGE ID", "EXIT", "LOG"}};
  for (const NodeRecord& n : *nodes) {
    node_rows.push_back({std::to_string(n.rank), n.role, n.host,
                         n.container_name.empty() ? "-" : n.container_name,
                         n.image_id.empty() ? "-" : ShortImageId(n.image_id), ExitText(n.exit_code),
                         n.log_path.empty() ? "-" : n.log_path});
  }
  PrintTable(out, node_rows);
  PrintUploads(out, uploads, IsFinal(j.status), j.run_dir);

  std::fprintf(out, "\n");
  std::vector<std::vector<std::string>> event_rows = {{"TIME", "EVENT", "HOST", "DETAIL"}};
  for (const EventRecord& e : *events) {
    event_rows.push_back({LocalTime(e.at, true), e.kind, e.host ? *e.host : "-", e.detail});
  }
  // A detail may span lines (a preflight failure lists every host): its
  // continuation lines start under the DETAIL column.
  size_t detail_column = 0;
  for (size_t c = 0; c < 3; ++c) {
    size_t width = 0;
    for (const auto& row : event_rows) width = std::max(width, row[c].size());
    detail_column += width + 2;
  }
  for (auto& row : event_rows) row[3] = IndentContinuations(row[3], detail_column);
  PrintTable(out, event_rows);
  return 0;
}

int ShowDiagnosticsCommand(const std::string& state_dir, const std::string& job_text, bool json,
                           std::FILE* out, std::FILE* err) {
  Result<FoundJob> found = FindJob(state_dir, job_text);
  if (!found.ok()) return SayFailure(err, found.status().message());
  const JobRecord& j = found->job;
  const std::string run_dir = j.run_dir.empty() ? RunDir(state_dir, j.id) : j.run_dir;
  const std::vector<DiagnosticsBundle> bundles = ListDiagnostics(run_dir);
  if (json) {
    Json list = Json::array();
    for (const DiagnosticsBundle& b : bundles) {
      Json files = Json::array();
      for (const DiagnosticsFile& f : b.files) {
        files.push_back({{"name", f.name}, {"path", b.dir + "/" + f.name}, {"bytes", f.bytes}});
      }
      list.push_back({{"attempt", b.attempt}, {"dir", b.dir}, {"why", b.why}, {"at", b.at}, {"files", files}});
    }
    PrintJson(out, Json{{"job", j.id}, {"bundles", list}});
    return 0;
  }
  if (bundles.empty()) {
    std::fprintf(out, "job %s (%s): no diagnostics (a bundle is kept when an attempt fails)\n", j.id.c_str(),
                 j.name.c_str());
    return 0;
  }
  std::fprintf(out, "job %s (%s): %zu diagnostics bundle(s) in %s\n", j.id.c_str(), j.name.c_str(), bundles.size(),
               DiagnosticsDir(run_dir).c_str());
  for (const DiagnosticsBundle& b : bundles) {
    std::fprintf(out, "\nattempt %d  %s\n", b.attempt, b.dir.c_str());
    if (!b.at.empty()) std::fprintf(out, "  at:  %s\n", b.at.c_str());
    if (!b.why.empty()) std::fprintf(out, "  why: %s\n", b.why.c_str());
    std::vector<std::vector<std::string>> rows = {{"FILE", "SIZE"}};
    for (const DiagnosticsFile& f : b.files) rows.push_back({f.name, FormatBytes(f.bytes)});
    const std::string table = FormatTable(rows);
    for (size_t at = 0; at < table.size();) {
      const size_t eol = std::min(table.find('\n', at), table.size());
      std::fprintf(out, "  %s\n", table.substr(at, eol - at).c_str());
      at = eol + 1;
    }
  }
  return 0;
}

int RemoveJobCommand(const std::string& state_dir, const std::string& job_text, std::FILE* out,
                     std::FILE* err) {
  Result<FoundJob> found = FindJob(state_dir, job_text);
  if (!found.ok()) return SayFailure(err, found.status().message());
  JobStore& store = *found->store;
  const JobRecord& j = found->job;
  if (!IsFinal(j.status)) {
    return SayFailure(err, "job " + j.id + " (" + j.name + ") is " + ToString(j.status) +
                         " and its controller (pid " + std::to_string(*j.controller_pid) +
                         ") is alive; stop it first (barge down " + j.id + ")");
  }
  // Files first: if they cannot go, the record stays and `rm` can be retried.
  Result<uint64_t> freed = RemoveRunDir(state_dir, j, err);
  if (!freed.ok()) return SayFailure(err, freed.status().message());
  if (Status s = store.RemoveJob(j.id); !s.ok()) return SayFailure(err, s.message());
  std::fprintf(out, "removed %s (%s, %s): %s freed\n", j.id.c_str(), j.name.c_str(),
               ToString(j.status), FormatBytes(*freed).c_str());
  return 0;
}

int PruneCommand(const std::string& state_dir, milliseconds older_than, std::FILE* out,
                 std::FILE* err, const std::set<std::string>& keep) {
  if (older_than.count() < 0) return SayFailure(err, "--older-than must not be negative");
  const TimePoint cutoff = WallNow() - older_than;
  Result<std::unique_ptr<JobStore>> opened = OpenIfPresent(state_dir);
  if (!opened.ok()) return SayFailure(err, opened.status().message());
  if (!*opened) {
    std::fprintf(out, "nothing to prune: no job ended before %s\n",
                 LocalTime(cutoff, false).c_str());
    return 0;
  }
  JobStore& store = **opened;
  Result<std::vector<JobRecord>> all = store.ListJobs();
  if (!all.ok()) return SayFailure(err, all.status().message());
  for (JobRecord& j : *all) {
    if (Status s = MarkLostIfControllerGone(store, &j); !s.ok()) return SayFailure(err, s.message());
  }
  Result<std::vector<JobRecord>> ended = store.JobsEndedBefore(cutoff);
  if (!ended.ok()) return SayFailure(err, ended.status().message());
  std::erase_if(*ended, [&](const JobRecord& j) { return keep.contains(j.id); });
  if (ended->empty()) {
    std::fprintf(out, "nothing to prune: no job ended before %s\n",
                 LocalTime(cutoff, false).c_str());
    return 0;
  }
  uint64_t total = 0;
  size_t removed = 0;
  bool failed = false;
  for (const JobRecord& j : *ended) {
    Result<uint64_t> freed = RemoveRunDir(state_dir, j, err);
    Status s = freed.ok() ? store.RemoveJob(j.id) : freed.status();
    if (!s.ok()) {
      std::fprintf(err, "barge: job %s: %s\n", j.id.c_str(), s.message().c_str());
      failed = true;
      continue;
    }
    total += *freed;
    ++removed;
    std::fprintf(out, "removed %s (%s, %s, ended %s): %s\n", j.id.c_str(), j.name.c_str(),
                 ToString(j.status), LocalTime(*j.ended, false).c_str(),
                 FormatBytes(*freed).c_str());
  }
  std::fprintf(out, "pruned %zu job(s) that ended before %s: %s freed\n", removed,
               LocalTime(cutoff, false).c_str(), FormatBytes(total).c_str());
  return failed ? kExitBargeFailure : 0;
}

}  // namespace barge::runner
