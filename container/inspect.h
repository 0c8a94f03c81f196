// Parsing of what the Docker CLI prints: `docker inspect`, `docker version`,
// `docker ps --format {{json .}}`, `docker wait`, `docker image inspect
// --format {{.Id}}` (argv in docker_args.h).
//
// Every parser takes the command's complete stdout and returns a value or an
// error that says which command's output was malformed and where; none
// throws (nlohmann-json's exceptions stop at this boundary). Fields barge
// does not use are ignored, so newer Docker versions that add fields parse.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace barge::container {

using Labels = std::map<std::string, std::string>;

// One container as `docker inspect` reports it.
struct ContainerState {
  std::string id;    // full 64-hex ID
  std::string name;  // without the leading "/" Docker adds
  // State.Status: "created", "running", "paused", "restarting", "removing",
  // "exited" or "dead".
  std::string status;
  bool running = false;
  // State.ExitCode. Meaningful once the container has stopped; also set
  // (e.g. 127) with `error` when it could not be started at all.
  int exit_code = 0;
  bool oom_killed = false;  // State.OOMKilled: the kernel's OOM killer ended it
  std::string error;        // State.Error, e.g. why the runtime failed to start it
  // State.StartedAt / FinishedAt in ns since the epoch (timestamp.h);
  // nullopt while Docker reports its zero time ("never").
  std::optional<int64_t> started_at_ns;
  std::optional<int64_t> finished_at_ns;
  std::string image_id;  // "sha256:...", the image it was created from
  Labels labels;         // Config.Labels
};

// Parses `docker inspect --type container ...` output: a JSON array with one
// object per container found, in the order docker printed them (an empty
// array when none was found). Fails on anything that is not such an array,
// or when an object lacks Id, Name or State.{Status,Running,ExitCode}, or
// has a field of the wrong type, or an unparseable time.
[[nodiscard]] Result<std::vector<ContainerState>> ParseContainerInspect(std::string_view json);

// Parses the Engine API's answer to GET /containers/{name}/json
// (docker_api.h): one such object, not an array; the same fields and
// failures as ParseContainerInspect, messages prefixed "engine API:
// container".
[[nodiscard]] Result<ContainerState> ParseContainerObject(std::string_view json);

// The Docker client and daemon versions, from `docker version --format
// {{json .}}`.
struct ServerVersion {
  std::string client_version;      // Client.Version, e.g. "28.2.2"
  std::string client_api_version;  // Client.ApiVersion (negotiated with the daemon)
  std::string server_version;      // Server.Version, e.g. "20.10.24+dfsg1"
  std::string server_api_version;  // Server.ApiVersion, e.g. "1.41"
  std::string server_os;           // Server.Os, e.g. "linux"
  std::string server_arch;         // Server.Arch, e.g. "amd64"
};

// Parses `docker version --format {{json .}}` output. When the client could
// not reach the daemon, docker prints the client part with "Server": null
// (and exits 1): that is an error saying the daemon is unreachable; the
// caller adds the host and docker's stderr, which holds the reason.
[[nodiscard]] Result<ServerVersion> ParseVersion(std::string_view json);

// One line of `docker ps --format {{json .}}`.
struct PsEntry {
  std::string id;     // ID (full with --no-trunc, else 12 hex digits)
  std::string names;  // Names: the name, or comma-separated names
  std::string image;  // Image, as the container was created from
  std::string state;  // State: "created", "running", "exited", ...
  std::string status; // Status, for people: "Exited (3) 1 second ago"
  // Labels, parsed from Docker's "k=v,k2=v2". Docker joins the pairs with
  // commas without escaping, so a value that contains a comma is ambiguous:
  // a comma-separated piece without '=' is taken as part of the previous
  // value ("note=a,b" gives note="a,b"), but a value containing ",x=y" is
  // read as a second label. barge's own labels never hold commas; for exact
  // labels of a container, use ParseContainerInspect.
  Labels labels;
};

// Parses `docker ps --format {{json .}}` output: one JSON object per line;
// blank lines (and a missing final newline) are fine, and no line means no
// container. Fails naming the first malformed line.
[[nodiscard]] Result<std::vector<PsEntry>> ParsePsLines(std::string_view text);

// Parses Docker's ps Labels string ("k=v,k2=v2"; see PsEntry::labels).
Labels ParsePsLabels(std::string_view labels);

// Parses `docker wait` output: the exit code in decimal and a newline.
[[nodiscard]] Result<int> ParseWaitOutput(std::string_view text);

// Parses `docker image inspect --format {{.Id}}` output: one "sha256:<64 hex>"
// and a newline. Returns the ID without the newline.
[[nodiscard]] Result<std::string> ParseImageId(std::string_view text);

}  // namespace barge::container
