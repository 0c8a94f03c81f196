// RDMA (InfiniBand, RoCE) on a host, for `network: {rdma: auto|required}`:
// the question preflight asks and what its answer says. A host has RDMA
// when it has a verbs device node (/dev/infiniband/uverbs*) and at least
// one HCA with an ACTIVE port (/sys/class/infiniband/HCA/ports/N/state
// reads "4: ACTIVE", the kernel's sysfs ABI). Its nodes' containers then get
// the device directory, an unlimited locked-memory ulimit, IPC_LOCK and
// NCCL_IB_HCA naming exactly its active HCAs (cluster::PlanInput::host_rdma).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace barge::runner::rdma {

// The POSIX sh line preflight runs (section "ib"): one "device PATH" line
// per verbs device, one "state PATH VALUE" line per HCA port. Always exits 0.
std::string RdmaCommand();

struct RdmaInfo {
  std::vector<std::string> devices;       // /dev/infiniband/uverbs0, ...
  std::vector<std::string> active_hcas;   // sorted, each once: mlx5_0, ...
  std::vector<std::string> inactive_hcas; // HCAs none of whose ports is ACTIVE
  // What is usable: a device and an active HCA.
  bool usable() const { return !devices.empty() && !active_hcas.empty(); }
  // Why not usable, in a few words ("" when usable).
  std::string why_not() const;
};

// RdmaCommand's output.
RdmaInfo ParseRdma(std::string_view output);

// NCCL_IB_HCA's value for `hcas`: NCCL's exact-match form ("=mlx5_0,mlx5_1";
// a bare name is a prefix, so mlx5_1 would also match mlx5_10).
std::string NcclIbHca(const std::vector<std::string>& hcas);

}  // namespace barge::runner::rdma
