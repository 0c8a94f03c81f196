// The host's side of an artifact streamed to object storage without a copy
// on the controller (`artifacts[].local: false`): the command lines that
// list the artifact's files with their part digests, and that give one
// file's bytes, and the reading of the listing.
//
// Both read the container's path with `docker cp NAME:PATH -` (a tar
// stream, as the local copy does) and unpack it on the host with GNU tar,
// nothing written to disk: the listing runs `tar --to-command` once per
// regular file (other entries are ignored), which prints the file's size,
// its name (hex: any byte is allowed in a name) and the MD5 of each part of
// `part_size` (GNU split --filter); the file command unpacks one file to
// stdout (`tar -xO`). So the host needs GNU tar and coreutils, as Debian,
// Ubuntu and RHEL have.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "runner/remote/docker_commands.h"

namespace barge::runner {

// One regular file of an artifact, as the listing gives it.
struct ListedFile {
  std::string name;  // relative to the artifact's parent, e.g. "ckpt/step-2/model.bin"
  uint64_t size = 0;
  std::vector<std::string> part_md5s;  // hex, one per part of part_size, in order
};

// Lists the regular files under `path` in container `name`, one line each:
// "SIZE HEXNAME MD5 MD5...".
std::string ArtifactListingCommand(const DockerCommands& docker, const std::string& name, const std::string& path,
                                   uint64_t part_size);
// Prints the bytes of the regular file `path` in container `name`.
std::string ArtifactFileCommand(const DockerCommands& docker, const std::string& name, const std::string& path);
// Reads ArtifactListingCommand's output; an error names the line that is
// not one.
Result<std::vector<ListedFile>> ParseArtifactListing(std::string_view text);

}  // namespace barge::runner
