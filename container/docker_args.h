// Argument vectors for the Docker CLI.
//
// Every function returns the arguments that follow the docker command itself:
// the caller prepends its host's docker command (runner's SplitDockerCommand of
// "docker" or "sudo -n docker"), then quotes each word once when the line
// crosses SSH. Values are passed through exactly as the job file wrote them,
// in Docker's own flag names, so `barge plan` shows a user their own
// `docker run` line. Nothing here runs anything or knows about SSH.
//
// Preconditions shared by all functions: container names and image references
// are non-empty and do not start with '-' (the job file's validation
// guarantees it; docker would read such a word as a flag).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "container/container_spec.h"

namespace barge::container {

using Argv = std::vector<std::string>;

// `docker run -d` for one node, in this fixed order:
//   run -d --name NAME
//   --label K=V        per spec.labels, in order
//   -e K=V             per spec.env, in order
//   --shm-size X  --cap-add C (each, in order)  --gpus G  --ipc I
//   --network N  --memory M  --ulimit NAME=VALUE (each, in order)
//   --device D (each)  -v V (each)
//   <run_options, verbatim>
//   IMAGE [command...]
// Options that are unset are left out. The environment comes from spec.env
// alone, which is the node's full environment; spec.options.env is the
// user's layer that the planner has already folded into spec.env, and is not
// read here. An unset or empty spec.command puts nothing after the image, so
// the image's CMD runs (its ENTRYPOINT is always kept).
Argv RunArgs(const ContainerSpec& spec);

// `run --rm --label K=V... --gpus G --entrypoint nvidia-smi IMAGE -L`: the
// preflight GPU probe for a node asking for GPUs. On a host without the
// NVIDIA runtime Docker fails with its own reason ("could not select device
// driver ..."); where it works, the toolkit mounts nvidia-smi into the
// container and it prints one "GPU N: ..." line per visible GPU.
Argv GpuProbeArgs(const ContainerSpec& spec);

// `logs [-f] --timestamps [--since SINCE] NAME`: the container's stdout on
// stdout and its stderr on stderr, each line prefixed by Docker's timestamp
// (log_line.h). `since` is anything docker accepts, e.g. FormatTimestamp(ns);
// docker includes lines stamped exactly at `since`.
Argv LogsArgs(std::string_view name, bool follow, const std::optional<std::string>& since);

// `wait NAME`: blocks until the container stops, then prints its exit code
// (ParseWaitOutput).
Argv WaitArgs(std::string_view name);

// `stop -t GRACE NAME...`: SIGTERM (or the image's STOPSIGNAL) to each
// container, then SIGKILL after `grace_seconds`; docker stops them in
// parallel. Precondition: `names` is non-empty.
Argv StopArgs(const std::vector<std::string>& names, int grace_seconds);

// `kill -s SIGNAL NAME...`; `signal` as docker takes it ("TERM", "SIGKILL",
// "9"). Precondition: `names` is non-empty.
Argv KillArgs(const std::vector<std::string>& names, std::string_view signal);

// `rm [-f] NAME...`. Precondition: `names` is non-empty.
Argv RemoveArgs(const std::vector<std::string>& names, bool force);

// `inspect --type container NAME...`: a JSON array (ParseContainerInspect).
// Precondition: `names` is non-empty. Docker exits 1 when any name is
// unknown but still prints the containers it found (`[]` when none).
Argv InspectArgs(const std::vector<std::string>& names);

// `image inspect --format {{.Id}} IMAGE`: the local image's ID
// ("sha256:..."), or exit 1 when the image is not present (ParseImageId).
Argv ImageInspectArgs(std::string_view image);
// The image's ID and, after a space, the directory of its top layer in the
// engine's storage ("<no value>" where the storage driver has none): one
// call tells that the image is there and where the engine keeps its data.
Argv ImageStorageInspectArgs(std::string_view image);

// `version --format {{json .}}` (ParseVersion).
Argv VersionArgs();

// `ps -a --no-trunc --filter label=FILTER --format {{json .}}`: one JSON
// object per line for every container, running or not, whose labels match
// `label_filter` ("barge.job" or "barge.job=ID"); ParsePsLines. --no-trunc
// gives full container IDs, as docker inspect reports them.
Argv PsByLabelArgs(std::string_view label_filter);

// `save IMAGE`: the image as a tar stream on stdout, for LoadArgs on
// another host (image_pull: push).
Argv SaveArgs(std::string_view image);

// `load`: reads an image tar stream (SaveArgs) from stdin.
Argv LoadArgs();

// `pull IMAGE`.
Argv PullArgs(std::string_view image);


}  // namespace barge::container
