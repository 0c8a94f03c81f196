// Mpi: an MPI job's preflight checks (sshd in every worker's image, free
// sshd ports) and its keys and files, shipped to every node's host.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runner/controller/host_set.h"
#include "runner/controller/job_context.h"
#include "runner/controller/planner.h"
#include "runner/controller/transfers.h"
#include "ssh/keygen.h"

namespace barge::runner::internal {

// The job's keys, made once per job on this machine and kept only in
// memory.
struct MpiKeys {
  ssh::KeyPair client;
  std::map<int, ssh::KeyPair> hosts;  // by worker rank
};

class Mpi : private JobPart {
 public:
  // The plan as it will launch comes from `planner` (not owned).
  Mpi(JobContext* ctx, HostSet* hosts, Planner* planner, Transfers* transfers)
      : JobPart(ctx), hosts_(*hosts), planner_(*planner), transfers_(*transfers) {}

  // mpi: on `targets`, every worker's image has /usr/sbin/sshd and every
  // worker's sshd port is free; the problems in preflight's table. Records
  // the uid each node's image runs as (image_uids_), which ShipMpiFiles
  // reads, and refuses a port below 1024 for a non-root worker.
  Status MpiPreflight(const std::vector<HostState*>& targets);
  // mpi: the job's keys (made on first use) and each node's files into
  // MpiFilesDir/RANK on the node's host, from the command's stdin (mode
  // 0600), in parallel on every target. Called by Uploads.
  Status ShipMpiFiles(const std::vector<HostState*>& targets);

 private:
  HostSet& hosts_;
  Planner& planner_;  // the facts and the current plan
  const cluster::Plan& plan_ = planner_.plan();
  // mpi: each directory in `dirs` (a node whose image runs as a non-root
  // uid) made 0755 and its files 0644; their parent stays 0700.
  Status ShareMpiFiles(const std::map<HostState*, std::vector<std::string>>& dirs);

  Transfers& transfers_;
  std::unique_ptr<MpiKeys> mpi_keys_;          // made on first use
  std::map<std::string, int> mpi_image_uids_;  // image → uid of its USER (MpiPreflight)
};

}  // namespace barge::runner::internal
