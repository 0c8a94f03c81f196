// mpi: what an MPI job (`mpi:`) needs beyond any other job. At preflight,
// each worker's image has /usr/sbin/sshd, each node's image tells the uid
// it runs as (its USER), and each worker's sshd port is free on its host
// (and not below 1024 for a non-root worker). Before anything starts, the
// job's keys, made here in memory once per job (a client key pair, one host
// key per worker), and each node's files (cluster/mpi.h) are written to the
// command's stdin over the open session, into the node's directory
// (MpiFilesDir/RANK), which the node mounts read-only at /run/barge. No key
// is ever on a command line, in the store or in the plan; the directory
// goes with the job's per-host directory at teardown.
//
// Modes: a node whose image runs as root gets mode 0600 files (owned by the
// SSH login user, root on a host that runs Docker). A node whose image runs
// as another uid could not read those, so its directory is made 0755 and
// its files 0644: readable by the container's user, whatever its uid.
// Nobody else on the host reaches them: MpiFilesDir and the job directory
// above it stay 0700. OpenSSH refuses a group/other-readable private key
// only when the key's owner is the uid reading it, so the root-owned 0644
// keys load in a non-root sshd and ssh client.
#include <charconv>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cluster/mpi.h"
#include "container/proc_net.h"
#include "runner/controller/job_state.h"
#include "runner/controller/mpi.h"
#include "runner/controller/preflight.h"
#include "runner/remote/docker_commands.h"
#include "runner/remote/watchdog.h"
#include "ssh/keygen.h"
#include "ssh/quote.h"

namespace barge::runner::internal {

namespace {

// The uid `id -u` printed (its last line), or nullopt.
std::optional<int> ParseUid(const std::string& out) {
  std::string text = Trim(out);
  const size_t nl = text.rfind('\n');
  if (nl != std::string::npos) text = text.substr(nl + 1);
  int uid = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), uid);
  if (ec != std::errc() || end != text.data() + text.size() || uid < 0) return std::nullopt;
  return uid;
}

// Below this port, a non-root process cannot listen (Linux's default
// net.ipv4.ip_unprivileged_port_start; a worker shares its host's network).
constexpr int kFirstUnprivilegedPort = 1024;

}  // namespace

