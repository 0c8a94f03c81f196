// Uploads: secrets:, workdir: and files: (and an MPI job's files) into
// every host's job directory, after the watchdog made it and before any
// container starts.
#pragma once

#include <vector>

#include "runner/controller/job_context.h"
#include "runner/controller/mpi.h"
#include "runner/controller/transfers.h"

namespace barge::runner::internal {

class Uploads : private JobPart {
 public:
  Uploads(JobContext* ctx, const cluster::Plan* plan, Transfers* transfers, Mpi* mpi)
      : JobPart(ctx), plan_(*plan), transfers_(*transfers), mpi_(*mpi) {}

  Status Upload(const std::vector<HostState*>& targets);

 private:
  const cluster::Plan& plan_;  // the current plan (the Controller makes it)
  // secrets: each value written from memory to the command's stdin, into
  // DIR/secrets/NAME (mode 0600), plus the env file of those given as
  // environment; in parallel on every target.
  Status ShipSecrets(const std::vector<HostState*>& targets);

  Transfers& transfers_;
  Mpi& mpi_;
};

}  // namespace barge::runner::internal
