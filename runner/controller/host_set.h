// The job's hosts as the controller holds them: each host of the plan by
// its index (a spare takes its place's index), the hosts replaced by
// spares, and why Connect could not reach a host. Owned by the Controller;
// given to the parts that read or change it.
//
// Threading: the loop's thread only.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace barge::runner::internal {

struct HostState;  // job_state.h

struct HostSet {
  HostSet();
  ~HostSet();
  HostSet(const HostSet&) = delete;
  HostSet& operator=(const HostSet&) = delete;

  // Every host of the job, in index order.
  std::vector<HostState*> All();
  // Those whose session is open.
  std::vector<HostState*> Connected();

  std::map<size_t, std::unique_ptr<HostState>> by_index;
  // Hosts a spare replaced: what a retired attempt's state pointed at stays
  // valid for the job's life.
  std::vector<std::unique_ptr<HostState>> retired;
  // Why Connect could not reach a host, by host index (for preflight's table).
  std::map<size_t, std::string> connect_errors;
};

}  // namespace barge::runner::internal
