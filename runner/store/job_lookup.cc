#include "runner/store/job_lookup.h"

#include <signal.h>

#include <cerrno>
#include <filesystem>
#include <fstream>

namespace barge::runner {

namespace fs = std::filesystem;

// The store under `state_dir`, or nullptr when no database exists yet.
Result<std::unique_ptr<JobStore>> OpenIfPresent(const std::string& state_dir) {
  std::error_code ec;
  if (!fs::exists(state_dir + "/barge.db", ec)) return std::unique_ptr<JobStore>();
  return JobStore::Open(state_dir);
}

bool ControllerAlive(std::optional<int> pid) {
  if (!pid || *pid <= 0) return false;
  // A dead process may linger as a zombie until its parent (or a lazy
  // init) reaps it, and kill(pid, 0) still succeeds then: read its state.
  std::ifstream proc_stat("/proc/" + std::to_string(*pid) + "/stat");
  std::string line;
  if (proc_stat && std::getline(proc_stat, line)) {
    size_t paren = line.rfind(')');
    if (paren == std::string::npos || paren + 2 >= line.size()) return false;
    char state = line[paren + 2];
    return state != 'Z' && state != 'X';
  }
  return kill(*pid, 0) == 0 || errno == EPERM;
}

Result<FoundJob> FindJob(const std::string& state_dir, const std::string& job_text) {
  Result<std::unique_ptr<JobStore>> opened = OpenIfPresent(state_dir);
  if (!opened.ok()) return opened.status();
  if (!*opened) return Status::Error("no job matches '" + job_text + "'");
  Result<std::string> id = (*opened)->ResolveJob(job_text);
  if (!id.ok()) return id.status();
  Result<JobRecord> job = (*opened)->GetJob(*id);
  if (!job.ok()) return job.status();
  if (Status s = MarkLostIfControllerGone(**opened, &*job); !s.ok()) return s;
  FoundJob found;
  found.store = std::move(opened).value();
  found.job = std::move(job).value();
  return found;
}

Status MarkLostIfControllerGone(JobStore& store, JobRecord* job) {
  if (IsFinal(job->status) || ControllerAlive(job->controller_pid)) return Status::Ok();
  std::string detail = job->controller_pid ? "its controller (pid " +
                                                 std::to_string(*job->controller_pid) + ") is gone"
                                           : "no controller was recorded";
  Result<bool> changed = store.MarkLost(job->id, detail);
  if (!changed.ok()) return changed.status();
  // Changed or not, the record now says what happened.
  Result<JobRecord> now = store.GetJob(job->id);
  if (!now.ok()) return now.status();
  *job = std::move(now).value();
  return Status::Ok();
}

}  // namespace barge::runner