Status Mpi::MpiPreflight(const std::vector<HostState*>& targets) {
  if (plan_.mpi_nodes.empty() || targets.empty()) return Status::Ok();
  CommandGroup group(&ctx_.loop, &ctx_.redact);
  std::map<size_t, std::vector<std::string>> errors;  // by host index
  for (HostState* hs : targets) {
    // Each image of a node on this host: whether a worker runs it (then it
    // must hold sshd), and those workers.
    std::map<std::string, std::vector<const cluster::MpiNode*>> images;
    std::vector<const cluster::MpiNode*> workers;
    for (const cluster::NodePlan& n : plan_.nodes) {
      if (n.host_index != hs->index) continue;
      std::vector<const cluster::MpiNode*>& of_image = images[n.container.image];
      if (n.rank == 0) continue;
      of_image.push_back(&plan_.mpi_nodes[n.rank]);
      workers.push_back(&plan_.mpi_nodes[n.rank]);
    }
    for (const auto& [image_name, image_workers] : images) {
      const std::string image = image_name;
      const std::vector<const cluster::MpiNode*> runs = image_workers;
      const std::string required = runs.empty() ? "" : cluster::kSshdPath;
      group.Run(*hs->exec, Bounded(hs->docker->ImageUserId(image, required), seconds(60)),
                [&, hs, image, runs](const Outcome& o) {
                  if (o.ok()) {
                    const std::optional<int> uid = ParseUid(o.out);
                    // Unknown (no `id` in the image): treated as root, 0600.
                    if (!uid) return;
                    // Hosts disagreeing (the same tag, other images): the
                    // readable modes serve both.
                    auto known = mpi_image_uids_.find(image);
                    if (known == mpi_image_uids_.end() || *uid != 0) mpi_image_uids_[image] = *uid;
                    if (*uid == 0) return;
                    for (const cluster::MpiNode* w : runs) {
                      if (w->port >= kFirstUnprivilegedPort) continue;
                      errors[hs->index].push_back(
                          "node " + std::to_string(w->rank) + "'s image " + image + " runs as uid " +
                          std::to_string(*uid) + ", whose sshd cannot listen on port " +
                          std::to_string(w->port) + " (below " +
                          std::to_string(kFirstUnprivilegedPort) + "): set mpi.port to " +
                          std::to_string(kFirstUnprivilegedPort) + " or above");
                    }
                    return;
                  }
                  // `test -x` says no with 1; anything else is Docker's or
                  // the shell's failure (no /bin/sh in the image, ...).
                  if (!runs.empty() && o.exit.known() && o.exit.code == 1) {
                    errors[hs->index].push_back(
                        "image " + image + " has no " + cluster::kSshdPath +
                        ", which every worker of an MPI job runs (install the " +
                        cluster::kSshdPackage + " package in the image)");
                  } else if (!runs.empty()) {
                    errors[hs->index].push_back("cannot check that image " + image + " has " +
                                                cluster::kSshdPath + " (an MPI worker runs it with /bin/sh): " +
                                                Trim(o.Reason()));
                  }
                  // The head's image alone: its user unknown, treated as
                  // root (the head needs no /bin/sh of barge's).
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
  const bool done = RunUntil([&] { return group.idle() || ctx_.interrupts > 0; },
                             Now() + ctx_.spec.ssh.connect_timeout + seconds(90));
  if (ctx_.interrupts > 0) return Status::Error("interrupted during preflight");
  if (!done) return Status::Error("preflight (MPI checks) did not finish in time");
  if (errors.empty()) return Status::Ok();
  std::vector<std::pair<std::string, std::vector<std::string>>> table;
  for (const auto& [h, list] : errors) table.emplace_back(hosts_.by_index[h]->name, list);
  return Status::Error(ProblemTable(table, hosts_.by_index.size()));
}

Status Mpi::ShipMpiFiles(const std::vector<HostState*>& targets) {
  if (!ctx_.spec.mpi || targets.empty()) return Status::Ok();
  // The plan as it will launch: live hosts may have told their GPU counts
  // (slots).
  if (Status s = planner_.Update(); !s.ok()) return s;
  const std::vector<cluster::MpiNode>& nodes = plan_.mpi_nodes;
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
  const std::string authorized = mpi_keys_->client.public_key + "\n";
  const std::string known = cluster::MpiKnownHosts(nodes, public_keys);
  const std::string config = cluster::MpiSshConfig(nodes);
  const std::string hostfile = cluster::MpiHostfile(nodes);
  const std::string client_public = mpi_keys_->client.public_key + "\n";
  std::map<int, std::string> host_public;
  for (const auto& [rank, pair] : mpi_keys_->hosts) host_public[rank] = pair.public_key + "\n";

  std::map<HostState*, std::vector<std::pair<std::string, const std::string*>>> per_host;
  std::map<HostState*, std::vector<std::string>> readable;  // node directories, for a non-root user
  int files = 0;
  for (HostState* hs : targets) {
    std::vector<std::pair<std::string, const std::string*>>& writes = per_host[hs];  // path, content
    for (const cluster::NodePlan& n : plan_.nodes) {
      if (n.host_index != hs->index) continue;
      const std::string node_dir = MpiFilesDir(hs->job_dir) + "/" + std::to_string(n.rank);
      auto uid = mpi_image_uids_.find(n.container.image);
      if (uid != mpi_image_uids_.end() && uid->second != 0) readable[hs].push_back(node_dir);
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
  if (Status s = transfers_.WriteFiles(per_host, "the MPI keys"); !s.ok()) return s;
  if (Status s = ShareMpiFiles(readable); !s.ok()) return s;
  size_t shared = 0;
  for (const auto& [hs, dirs] : readable) shared += dirs.size();
  Say("MPI: a client key and " + std::to_string(mpi_keys_->hosts.size()) +
      " host key(s) made for this job; " + std::to_string(files) + " file(s) written (" + MpiFilesDir(HostJobDirShown(plan_.job_id)) +
      "/RANK, mode 0600, mounted read-only at " + cluster::kMpiDir + ")" +
      (shared == 0 ? std::string()
                   : "; " + std::to_string(shared) +
                         " node(s) whose image runs as a non-root user get them mode 0644 in a 0755 "
                         "directory (" + MpiFilesDir(HostJobDirShown(plan_.job_id)) + " stays 0700)"));
  return Status::Ok();
}

Status Mpi::ShareMpiFiles(const std::map<HostState*, std::vector<std::string>>& dirs) {
  if (dirs.empty()) return Status::Ok();
  CommandGroup group(&ctx_.loop, &ctx_.redact);
  std::map<size_t, std::pair<HostState*, std::string>> errors;  // by host index: said in that order
  for (const auto& [host, list] : dirs) {
    HostState* hs = host;
    std::string line;
    for (const std::string& d : list) {
      line += std::string(line.empty() ? "" : " && ") + "chmod 0755 " + ssh::ShellQuote(d) +
              " && chmod 0644 " + ssh::ShellQuote(d) + "/*";
    }
    group.Run(*hs->exec, line, [&, hs](const Outcome& o) {
      if (!o.ok()) errors[hs->index] = {hs, Trim(o.Reason())};
    });
  }
  const bool done = RunUntil([&] { return group.idle() || ctx_.interrupts > 0; },
                             Now() + ctx_.spec.ssh.connect_timeout + seconds(60));
  if (ctx_.interrupts > 0) return Status::Error("interrupted while making the MPI files readable");
  if (!done) return Status::Error("making the MPI files readable did not finish in time");
  if (!errors.empty()) {
    std::string msg = "making the MPI files readable by the image's user failed:";
    for (const auto& [h, failed] : errors) msg += "\n  " + failed.first->name + ": " + failed.second;
    return Status::Error(msg);
  }
  return Status::Ok();
}

}  // namespace barge::runner::internal
