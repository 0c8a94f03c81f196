// The job's hosts as the controller holds them (host_set.h).
#include "runner/controller/host_set.h"

#include "runner/controller/job_state.h"

namespace barge::runner::internal {

HostSet::HostSet() = default;
HostSet::~HostSet() = default;

std::vector<HostState*> HostSet::All() {
  std::vector<HostState*> out;
  for (auto& [h, host] : by_index) out.push_back(host.get());
  return out;
}

std::vector<HostState*> HostSet::Connected() {
  std::vector<HostState*> out;
  for (auto& [h, host] : by_index) {
    if (host->exec) out.push_back(host.get());
  }
  return out;
}

}  // namespace barge::runner::internal
