// The job-array verbs.
#include "runner/cli/array_cli.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>

#include "runner/console/detach.h"
#include "runner/console/exit_codes.h"
#include "runner/console/failure.h"
#include "runner/controller/entry_points.h"
#include "runner/array/array_member.h"
#include "runner/array/array_runner.h"
#include "runner/store/array_store.h"
#include "runner/store/array_view.h"
#include "runner/store/job_lookup.h"
#include "runner/array/array_summary.h"
#include "runner/store/job_store.h"
#include "runner/store/state_dir.h"

namespace barge::runner {
namespace {


using Json = nlohmann::ordered_json;

Json OptTime(const std::optional<TimePoint>& t) { return t ? Json(IsoUtc(*t)) : Json(nullptr); }
Json OptInt(const std::optional<int>& v) { return v ? Json(*v) : Json(nullptr); }

// The array as one JSON object (`ls --json`, `show ARRAY --json`).
Json ArrayJson(const ArrayRecord& a, const std::vector<MemberRecord>& members, TimePoint now) {
  Result<array::ArrayParams> params = array::ParamsFromJson(a.params_json);
  Json counts = Json::object();
  for (MemberStatus st : {MemberStatus::kRunning, MemberStatus::kSucceeded, MemberStatus::kFailed,
                          MemberStatus::kWaiting, MemberStatus::kCancelled}) {
    int n = 0;
    for (const MemberRecord& m : members) n += m.status == st ? 1 : 0;
    counts[ToString(st)] = n;
  }
  Json list = Json::array();
  for (const MemberRecord& m : members) {
    list.push_back({{"index", m.index},
                    {"params", m.params},
                    {"status", ToString(m.status)},
                    {"attempts", m.attempts},
                    {"exit_code", OptInt(m.exit_code)},
                    {"job", m.job_ids.empty() ? Json(nullptr) : Json(m.job_ids.back())},
                    {"job_ids", m.job_ids},
                    {"hosts", m.hosts},
                    {"started", OptTime(m.started)},
                    {"ended", OptTime(m.ended)}});
  }
  return Json{{"kind", "array"},
              {"id", a.id},
              {"name", a.name},
              {"status", a.status},
              {"exit_code", OptInt(a.exit_code)},
              {"size", a.size},
              {"parallel", a.parallel},
              {"retries", a.retries},
              {"source", params.ok() ? Json(params->source) : Json(nullptr)},
              {"columns", params.ok() ? Json(params->columns) : Json::array()},
              {"created", IsoUtc(a.created)},
              {"ended", OptTime(a.ended)},
              {"duration_s", static_cast<double>((a.ended.value_or(now) - a.created).count()) / 1000.0},
              {"controller_pid", OptInt(a.controller_pid)},
              {"run_dir", a.run_dir},
              {"counts", counts},
              {"members", list}};
}

// Ok when no member job of the array is still live; else why not, naming
// the member and how to stop it.
Status NoLiveMember(const std::string& state_dir, const ArrayRecord& a, const std::vector<MemberRecord>& members) {
  Result<std::unique_ptr<JobStore>> jobs = JobStore::Open(state_dir);
  if (!jobs.ok()) return jobs.status();
  for (const MemberRecord& m : members) {
    for (const std::string& id : m.job_ids) {
      Result<JobRecord> job = (*jobs)->GetJob(id);
      if (!job.ok()) continue;
      if (Status s = MarkLostIfControllerGone(**jobs, &*job); !s.ok()) return s;
      if (IsFinal(job->status)) continue;
      return Status::Error("array " + a.id + " (" + a.name + "): member " + std::to_string(m.index) + " (job " + id +
                           ") is " + ToString(job->status) + " and its controller (pid " +
                           std::to_string(job->controller_pid.value_or(0)) + ") is alive; stop it first (barge down " +
                           a.id + ")");
    }
  }
  return Status::Ok();
}

// Removes the array's member jobs (records, logs, artifacts: as `barge rm
// JOB`), its controller's run directory and its own records.
int RemoveArrayRecords(ArrayStore& store, const std::string& state_dir, const ArrayRecord& a,
                       const std::vector<MemberRecord>& members, std::FILE* out, std::FILE* err) {
  int jobs = 0;
  {
    Result<std::unique_ptr<JobStore>> opened = JobStore::Open(state_dir);
    if (!opened.ok()) return SayFailure(stderr, opened.status().message());
    for (const MemberRecord& m : members) {
      for (const std::string& id : m.job_ids) {
        if (!(*opened)->GetJob(id).ok()) continue;  // removed already
        if (RemoveJobCommand(state_dir, id, out, err) != 0) return kExitBargeFailure;
        ++jobs;
      }
    }
  }
  // The controller's own run directory (controller.log of a detached array),
  // only where barge makes it.
  std::error_code ec;
  const std::filesystem::path own = RunDir(state_dir, a.id);
  if (!a.run_dir.empty() && std::filesystem::path(a.run_dir).lexically_normal() == own.lexically_normal()) {
    std::filesystem::remove_all(own, ec);
    if (ec) return SayFailure(stderr, "cannot remove " + own.string() + ": " + ec.message());
  }
  if (Status s = store.RemoveArray(a.id); !s.ok()) return SayFailure(stderr, s.message());
  std::fprintf(out, "removed array %s (%s, %s) and its %d member job(s)\n", a.id.c_str(), a.name.c_str(),
               a.status.c_str(), jobs);
  return 0;
}

// Runs `array_id` here or, detached, in a process of its own.
int Launch(const JobSpec& spec, const array::ArrayParams& params, const std::string& array_id,
           const std::string& spec_text, bool detach, std::FILE* events) {
  array::ArrayRunOptions options;
  options.state_dir = StateDir();
  options.spec_text = spec_text;
  options.events = events;
  if (!detach) return array::RunArray(spec, params, array_id, options);
  const std::string run_dir = RunDir(options.state_dir, array_id);
  if (Status s = MakeDirs(run_dir); !s.ok()) return SayFailure(stderr, s.message());
  Result<pid_t> spawned = SpawnDetached(run_dir + "/controller.log", [&] {
    // Events on stdout go to the controller's log like everything else.
    if (options.events == stdout) options.events = nullptr;
    return array::RunArray(spec, params, array_id, options);
  });
  if (!spawned.ok()) return SayFailure(stderr, spawned.status().message());
  const pid_t pid = *spawned;
  // The array is recorded already; wait until its controller took it over.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    Result<std::unique_ptr<ArrayStore>> store = ArrayStore::Open(options.state_dir);
    if (store.ok()) {
      Result<ArrayRecord> a = (*store)->GetArray(array_id);
      if (a.ok() && a->controller_pid == pid) break;
    }
    if (waitpid(pid, nullptr, WNOHANG) == pid) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::printf("%s\n", array_id.c_str());
  return 0;
}

}  // namespace

Result<std::optional<array::ArrayParams>> ArrayParamsOf(const JobSpec& spec, const std::string& array_file) {
  Result<array::ArrayParams> params = Status::Error("unset");
  if (!array_file.empty()) {
    params = array::ReadArrayParams(array_file);
  } else if (spec.array && !spec.array->file.empty()) {
    params = array::ReadArrayParams(spec.array->file);
  } else if (spec.array) {
    params = array::ExpandMatrix(spec.array->matrix);
  } else {
    return std::optional<array::ArrayParams>();
  }
  if (!params.ok()) return params.status();
  if (Status s = array::CheckArray(spec, *params); !s.ok()) return s;
  return std::optional<array::ArrayParams>(std::move(params).value());
}

int RunArrayCommand(const JobSpec& spec, const array::ArrayParams& params, const std::string& request_json,
                    const std::string& spec_text, bool detach, std::FILE* events) {
  const std::string state_dir = StateDir();
  const std::string array_id = NewJobId();
  {
    Result<std::unique_ptr<JobStore>> jobs = JobStore::Open(state_dir);
    Status s = jobs.ok() ? (*jobs)->SetRunRequest(array_id, request_json) : jobs.status();
    if (!s.ok()) return SayFailure(stderr, s.message());
  }
  if (Status s = array::CreateArrayRecord(state_dir, spec, params, array_id); !s.ok()) return SayFailure(stderr, s.message());
  return Launch(spec, params, array_id, spec_text, detach, events);
}

int PlanArray(const JobSpec& spec, const array::ArrayParams& params,
              const std::function<int(const JobSpec&)>& print_plan, size_t shown) {
  const size_t need = array::HostsPerMember(spec);
  const size_t at_once = array::MembersAtOnce(spec, params);
  std::printf("# job array: %zu member(s) from %s (columns: ", params.rows.size(), params.source.c_str());
  for (size_t c = 0; c < params.columns.size(); ++c) std::printf("%s%s", c ? ", " : "", params.columns[c].c_str());
  std::printf("); at most %zu at once, %zu host(s) each, %d retr%s\n", at_once, need, spec.array_retries,
              spec.array_retries == 1 ? "y" : "ies");
  for (const HostGroup& g : spec.host_groups) {
    std::string hosts;
    for (const cluster::Host& h : g.hosts) hosts += (hosts.empty() ? "" : ", ") + h.address;
    std::printf("# host group %s: %s; %zu host(s) per member\n", g.name.c_str(), hosts.c_str(),
                array::HostsPerMember(spec, g.hosts));
  }
  std::map<std::optional<size_t>, size_t> seen;  // members so far, by pool
  for (size_t i = 0; i < params.rows.size() && i < shown; ++i) {
    // The hosts the pool (its row's host group, or the job's hosts) gives
    // the first wave: the k-th member of a pool takes its (k mod
    // fits)-th block of `n` hosts.
    Result<std::optional<size_t>> group = array::MemberGroup(spec, params, i);
    if (!group.ok()) return SayFailure(stderr, group.status().message());
    const std::vector<cluster::Host>& pool = *group ? spec.host_groups[**group].hosts : spec.hosts;
    const size_t n = array::HostsPerMember(spec, pool);
    const size_t fits = std::max<size_t>(pool.size() / std::max<size_t>(n, 1), 1);
    const size_t first = (seen[*group]++ % fits) * n;
    std::vector<cluster::Host> hosts;
    for (size_t h = first; h < first + n && h < pool.size(); ++h) hosts.push_back(pool[h]);
    Result<JobSpec> member = array::MemberSpec(spec, params, i, "<array id>", hosts);
    if (!member.ok()) return SayFailure(stderr, member.status().message());
    std::printf("\n# member %zu: %s; %s\n", i, array::ParamsText(params, i).c_str(),
                *group ? ("host group " + spec.host_groups[**group].name).c_str() : "the job's hosts");
    std::fflush(stdout);
    if (int code = print_plan(*member); code != 0) return code;
  }
  if (params.rows.size() > shown) {
    std::printf("\n# ... and %zu more member(s), each the same with its own row\n", params.rows.size() - shown);
  }
  return 0;
}

Result<std::optional<std::string>> FindArray(const std::string& state_dir, const std::string& text) {
  Result<std::unique_ptr<ArrayStore>> store = ArrayStore::OpenIfPresent(state_dir);
  if (!store.ok()) return store.status();
  if (!*store) return std::optional<std::string>();
  return (*store)->ResolveArray(text);
}

Status AddArraysToList(const std::string& state_dir, ListOptions* list) {
  Result<std::unique_ptr<ArrayStore>> opened = ArrayStore::OpenIfPresent(state_dir);
  if (!opened.ok()) return opened.status();
  if (!*opened) return Status::Ok();
  ArrayStore& store = **opened;
  Result<std::vector<std::string>> ids = store.MemberJobIds();
  if (!ids.ok()) return ids.status();
  list->hide.insert(ids->begin(), ids->end());
  Result<std::vector<ArrayView>> arrays = LiveArrays(store, state_dir);
  if (!arrays.ok()) return arrays.status();
  const TimePoint now = WallNow();
  for (const ArrayView& v : *arrays) {
    const ArrayRecord* a = &v.array;
    if (list->name && *list->name != a->name) continue;
    if (list->status && *list->status != a->status) continue;
    list->extra_json.emplace_back(a->created, ArrayJson(*a, v.members, now).dump(-1, ' ', false,
                                                                                 Json::error_handler_t::replace));
    list->extra_rows.push_back(
        {a->created,
         {a->id, a->name, "array " + a->status + ": " + CountsText(v.members), std::to_string(a->size) + " members",
          LocalTime(a->created, false), FormatDuration(a->ended.value_or(now) - a->created),
          a->exit_code ? std::to_string(*a->exit_code) : "-"}});
  }
  return Status::Ok();
}

int ListArrayMembers(const std::string& state_dir, const std::string& array_id, std::FILE* out) {
  Result<std::unique_ptr<ArrayStore>> store = ArrayStore::Open(state_dir);
  if (!store.ok()) return SayFailure(stderr, store.status().message());
  if (Result<ArrayRecord> a = LiveArray(**store, state_dir, array_id); !a.ok()) return SayFailure(stderr, a.status().message());
  Result<std::vector<MemberRecord>> members = (*store)->GetMembers(array_id);
  if (!members.ok()) return SayFailure(stderr, members.status().message());
  ShowWaitingMembers(state_dir, &*members);
  std::vector<std::vector<std::string>> rows = {{"INDEX", "JOB", "PARAMS", "STATUS", "ATTEMPTS", "EXIT", "HOSTS"}};
  for (const MemberRecord& m : *members) {
    rows.push_back({std::to_string(m.index), m.job_ids.empty() ? "-" : m.job_ids.back(), m.params,
                    ToString(m.status), std::to_string(m.attempts),
                    m.exit_code ? std::to_string(*m.exit_code) : "-", m.hosts.empty() ? "-" : m.hosts});
  }
  std::fputs(array::PipeTable(rows).c_str(), out);
  return 0;
}

int ShowArray(const std::string& state_dir, const std::string& array_id, std::FILE* out, bool json) {
  Result<std::unique_ptr<ArrayStore>> store = ArrayStore::Open(state_dir);
  if (!store.ok()) return SayFailure(stderr, store.status().message());
  Result<ArrayRecord> a = LiveArray(**store, state_dir, array_id);
  if (!a.ok()) return SayFailure(stderr, a.status().message());
  Result<std::vector<MemberRecord>> members = (*store)->GetMembers(array_id);
  if (!members.ok()) return SayFailure(stderr, members.status().message());
  ShowWaitingMembers(state_dir, &*members);
  if (json) {
    const std::string text = ArrayJson(*a, *members, WallNow()).dump(2, ' ', false, Json::error_handler_t::replace);
    std::fprintf(out, "%s\n", text.c_str());
    return 0;
  }
  std::fprintf(out, "array %s (%s): %s, %d member(s), at most %d at once, %d retr%s\n", a->id.c_str(),
               a->name.c_str(), a->status.c_str(), a->size, a->parallel, a->retries, a->retries == 1 ? "y" : "ies");
  std::fprintf(out, "started %s%s\n", LocalTime(a->created, false).c_str(),
               a->exit_code ? (", exit code " + std::to_string(*a->exit_code)).c_str() : "");
  std::fprintf(out, "members: %s\n\n", CountsText(*members).c_str());
  std::fputs(array::SummaryTable(*members, WallNow()).c_str(), out);
  return 0;
}

Result<std::string> MemberJobId(const std::string& state_dir, const std::string& array_id, int index) {
  Result<std::unique_ptr<ArrayStore>> store = ArrayStore::Open(state_dir);
  if (!store.ok()) return store.status();
  Result<std::vector<MemberRecord>> members = (*store)->GetMembers(array_id);
  if (!members.ok()) return members.status();
  for (const MemberRecord& m : *members) {
    if (m.index != index) continue;
    if (m.job_ids.empty()) {
      return Status::Error("member " + std::to_string(index) + " of array " + array_id + " has not started (" +
                           ToString(m.status) + ")");
    }
    return m.job_ids.back();
  }
  return Status::Error("array " + array_id + " has no member " + std::to_string(index) + " (indices 0 to " +
                       std::to_string(static_cast<int>(members->size()) - 1) + ")");
}

int DownArray(const std::string& state_dir, const std::string& array_id,
              const std::function<int(const std::string&, std::chrono::steady_clock::time_point)>& down_job) {
  const auto deadline = std::chrono::steady_clock::now() + kDownArrayLimit;
  const long limit_s = static_cast<long>(kDownArrayLimit.count());
  Result<std::unique_ptr<ArrayStore>> store = ArrayStore::Open(state_dir);
  if (!store.ok()) return SayFailure(stderr, store.status().message());
  Result<ArrayRecord> a = LiveArray(**store, state_dir, array_id);
  if (!a.ok()) return SayFailure(stderr, a.status().message());
  if (a->status == "running") {
    std::printf("stopping array %s (controller pid %d)\n", array_id.c_str(), *a->controller_pid);
    std::fflush(stdout);
    // Checked again as it is signalled: the pid may name another process by
    // now, and LiveArray below then finds the array lost.
    (void)SignalController(a->controller_pid, a->controller_identity, SIGTERM);
    while (std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      Result<ArrayRecord> now = LiveArray(**store, state_dir, array_id);
      if (now.ok() && now->status != "running") {
        Result<std::vector<MemberRecord>> members = (*store)->GetMembers(array_id);
        std::printf("array %s: %s (%s)\n", array_id.c_str(), now->status.c_str(),
                    members.ok() ? CountsText(*members).c_str() : "");
        if (now->status != "lost") return 0;
        break;  // its controller died meanwhile: down the members below
      }
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return SayFailure(stderr, "array " + array_id + " did not stop within " + std::to_string(limit_s) +
                  " s of SIGTERM: its controller (pid " + std::to_string(*a->controller_pid) +
                  ") still runs; `kill -9` it, then `barge down " + array_id + "` stops its members");
    }
  }
  // No controller: each member job that has not ended is brought down on its
  // own; members that never started are cancelled.
  Result<std::vector<MemberRecord>> members = (*store)->GetMembers(array_id);
  if (!members.ok()) return SayFailure(stderr, members.status().message());
  int code = 0;
  for (MemberRecord& m : *members) {
    if (m.status == MemberStatus::kRunning && !m.job_ids.empty()) {
      const std::string& job = m.job_ids.back();
      if (std::chrono::steady_clock::now() >= deadline) {
        std::fprintf(stderr, "barge: member %d (job %s) was not stopped: `barge down ARRAY` spends at most %ld s; "
                     "run `barge down %s` again\n", m.index, job.c_str(), limit_s, array_id.c_str());
        code = kExitBargeFailure;
        continue;  // still running: its record stays so
      }
      if (down_job(job, deadline) != 0) {
        std::fprintf(stderr, "barge: member %d (job %s) could not be stopped (see above); `barge down %s` tries again\n",
                     m.index, job.c_str(), array_id.c_str());
        code = kExitBargeFailure;
        continue;
      }
    }
    if (m.status == MemberStatus::kRunning || m.status == MemberStatus::kWaiting) {
      m.status = MemberStatus::kCancelled;
      (void)(*store)->UpdateMember(m);
    }
  }
  std::printf("array %s: %s\n", array_id.c_str(), CountsText(*members).c_str());
  return code;
}

int RerunArray(const std::string& state_dir, const std::string& array_id, bool failed_only, bool detach,
               const std::function<std::optional<RecordedArrayJob>(const std::string&)>& load) {
  Result<std::unique_ptr<ArrayStore>> store = ArrayStore::Open(state_dir);
  if (!store.ok()) return SayFailure(stderr, store.status().message());
  Result<ArrayRecord> a = LiveArray(**store, state_dir, array_id);
  if (!a.ok()) return SayFailure(stderr, a.status().message());
  if (a->status == "running") return SayFailure(stderr, "array " + array_id + " is still running (barge down it first)");
  Result<array::ArrayParams> params = array::ParamsFromJson(a->params_json);
  if (!params.ok()) return SayFailure(stderr, params.status().message());
  std::string request_json;
  {
    Result<std::unique_ptr<JobStore>> jobs = JobStore::Open(state_dir);
    if (!jobs.ok()) return SayFailure(stderr, jobs.status().message());
    Result<std::optional<std::string>> r = (*jobs)->GetRunRequest(array_id);
    if (!r.ok()) return SayFailure(stderr, r.status().message());
    if (!*r) return SayFailure(stderr, "array " + array_id + " has no recorded run request");
    request_json = **r;
  }
  std::optional<RecordedArrayJob> job = load(request_json);
  if (!job) return kExitBargeFailure;
  Result<std::vector<MemberRecord>> members = (*store)->GetMembers(array_id);
  if (!members.ok()) return SayFailure(stderr, members.status().message());
  // A member of a lost array may still run as a process of its own.
  if (Status s = NoLiveMember(state_dir, *a, *members); !s.ok()) return SayFailure(stderr, s.message());
  if (!failed_only) {
    // Every member, as a new array (as `barge rerun JOB` makes a new job):
    // the rows and the job as recorded; the old array keeps its outcome.
    store->reset();
    const std::string again = NewJobId();
    {
      Result<std::unique_ptr<JobStore>> jobs = JobStore::Open(state_dir);
      Status s = jobs.ok() ? (*jobs)->SetRunRequest(again, request_json) : jobs.status();
      if (!s.ok()) return SayFailure(stderr, s.message());
    }
    if (Status s = array::CreateArrayRecord(state_dir, job->spec, *params, again); !s.ok()) return SayFailure(stderr, s.message());
    std::fprintf(stderr, "barge: running every member (%zu) of array %s again as array %s\n", params->rows.size(),
                 array_id.c_str(), again.c_str());
    return Launch(job->spec, *params, again, job->spec_text, detach, nullptr);
  }
  int again = 0;
  for (MemberRecord& m : *members) {
    if (m.status == MemberStatus::kSucceeded) continue;
    m.status = MemberStatus::kWaiting;
    ++again;
    if (Status s = (*store)->UpdateMember(m); !s.ok()) return SayFailure(stderr, s.message());
  }
  if (again == 0) {
    std::printf("every member of array %s succeeded: nothing to run again\n", array_id.c_str());
    return 0;
  }
  std::fprintf(stderr, "barge: running %d member(s) of array %s again\n", again, array_id.c_str());
  store->reset();
  return Launch(job->spec, *params, array_id, job->spec_text, detach, nullptr);
}

int RemoveArrayCommand(const std::string& state_dir, const std::string& array_id, std::FILE* out, std::FILE* err) {
  Result<std::unique_ptr<ArrayStore>> store = ArrayStore::Open(state_dir);
  if (!store.ok()) return SayFailure(stderr, store.status().message());
  Result<ArrayRecord> a = LiveArray(**store, state_dir, array_id);
  if (!a.ok()) return SayFailure(stderr, a.status().message());
  if (a->status == "running") {
    return SayFailure(stderr, "array " + a->id + " (" + a->name + ") is running and its controller (pid " +
                std::to_string(a->controller_pid.value_or(0)) + ") is alive; stop it first (barge down " + a->id + ")");
  }
  Result<std::vector<MemberRecord>> members = (*store)->GetMembers(array_id);
  if (!members.ok()) return SayFailure(stderr, members.status().message());
  if (Status s = NoLiveMember(state_dir, *a, *members); !s.ok()) return SayFailure(stderr, s.message());
  return RemoveArrayRecords(**store, state_dir, *a, *members, out, err);
}

int PruneArrays(const std::string& state_dir, std::chrono::milliseconds older_than, std::FILE* out, std::FILE* err,
                std::set<std::string>* kept_jobs) {
  Result<std::unique_ptr<ArrayStore>> opened = ArrayStore::OpenIfPresent(state_dir);
  if (!opened.ok()) return SayFailure(stderr, opened.status().message());
  if (!*opened || older_than.count() < 0) return 0;
  ArrayStore& store = **opened;
  Result<std::vector<ArrayRecord>> arrays = store.ListArrays();
  if (!arrays.ok()) return SayFailure(stderr, arrays.status().message());
  const TimePoint cutoff = WallNow() - older_than;
  int code = 0;
  for (const ArrayRecord& listed : *arrays) {
    Result<ArrayRecord> a = LiveArray(store, state_dir, listed.id);
    if (!a.ok()) return SayFailure(stderr, a.status().message());
    Result<std::vector<MemberRecord>> members = store.GetMembers(a->id);
    if (!members.ok()) return SayFailure(stderr, members.status().message());
    // The rule of jobs: ended (a final status) before the cutoff; and no
    // member job still live.
    const bool old = a->status != "running" && a->ended && *a->ended < cutoff;
    if (old && NoLiveMember(state_dir, *a, *members).ok()) {
      if (RemoveArrayRecords(store, state_dir, *a, *members, out, err) != 0) code = kExitBargeFailure;
      continue;
    }
    for (const MemberRecord& m : *members) kept_jobs->insert(m.job_ids.begin(), m.job_ids.end());
  }
  return code;
}

}  // namespace barge::runner
