// Transfers: a local file streamed into a command's stdin on many hosts in
// parallel with bounded memory (the workdir, an image's `docker save`), and
// small files written from memory into 0600 files on the hosts (secrets,
// MPI keys): never on a command line.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "runner/controller/job_context.h"

namespace barge::runner::internal {

class Transfers : private JobPart {
 public:
  explicit Transfers(JobContext* ctx) : JobPart(ctx) {}

  // Streams a local file into `command(host)`'s stdin on every target, in
  // parallel with bounded memory; the outcome per host (missing when
  // interrupted or timed out). Adds the bytes written into the commands'
  // stdin to `*sent` when given. `report` false: no step and no host phases
  // are reported (the caller reports its own).
  std::map<HostState*, Outcome> StreamFile(const std::string& file,
                                           const std::vector<HostState*>& targets,
                                           const std::function<std::string(HostState&)>& command,
                                           Phase phase, const std::string& label,
                                           uint64_t* sent = nullptr, bool report = true);
  // Writes each host's files (path on the host, content) through a
  // command's stdin into 0600 files, never on a command line; one upload
  // step named "writing " + what, and one error listing every host's.
  Status WriteFiles(
      const std::map<HostState*, std::vector<std::pair<std::string, const std::string*>>>& writes,
      const std::string& what);
};

}  // namespace barge::runner::internal
