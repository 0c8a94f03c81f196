// `barge top`'s data: one sample per node from `docker stats --no-stream`
// and `nvidia-smi --query-gpu` output, and its table and JSON forms.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace barge::runner {

// One line of `docker stats --format '{{json .}}'`.
struct ContainerStats {
  std::string name;
  double cpu_percent = 0;  // of one core: 200 = two cores busy
  uint64_t mem_used = 0;   // bytes
  uint64_t mem_limit = 0;  // bytes
  std::optional<uint64_t> net_rx;  // bytes; none on the host network
  std::optional<uint64_t> net_tx;
};

// One GPU line of GpuStatsLine()'s nvidia-smi query.
struct GpuStats {
  int index = 0;
  std::string uuid;
  std::optional<double> util_percent;  // "[N/A]" → none
  std::optional<uint64_t> mem_used_mib;
  std::optional<uint64_t> mem_total_mib;
};

// Docker's sizes: "1.5GiB", "512MiB", "12.3kB", "0B" (binary and decimal
// units as docker prints them) in bytes; nullopt for anything else.
std::optional<uint64_t> ParseDockerSize(const std::string& text);

// Every container line of `docker stats` output; a line that is not one is
// an error naming it.
[[nodiscard]] Result<std::vector<ContainerStats>> ParseDockerStats(const std::string& output);

// Every GPU line of the nvidia-smi query ("" = the host has no nvidia-smi).
[[nodiscard]] Result<std::vector<GpuStats>> ParseGpuStats(const std::string& output);

// Which of the host's GPUs a node has, from its container's --gpus value as
// barge passes it ("all", "2", "\"device=0,1\"", "device=GPU-uuid"): "all"
// and none-given-but-present → every GPU; "N" → the first N; device= → the
// GPUs with those indices or UUIDs. nullopt `gpus`: no GPU.
std::vector<GpuStats> NodeGpus(const std::optional<std::string>& gpus,
                               const std::vector<GpuStats>& host_gpus);

// One node's sample.
struct NodeSample {
  int rank = 0;
  std::string role;
  std::string host;
  std::string container;
  bool host_network = false;
  std::optional<ContainerStats> stats;  // none: not running / no answer
  std::vector<GpuStats> gpus;
  bool host_has_nvidia_smi = false;
  std::string error;  // why stats are missing
};

// The table, one line per node (and per GPU beyond the node's first):
//   RANK ROLE HOST CPU% MEM NET I/O GPU UTIL GPU MEM
// NET I/O says "- (host net)" on the host network, where Docker reports
// none; GPU columns are "-" where the host has no nvidia-smi.
std::string RenderTopTable(const std::string& job_id, const std::vector<NodeSample>& nodes);

// {"job": ID, "at": ISO time, "nodes": [{rank, role, host, container,
// cpu_percent, mem_used_bytes, mem_limit_bytes, net_rx_bytes, net_tx_bytes
// (null on the host network), network ("host" or "bridge"...), gpus: [{index,
// uuid, util_percent, mem_used_mib, mem_total_mib}], error (null)}]}.
nlohmann::json TopJson(const std::string& job_id, const std::string& at,
                       const std::vector<NodeSample>& nodes);

}  // namespace barge::runner
