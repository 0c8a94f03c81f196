// A job array member's record: its run request with RunRequest::Member.
#include "runner/array/member_record.h"

#include <memory>
#include <optional>

#include "runner/array/array_member.h"
#include "runner/store/array_store.h"
#include "runner/store/job_store.h"

namespace barge::runner::array {

Status RecordMemberRun(const std::string& state_dir, const std::string& array_id, int index,
                       const std::vector<size_t>& hosts, const std::string& job_id) {
  Result<std::unique_ptr<JobStore>> store = JobStore::Open(state_dir);
  if (!store.ok()) return store.status();
  Result<std::optional<std::string>> json = (*store)->GetRunRequest(array_id);
  if (!json.ok()) return json.status();
  if (!*json) return Status::Error("array " + array_id + " has no recorded run request");
  Result<RunRequest> request = RunRequestFromJson(**json);
  if (!request.ok()) return request.status();
  request->member = RunRequest::Member{array_id, index, hosts};
  return (*store)->SetRunRequest(job_id, RunRequestToJson(*request));
}

Result<JobSpec> MemberSpecFromRecord(const JobSpec& base, const ArrayParams& params,
                                     const RunRequest::Member& member) {
  const std::string which = "member " + std::to_string(member.index) + " of array " + member.array_id;
  if (member.index < 0 || static_cast<size_t>(member.index) >= params.rows.size()) {
    return Status::Error(which + ": the array's recorded rows have no row " + std::to_string(member.index));
  }
  const size_t row = static_cast<size_t>(member.index);
  Result<std::optional<size_t>> group = MemberGroup(base, params, row);
  if (!group.ok()) return Status::Error(which + ": " + group.status().message());
  const std::vector<cluster::Host>& pool = *group ? base.host_groups[**group].hosts : base.hosts;
  const std::string pool_name = *group ? "host group " + base.host_groups[**group].name : "the job's hosts";
  std::vector<cluster::Host> hosts;
  for (size_t h : member.hosts) {
    if (pool.empty()) continue;  // the local engine (a job without hosts)
    if (h >= pool.size()) {
      return Status::Error(which + ": its recorded host " + std::to_string(h) + " is not one of the " +
                           std::to_string(pool.size()) + " of " + pool_name);
    }
    hosts.push_back(pool[h]);
  }
  return MemberSpec(base, params, row, member.array_id, std::move(hosts));
}

Result<JobSpec> RecordedMemberSpec(const std::string& state_dir, const JobSpec& base,
                                   const RunRequest::Member& member) {
  Result<std::unique_ptr<ArrayStore>> store = ArrayStore::Open(state_dir);
  if (!store.ok()) return store.status();
  Result<ArrayRecord> array = (*store)->GetArray(member.array_id);
  if (!array.ok()) return array.status();
  Result<ArrayParams> params = ParamsFromJson(array->params_json);
  if (!params.ok()) return params.status();
  return MemberSpecFromRecord(base, *params, member);
}

}  // namespace barge::runner::array
