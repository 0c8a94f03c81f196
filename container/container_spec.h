// What one container should look like, in Docker's own vocabulary.
//
// ContainerOptions is the `container:` block of a job file as the user wrote
// it. Every field is optional so that blocks can be layered: job-wide, then
// per role, then per host (see Merge). ContainerSpec is the fully resolved
// container of one node.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace barge::container {

using KeyValues = std::vector<std::pair<std::string, std::string>>;

struct ContainerOptions {
  std::optional<std::string> shm_size;  // "1g", passed through as written
  std::optional<std::vector<std::string>> cap_add;
  // Docker's --gpus value as it goes on the command line: "all", "2",
  // or "\"device=0,1\"" (the double quotes are part of the value).
  std::optional<std::string> gpus;
  std::optional<std::string> ipc;
  std::optional<std::string> network;
  std::optional<std::string> memory;  // --memory, e.g. "512m"
  // --cpus: how many CPUs' worth of time the container may use, a decimal
  // as Docker takes it ("2", "1.5").
  std::optional<std::string> cpus;
  // name -> "soft[:hard]" as docker's --ulimit takes it, e.g. {"stack", "67108864"}.
  std::optional<KeyValues> ulimits;
  std::optional<std::vector<std::string>> devices;
  std::optional<std::vector<std::string>> volumes;
  std::optional<KeyValues> env;
  // Free-form extra `docker run` arguments, placed before the image.
  std::optional<std::vector<std::string>> run_options;
};

// Layers `over` on top of `base`: scalars and lists in `over` replace those
// in `base`; the maps (env, ulimits) merge key by key, `over` winning.
ContainerOptions Merge(const ContainerOptions& base, const ContainerOptions& over);

struct ContainerSpec {
  std::string name;   // docker --name; unique per job and rank
  std::string image;  // reference as written in the job file
  KeyValues labels;   // barge.job, barge.role, barge.rank, ...
  // Full environment: rendezvous variables first, then the user's env.
  KeyValues env;
  ContainerOptions options;
  // Empty optional = the image's own CMD. The image's ENTRYPOINT is kept.
  std::optional<std::vector<std::string>> command;
};

}  // namespace barge::container
