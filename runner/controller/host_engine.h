// A host's Docker engine through the Engine API over the host's session (no
// process on the host per call): found by preflight (its unix socket, and
// a ping through it that answered) and used by NodeStreams (the nodes' live
// logs and exit reports: node_streams_api.cc), Holds, Leases and Teardown. Where
// a host has none, every Docker call there is a CLI command line.
#pragma once

#include <memory>

#include "container/docker_api.h"
#include "runner/remote/engine_streams.h"

namespace barge::runner::internal {

struct HostEngine {
  std::unique_ptr<EngineStreams> streams;  // api's transport: the executor's socket streams
  std::unique_ptr<container::DockerApi> api;  // null: none
};

}  // namespace barge::runner::internal
