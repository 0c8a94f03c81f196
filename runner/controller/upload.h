// Uploads: secrets:, workdir: and files: (and an MPI job's files) into
// every host's job directory, after the watchdog made it and before any
// container starts.
#pragma once

#include <vector>

#include "runner/controller/job.h"
#include "runner/controller/mpi.h"
#include "runner/controller/transfers.h"

namespace barge::runner::internal {

class Uploads : private JobPart {
 public:
  Uploads(Job* job, Transfers* transfers, Mpi* mpi) : JobPart(job), transfers_(*transfers), mpi_(*mpi) {}

  Status Upload(const std::vector<HostState*>& targets);

 private:
  // secrets: each value written from memory to the command's stdin, into
  // DIR/secrets/NAME (mode 0600), plus the env file of those given as
  // environment; in parallel on every target.
  Status ShipSecrets(const std::vector<HostState*>& targets);

  Transfers& transfers_;
  Mpi& mpi_;
};

}  // namespace barge::runner::internal
