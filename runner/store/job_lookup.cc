#include "runner/store/job_lookup.h"

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

namespace barge::runner {

namespace fs = std::filesystem;

// The same numbers on every architecture (the unified syscall table).
#ifdef SYS_pidfd_open
constexpr long kPidfdOpen = SYS_pidfd_open;
#else
constexpr long kPidfdOpen = 434;
#endif
#ifdef SYS_pidfd_send_signal
constexpr long kPidfdSendSignal = SYS_pidfd_send_signal;
#else
constexpr long kPidfdSendSignal = 424;
#endif

// The store under `state_dir`, or nullptr when no database exists yet.
Result<std::unique_ptr<JobStore>> OpenIfPresent(const std::string& state_dir) {
  std::error_code ec;
  if (!fs::exists(state_dir + "/barge.db", ec)) return std::unique_ptr<JobStore>();
  return JobStore::Open(state_dir);
}

Result<std::vector<JobRecord>> ListJobsNow(const std::string& state_dir, std::unique_ptr<JobStore>* store) {
  Result<std::unique_ptr<JobStore>> opened = OpenIfPresent(state_dir);
  if (!opened.ok()) return opened.status();
  *store = std::move(opened).value();
  if (!*store) return std::vector<JobRecord>();
  Result<std::vector<JobRecord>> all = (*store)->ListJobs();
  if (!all.ok()) return all.status();
  for (JobRecord& j : *all) {
    if (Status s = MarkLostIfControllerGone(**store, &j); !s.ok()) return s;
  }
  return all;
}

bool ControllerAlive(std::optional<int> pid, const std::optional<ProcessIdentity>& identity) {
  if (!pid || *pid <= 0) return false;
  // Not a zombie either: a dead process lingers as one until its parent
  // (or a lazy init) reaps it.
  std::optional<ProcessIdentity> now = ReadProcessIdentity(*pid);
  if (!now) return false;
  if (identity) return *now == *identity;
  return now->uid == static_cast<int64_t>(geteuid());
}

bool SignalController(std::optional<int> pid, const std::optional<ProcessIdentity>& identity, int signal) {
  if (!pid || *pid <= 0) return false;
  const int pidfd = static_cast<int>(syscall(kPidfdOpen, *pid, 0));
  if (pidfd < 0 && errno == ESRCH) return false;
  // Without a pidfd (ENOSYS before Linux 5.3, or a seccomp filter): check,
  // then kill.
  bool sent = false;
  if (ControllerAlive(pid, identity)) {
    sent = pidfd >= 0 ? syscall(kPidfdSendSignal, pidfd, signal, nullptr, 0) == 0 : kill(*pid, signal) == 0;
  }
  if (pidfd >= 0) close(pidfd);
  return sent;
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
  if (IsFinal(job->status) || ControllerAlive(job->controller_pid, job->controller_identity)) return Status::Ok();
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
