// GPU slices: which of a host's GPUs each node gets when it asks for a
// count on a host whose inventory says how many GPUs it has.
//
// Without slicing, `container.gpus: 2` is Docker's `--gpus 2`: the host's
// first two devices, whoever else uses them. With `hosts[i].gpus: N` in the
// inventory, barge chooses the devices itself: the lowest free indices, in
// rank order, distinct between the job's nodes on that host and avoiding
// indices other jobs hold (`held`, fed from the hosts' reservations), and
// passes them as `--gpus '"device=0,1"'`. Inside the container the devices
// are numbered from 0 again, so no host index is ever put in the env.
//
// Pure logic: nothing here connects or runs anything.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"

namespace barge::cluster {

// One node's claim on a host's GPUs.
struct GpuClaim {
  int rank = 0;
  size_t host_index = 0;
  int count = 0;  // at least 1
};

// What a host offers: its GPU count (from the inventory), the indices other
// jobs hold, and the indices this job's nodes take by an explicit device
// list (`gpus: [0, 1]`), which the slices avoid too.
struct HostGpus {
  std::string address;  // for errors
  int total = 0;
  std::set<int> held;      // by other jobs
  std::set<int> listed;  // by this job's explicit device lists
};

// The devices of each claim, by rank, each list ascending. Claims are
// served in rank order, each the lowest free indices of its host. Fails,
// naming the host, its GPU count, the free indices and what its nodes ask
// for, when a host has not enough free GPUs for all its claims (nothing is
// allocated then); or when a claim names a host missing from `hosts`.
[[nodiscard]] Result<std::map<int, std::vector<int>>> AllocateGpuSlices(
    const std::vector<GpuClaim>& claims, const std::map<size_t, HostGpus>& hosts);

// Docker's --gpus value for `devices` (non-empty): "\"device=0,1\"" (the
// double quotes belong to the value: Docker parses --gpus as CSV, where a
// bare comma would split the list). Same form as the job file's `gpus: [0,
// 1]`.
std::string GpuDeviceValue(const std::vector<int>& devices);

// The count of a `gpus` value that asks for one ("2"), else nullopt ("all",
// a device list).
std::optional<int> GpuCount(const std::string& gpus_value);

// The numeric device indices of a device-list value ("\"device=0,3\"" →
// {0, 3}); UUIDs and other forms are left out; empty for a count or "all".
std::set<int> GpuDeviceIndices(const std::string& gpus_value);

// "0-3,6" style text of a set of indices, for messages; "none" when empty.
std::string DescribeGpuIndices(const std::set<int>& indices);

}  // namespace barge::cluster
