// mpi: what an MPI job (`mpi:`) needs beyond any other job. At preflight,
// each worker's image has /usr/sbin/sshd and each worker's sshd port is
// free on its host. Before anything starts, the job's keys, made here in
// memory once per job (a client key pair, one host key per worker), and
// each node's files (cluster/mpi.h) are written to the command's stdin
// over the open session, into the node's directory (MpiFilesDir/RANK, every
// file mode 0600), which the node mounts read-only at /run/barge. No key
// is ever on a command line, in the store or in the plan; the directory
// goes with the job's per-host directory at teardown.
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cluster/mpi.h"
#include "container/proc_net.h"
#include "runner/controller/controller.h"
#include "runner/controller/preflight.h"
#include "runner/docker_commands.h"
#include "ssh/keygen.h"

namespace barge::runner::internal {

Status Controller::MpiPreflight(const std::vector<HostState*>& targets) {
  if (plan_.mpi_nodes.empty() || targets.empty()) return Status::Ok();
  CommandGroup group(&loop_, &redact_);
  std::map<size_t, std::vector<std::string>> errors;  // by host index
  for (HostState* hs : targets) {
    std::set<std::string> images;
    std::vector<const cluster::MpiNode*> workers;
    for (const cluster::NodePlan& n : plan_.nodes) {
      if (n.host_index != hs->index || n.rank == 0) continue;
      images.insert(n.container.image);
      workers.push_back(&plan_.mpi_nodes[n.rank]);
    }
    for (const std::string& image : images) {
      group.Run(*hs->exec, Bounded(hs->docker->ImageHasExecutable(image, cluster::kSshdPath), seconds(60)),
                [&, hs, image](const Outcome& o) {
                  if (o.ok()) return;
                  // `test -x` says no with 1; anything else is Docker's or
                  // the shell's failure (no /bin/sh in the image, ...).
                  if (o.exit.known() && o.exit.code == 1) {
                    errors[hs->index].push_back(
                        "image " + image + " has no " + cluster::kSshdPath +
                        ", which every worker of an MPI job runs (install the " +
                        cluster::kSshdPackage + " package in the image)");
                  } else {
                    errors[hs->index].push_back("cannot check that image " + image + " has " +
                                                cluster::kSshdPath + " (an MPI worker runs it with /bin/sh): " +
                                                Trim(o.Reason()));
                  }
                });
    }
    if (workers.empty()) continue;
    group.Run(*hs->exec, HostTcpTables(), [&, hs, workers](const Outcome& o) {
      const std::set<int> open = container::ParseListeningPorts(o.out);
      for (const cluster::MpiNode* w : workers) {
        if (open.count(w->port)) {
          errors[hs->index].push_back("port " + std::to_string(w->port) + " for node " +
                                      std::to_string(w->rank) +
                                      "'s sshd is already in use on this host (mpi.port)");
        }
      }
    });
  }
  const bool done = RunUntil([&] { return group.idle() || interrupts_ > 0; },
                             Clock::now() + spec_.ssh.connect_timeout + seconds(90));
  if (interrupts_ > 0) return Status::Error("interrupted during preflight");
  if (!done) return Status::Error("preflight (MPI checks) did not finish in time");
  if (errors.empty()) return Status::Ok();
  std::vector<std::pair<std::string, std::vector<std::string>>> table;
  for (const auto& [h, list] : errors) table.emplace_back(hosts_[h]->name, list);
  return Status::Error(ProblemTable(table, hosts_.size()));
}

Status Controller::ShipMpiFiles(const std::vector<HostState*>& targets) {
  if (!spec_.mpi || targets.empty()) return Status::Ok();
  // The plan as it will launch: live hosts may have told their GPU counts
  // (slots).
  Result<cluster::Plan> planned = cluster::MakePlan(input_);
  if (!planned.ok()) return planned.status();
  const std::vector<cluster::MpiNode>& nodes = planned->mpi_nodes;
  // Once per job: a host checked again at a restart gets the same keys,
  // which the head's known_hosts names.
  if (!mpi_keys_) {
    auto keys = std::make_unique<MpiKeys>();
    Result<ssh::KeyPair> client = ssh::GenerateEd25519();
    if (!client.ok()) return client.status();
    keys->client = std::move(client).value();
    for (const cluster::MpiNode& n : nodes) {
      if (n.rank == 0) continue;
      Result<ssh::KeyPair> host = ssh::GenerateEd25519();
      if (!host.ok()) return host.status();
      keys->hosts[n.rank] = std::move(host).value();
    }
    mpi_keys_ = std::move(keys);
  }
  std::map<int, std::string> public_keys;
  for (const auto& [rank, pair] : mpi_keys_->hosts) public_keys[rank] = pair.public_key;
  // Per node: file name in its directory → content.
  const std::string dir = MpiFilesDir(plan_.job_id);
  const std::string authorized = mpi_keys_->client.public_key + "\n";
  const std::string known = cluster::MpiKnownHosts(nodes, public_keys);
  const std::string config = cluster::MpiSshConfig(nodes);
  const std::string hostfile = cluster::MpiHostfile(nodes);
  const std::string client_public = mpi_keys_->client.public_key + "\n";
  std::map<int, std::string> host_public;
  for (const auto& [rank, pair] : mpi_keys_->hosts) host_public[rank] = pair.public_key + "\n";

  std::map<HostState*, std::vector<std::pair<std::string, const std::string*>>> per_host;
  int files = 0;
  for (HostState* hs : targets) {
    std::vector<std::pair<std::string, const std::string*>>& writes = per_host[hs];  // path, content
    for (const cluster::NodePlan& n : planned->nodes) {
      if (n.host_index != hs->index) continue;
      const std::string node_dir = dir + "/" + std::to_string(n.rank);
      if (n.rank == 0) {
        writes.push_back({node_dir + "/id_ed25519", &mpi_keys_->client.private_key});
        writes.push_back({node_dir + "/id_ed25519.pub", &client_public});
        writes.push_back({node_dir + "/known_hosts", &known});
        writes.push_back({node_dir + "/ssh_config", &config});
        writes.push_back({node_dir + "/hostfile", &hostfile});
      } else {
        writes.push_back({node_dir + "/ssh_host_ed25519_key", &mpi_keys_->hosts[n.rank].private_key});
        writes.push_back({node_dir + "/ssh_host_ed25519_key.pub", &host_public[n.rank]});
        writes.push_back({node_dir + "/authorized_keys", &authorized});
      }
    }
    files += static_cast<int>(writes.size());
    if (writes.empty()) per_host.erase(hs);
  }
  if (Status s = WriteFiles(per_host, "the MPI keys"); !s.ok()) return s;
  Say("MPI: a client key and " + std::to_string(mpi_keys_->hosts.size()) +
      " host key(s) made for this job; " + std::to_string(files) + " file(s) written (" + dir +
      "/RANK, mode 0600, mounted read-only at " + cluster::kMpiDir + ")");
  return Status::Ok();
}

}  // namespace barge::runner::internal
