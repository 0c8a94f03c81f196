// `barge hosts`: each host's holds and running barge containers, as the
// hosts themselves list them (ListHoldsScript), in one table or JSON.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "runner/remote/gpu_health.h"
#include "runner/remote/host_record.h"
#include "runner/remote/reservation.h"

namespace barge::runner {

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
  // Holds, leases, tickets and the failure record's entries (IsFault), as
  // the host listed them.
  std::vector<Hold> holds;
  // The rule the record is judged by (the job file's health.host_failures
  // and health.host_window).
  RecordRule rule;
  bool forgiven = false;  // `barge hosts --forgive` wrote its entry here
  std::vector<BargeContainer> containers;
  std::string error;  // could not be asked: why
  // `barge hosts --gpus`: what the driver said (nullopt: not asked), what
  // the preflight gate's rules find in it, and `nvidia-smi topo -m`.
  std::optional<gpu::GpuReport> gpus;
  std::vector<gpu::Finding> gpu_findings;
  std::string topology;
};

// `barge hosts --gpus`: the GPU health gate's sections (gpu::GpuHealthLines)
// and a "gputopo" one, with their markers, appended to ListHoldsScript.
std::string HostGpuLines(const std::string& nvidia_smi, std::chrono::seconds timeout);
// Reads those sections of `text` into `view` (judged with the host's
// inventory count `expected` and `xid_window`).
void ReadHostGpus(std::string_view text, std::optional<int> expected, std::chrono::seconds xid_window,
                  HostView* view);
// HOST | GPU | NAME | MEMORY | DRIVER | HEALTH, a row per GPU, then each
// finding's row, then each host's topology matrix.
std::string HostsGpuTable(const std::vector<HostView>& hosts);

// The "ctr" lines of a ListHoldsScript reply.
std::vector<BargeContainer> ParseBargeContainers(std::string_view text);
// The reply of ListHoldsScript, as a view of `host`.
HostView ParseHostView(const std::string& host, std::string_view text);

// HOST | WHAT | JOB (id, name, user@machine) | SINCE | GPUS | STALE, one row
// per hold, lease, ticket ("queued #N", N its place in the host's queue)
// and container, "free" for a host with none; then its failure record: one
// row per entry ("failure KIND", "forgiven") and one that says whether the
// record puts the host out ("record: OUT ..." / "record: usable ...").
// JSON: each host's "record" {"out", "counted", "allowed", "window_s",
// "gpus_out", "entries"}.
std::string HostsTable(const std::vector<HostView>& hosts);
nlohmann::json HostsJson(const std::vector<HostView>& hosts);

}  // namespace barge::runner
