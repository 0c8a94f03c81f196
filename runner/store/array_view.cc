// A job array as the verbs and the dashboard show it (array_view.h).
#include "runner/store/array_view.h"

#include "runner/store/job_lookup.h"

namespace barge::runner {
namespace {

// A member recorded as running while no array controller watches it (the
// controller was killed): its job ran on as a process of its own, so once
// that job has ended, the member takes the job's outcome.
Status SettleOrphanMembers(ArrayStore& store, const std::string& state_dir, const std::string& array_id) {
  Result<std::vector<MemberRecord>> members = store.GetMembers(array_id);
  if (!members.ok()) return members.status();
  std::unique_ptr<JobStore> jobs;
  for (MemberRecord& m : *members) {
    if (m.status != MemberStatus::kRunning || m.job_ids.empty()) continue;
    if (!jobs) {
      Result<std::unique_ptr<JobStore>> opened = JobStore::Open(state_dir);
      if (!opened.ok()) return opened.status();
      jobs = std::move(opened).value();
    }
    Result<JobRecord> job = jobs->GetJob(m.job_ids.back());
    if (!job.ok()) continue;  // removed meanwhile: nothing to learn
    if (Status s = MarkLostIfControllerGone(*jobs, &*job); !s.ok()) return s;
    if (!IsFinal(job->status)) continue;
    m.status = job->status == JobStatus::kSucceeded && job->exit_code.value_or(0) == 0 ? MemberStatus::kSucceeded
               : job->status == JobStatus::kCancelled                                  ? MemberStatus::kCancelled
                                                                                       : MemberStatus::kFailed;
    m.exit_code = job->exit_code;
    m.ended = job->ended.value_or(WallNow());
    if (Status s = store.UpdateMember(m); !s.ok()) return s;
  }
  return Status::Ok();
}

}  // namespace

Result<ArrayRecord> LiveArray(ArrayStore& store, const std::string& state_dir, const std::string& id) {
  Result<ArrayRecord> a = store.GetArray(id);
  if (!a.ok()) return a;
  if (a->status == "running" && !ControllerAlive(a->controller_pid, a->controller_identity)) {
    a->status = "lost";
    a->ended = WallNow();
    if (Status s = store.UpdateArray(*a); !s.ok()) return s;
  }
  if (a->status != "running") {
    if (Status s = SettleOrphanMembers(store, state_dir, id); !s.ok()) return s;
  }
  return a;
}

void ShowWaitingMembers(const std::string& state_dir, std::vector<MemberRecord>* members) {
  std::unique_ptr<JobStore> jobs;
  for (MemberRecord& m : *members) {
    if (m.status != MemberStatus::kRunning || m.job_ids.empty()) continue;
    if (!jobs) {
      Result<std::unique_ptr<JobStore>> opened = JobStore::Open(state_dir);
      if (!opened.ok()) return;
      jobs = std::move(opened).value();
    }
    Result<JobRecord> job = jobs->GetJob(m.job_ids.back());
    if (job.ok() && job->status == JobStatus::kWaiting) m.status = MemberStatus::kWaiting;
  }
}

Result<std::vector<ArrayView>> LiveArrays(ArrayStore& store, const std::string& state_dir) {
  Result<std::vector<ArrayRecord>> listed = store.ListArrays();
  if (!listed.ok()) return listed.status();
  std::vector<ArrayView> out;
  for (const ArrayRecord& l : *listed) {
    Result<ArrayRecord> a = LiveArray(store, state_dir, l.id);
    if (!a.ok()) return a.status();
    Result<std::vector<MemberRecord>> members = store.GetMembers(a->id);
    if (!members.ok()) return members.status();
    ShowWaitingMembers(state_dir, &*members);
    out.push_back({std::move(a).value(), std::move(members).value()});
  }
  return out;
}

}  // namespace barge::runner
