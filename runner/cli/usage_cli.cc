// `barge usage` (usage_cli.h).
#include "runner/cli/usage_cli.h"

#include <pwd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "runner/cli/logs_cli.h"
#include "runner/console/failure.h"
#include "runner/console/table.h"
#include "runner/console/time_format.h"
#include "runner/store/job_lookup.h"

namespace barge::runner {

using Json = nlohmann::ordered_json;

namespace {

// One row of the table: a user, a job or a host.
struct UsageRow {
  std::string key;
  const JobRecord* job = nullptr;  // --by job
  std::set<std::string> jobs;
  std::vector<NodeHold> holds;  // of its jobs, that reach into the window
  Usage usage;
};

// A job and its holds.
using JobHolds = std::pair<const JobRecord*, std::vector<NodeHold>>;

// The rows of `held` by `by`, in the order they print (--by job: as the
// jobs are, newest first; else by key), each with its usage in [from, now].
std::vector<UsageRow> Rows(const std::string& by, const std::vector<JobHolds>& held, TimePoint from, TimePoint now) {
  std::map<std::string, UsageRow> rows;
  std::vector<std::string> order;
  for (const auto& [job, holds] : held) {
    for (const NodeHold& h : holds) {
      if (h.ended <= from) continue;
      const std::string key = by == "host" ? h.host : by == "job" ? job->id : JobUser(*job);
      auto [it, added] = rows.try_emplace(key);
      if (added) order.push_back(key);
      it->second.key = key;
      it->second.job = job;
      it->second.jobs.insert(job->id);
      it->second.holds.push_back(h);
    }
  }
  if (by != "job") {
    order.clear();
    for (const auto& [key, r] : rows) order.push_back(key);
  }
  std::vector<UsageRow> out;
  for (const std::string& key : order) {
    UsageRow r = std::move(rows.at(key));
    r.usage = TotalUsage(r.holds, from, now);
    out.push_back(std::move(r));
  }
  return out;
}

Json UsageJson(const Usage& u) {
  return Json{{"host_hours", u.host_hours}, {"gpu_hours", u.gpu_hours}, {"gpus_unknown", u.gpus_unknown}};
}

Json RowJson(const std::string& by, const UsageRow& r) {
  Json row;
  if (by == "job") {
    row["job"] = r.job->id;
    row["name"] = r.job->name;
    row["user"] = JobUser(*r.job);
    row["status"] = ToString(r.job->status);
  } else {
    row[by] = r.key;
    row["jobs"] = r.jobs.size();
  }
  const Json usage = UsageJson(r.usage);
  for (const auto& [k, v] : usage.items()) row[k] = v;
  return row;
}

std::vector<std::string> RowCells(const std::string& by, const UsageRow& r) {
  std::vector<std::string> cells;
  if (by == "job") {
    cells = {r.job->id, r.job->name, JobUser(*r.job), ToString(r.job->status)};
  } else {
    cells = {r.key, std::to_string(r.jobs.size())};
  }
  cells.push_back(FormatHours(r.usage.host_hours));
  cells.push_back(FormatHours(r.usage.gpu_hours, r.usage.gpus_unknown));
  return cells;
}

void PrintUsage(std::FILE* out, const std::string& by, const std::vector<UsageRow>& rows, const Usage& total) {
  std::vector<std::vector<std::string>> table;
  if (by == "job") {
    table.push_back({"JOB", "NAME", "USER", "STATUS", "HOST-HOURS", "GPU-HOURS"});
  } else {
    table.push_back({by == "user" ? "USER" : "HOST", "JOBS", "HOST-HOURS", "GPU-HOURS"});
  }
  for (const UsageRow& r : rows) table.push_back(RowCells(by, r));
  std::vector<std::string> last(table.front().size(), "");
  last.front() = "TOTAL";
  last[last.size() - 2] = FormatHours(total.host_hours);
  last.back() = FormatHours(total.gpu_hours, total.gpus_unknown);
  table.push_back(std::move(last));
  PrintTable(out, table);
  if (total.gpus_unknown) {
    std::fprintf(out, "* leaves out nodes given `gpus: all` where barge did not ask the driver how many "
                      "(health: {gpus: off})\n");
  }
}

}  // namespace

std::string JobUser(const JobRecord& job) {
  if (!job.controller_identity || job.controller_identity->uid < 0) return "-";
  const uid_t uid = static_cast<uid_t>(job.controller_identity->uid);
  if (const passwd* pw = getpwuid(uid)) return pw->pw_name;
  return "uid " + std::to_string(uid);
}

Result<Usage> JobUsage(JobStore& store, const JobRecord& job, TimePoint now) {
  Result<std::vector<PhaseRecord>> phases = store.GetPhases(job.id);
  if (!phases.ok()) return phases.status();
  return TotalUsage(NodeHolds(job, *phases, now), TimePoint{}, now);
}

int UsageCommand(const std::string& state_dir, const UsageOptions& options, std::FILE* out, std::FILE* err) {
  const std::string& by = options.by;
  if (by != "user" && by != "job" && by != "host") {
    return SayFailure(err, "--by: '" + by + "' is not one of user, job, host");
  }
  const TimePoint now = WallNow();
  TimePoint from{};
  if (options.since) {
    Result<int64_t> stamp = SinceStamp(*options.since);
    if (!stamp.ok()) return SayFailure(err, stamp.status().message());
    from = std::max(TimePoint{}, TimePoint(std::chrono::milliseconds(*stamp / 1'000'000)));
  }
  std::unique_ptr<JobStore> store;
  Result<std::vector<JobRecord>> jobs = ListJobsNow(state_dir, &store);
  if (!jobs.ok()) return SayFailure(err, jobs.status().message());
  std::vector<JobHolds> held;
  std::vector<NodeHold> all;
  for (const JobRecord& job : *jobs) {
    Result<std::vector<PhaseRecord>> phases = store->GetPhases(job.id);
    if (!phases.ok()) return SayFailure(err, phases.status().message());
    held.emplace_back(&job, NodeHolds(job, *phases, now));
    all.insert(all.end(), held.back().second.begin(), held.back().second.end());
  }
  const std::vector<UsageRow> listed = Rows(by, held, from, now);
  const Usage total = TotalUsage(all, from, now);
  if (options.json) {
    Json j{{"since", options.since ? Json(IsoUtc(from)) : Json(nullptr)}, {"until", IsoUtc(now)}, {"by", by}};
    j["rows"] = Json::array();
    for (const UsageRow& r : listed) j["rows"].push_back(RowJson(by, r));
    j["total"] = UsageJson(total);
    std::fprintf(out, "%s\n", j.dump(2).c_str());
    return 0;
  }
  PrintUsage(out, by, listed, total);
  return 0;
}

}  // namespace barge::runner
