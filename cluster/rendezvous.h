// The rendezvous environment: what every container is told about the job's
// shape, under the variable names that torchrun, Ray, SkyPilot, dstack and
// SageMaker scripts already read.
#pragma once

#include "cluster/conventions.h"

#include <optional>
#include <string>
#include <vector>

#include "container/container_spec.h"

namespace barge::cluster {

struct RendezvousInput {
  std::string job_id;
  std::string job_name;
  std::string role;
  int rank = 0;
  // Internal address of every node, in rank order (rank 0 = head).
  std::vector<std::string> node_addresses;
  int port = 29500;
  // GPUs per node as a value for the env: a number, or a named placeholder
  // ("<gpus of HOST>") that `barge plan` prints when only the live host
  // knows it.
  std::string gpus_per_node;
  std::optional<int> total_gpus;  // nullopt when some node's count is unknown
  int restart_count = 0;
  std::vector<std::string> conventions;  // subset of kConventions
};

// The variables for one node, grouped by convention in kConventions order.
container::KeyValues RendezvousEnv(const RendezvousInput& in);

}  // namespace barge::cluster
