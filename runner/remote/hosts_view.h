// `barge hosts`: each host's holds and running barge containers, as the
// hosts themselves list them (fleet::ListHoldsScript), in one table or JSON.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "runner/remote/reservation.h"

namespace barge::runner::fleet {

// A running container labelled barge.job (a "ctr" line).
struct BargeContainer {
  std::string id;
  std::string name;
  std::string job_id;
  std::string role;
  std::string rank;
  std::string status;  // Docker's "Up 3 seconds"
};

struct HostView {
  std::string host;
  long long now = 0;  // the host's clock
  std::vector<Hold> holds;
  std::vector<BargeContainer> containers;
  std::string error;  // could not be asked: why
};

// The "ctr" lines of a ListHoldsScript reply.
std::vector<BargeContainer> ParseBargeContainers(std::string_view text);
// The reply of ListHoldsScript, as a view of `host`.
HostView ParseHostView(const std::string& host, std::string_view text);

// HOST | WHAT | JOB (id, name, user@machine) | SINCE | GPUS | STALE, one row
// per hold, lease, ticket ("queued #N", N its place in the host's queue)
// and container, "free" for a host with none.
std::string HostsTable(const std::vector<HostView>& hosts);
nlohmann::json HostsJson(const std::vector<HostView>& hosts);

}  // namespace barge::runner::fleet
