// A ContainerSpec as the body of the Engine API's POST /containers/create.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "container/container_spec.h"

namespace barge::container {

// The JSON body that makes, through POST /containers/create?name=NAME, the
// container `docker create` makes from the same spec's RunArgs (minus
// "run -d"): `docker inspect` shows the same Config and HostConfig for both,
// field by field, apart from what the engine makes up per container (its
// Hostname, from the ID). That includes the defaults the CLI sends: the
// "default" network, restart policy "no", Attach{Stdout,Stderr}, capability
// names with their CAP_ prefix (container/docker_api_bed_test.cc checks it
// against this machine's CLI and engine). What the CLI itself does not keep
// the same from one run or version to the next is compared for meaning:
// the order of Env (the CLI's map order), how capability names are spelled,
// and an empty list against null (the 20.10 CLI sends null where the
// current one sends [], and leaving it out is null).
//
// An error when the spec says something only the CLI can say: free-form
// run_options (any `docker run` flag), or a size, ulimit, device or --gpus
// value outside what barge's job file accepts. The caller then makes the
// container with the CLI line instead; the error says why.
[[nodiscard]] Result<std::string> CreateBody(const ContainerSpec& spec);

// A size as Docker's --shm-size and --memory read it (go-units RAMInBytes:
// NUMBER [" "] [k|m|g|t|p][i][b], any case, 1024-based, the fraction
// truncated): "512m" = 536870912, "1.5g" = 1610612736, "1024" = 1024.
// nullopt for anything else.
std::optional<int64_t> SizeInBytes(std::string_view text);

}  // namespace barge::container
