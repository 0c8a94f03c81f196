// MPI jobs (`mpi:`): the head runs the user's launcher (mpirun, horovodrun,
// deepspeed) and reaches every worker over SSH; each worker's main process
// is the image's own sshd, started with the job's host key and an
// authorized_keys holding only the job's client key. Everything here is
// pure text and data: the files each node gets under /run/barge, the
// workers' command and readiness probe, and the head's environment.
// Generating and shipping the keys is the controller's (runner/).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "container/container_spec.h"

namespace barge::cluster {

struct MpiOptions {
  // Slots per node in the hostfile; nullopt = the node's GPU count, else 1.
  std::optional<int> slots_per_node;
  // The first in-container sshd port; a host's Nth node of the job (0-based
  // slot) listens on port + N.
  int port = 2222;
  // The host directory holding one directory per rank (DIR/RANK, mounted
  // read-only at kMpiDir); set by the runner (HostJobDir(job)/mpi).
  std::string files_dir;
};

// Where every MPI node sees its files (a read-only mount of its own
// directory), and the files in it.
inline constexpr char kMpiDir[] = "/run/barge";
inline constexpr char kMpiHostfile[] = "/run/barge/hostfile";
inline constexpr char kMpiSshConfig[] = "/run/barge/ssh_config";
inline constexpr char kMpiClientKey[] = "/run/barge/id_ed25519";
inline constexpr char kMpiKnownHosts[] = "/run/barge/known_hosts";
inline constexpr char kMpiHostKey[] = "/run/barge/ssh_host_ed25519_key";
inline constexpr char kMpiAuthorizedKeys[] = "/run/barge/authorized_keys";
// The sshd binary a worker runs, and the Debian/Ubuntu package shipping it.
inline constexpr char kSshdPath[] = "/usr/sbin/sshd";
inline constexpr char kSshdPackage[] = "openssh-server";

// One node as the launcher on the head reaches it.
struct MpiNode {
  int rank = 0;
  std::string address;  // the node's internal address
  int port = 0;         // its sshd's port (the head runs no sshd)
  // What the hostfile and the client config call it: the address, or
  // "barge-rank-R" when the host carries several of the job's nodes (each
  // then an ssh alias of its own).
  std::string name;
  std::string slots;  // a number, or a placeholder only a live host can fill
};

// The head's client config: one Host block per worker (HostName, Port),
// then the job's identity, UserKnownHostsFile kMpiKnownHosts (and no global
// one), StrictHostKeyChecking yes, BatchMode yes.
std::string MpiSshConfig(const std::vector<MpiNode>& nodes);

// OpenMPI/DeepSpeed hostfile: "NAME slots=N" per node, the head first.
std::string MpiHostfile(const std::vector<MpiNode>& nodes);

// horovodrun -H: "NAME:N,NAME:N", the head first.
std::string HorovodHosts(const std::vector<MpiNode>& nodes);

// known_hosts: "[ADDR]:PORT KEY" for every worker (`public_keys` by rank,
// each "ssh-ed25519 AAAA..."); a worker without a key is left out.
std::string MpiKnownHosts(const std::vector<MpiNode>& nodes,
                          const std::map<int, std::string>& public_keys);

// The smallest IPv4 network (CIDR) holding every address, for OpenMPI's
// btl/oob_tcp_if_include; nullopt when one is not an IPv4 address.
std::optional<std::string> CoveringCidr(const std::vector<std::string>& addresses);

// The variables every node of an MPI job gets (before the user's env).
container::KeyValues MpiEnv(const std::vector<MpiNode>& nodes);

// A worker's container: `docker run --entrypoint /bin/sh IMAGE -c SCRIPT`,
// where SCRIPT writes the container's environment to ~/.ssh/environment
// (for the ranks sshd starts), as root checks for the `sshd` user and makes
// /run/sshd (a non-root sshd needs neither), and execs the image's sshd
// with the job's host key and authorized_keys, listening on the node's
// address and port. The entrypoint words, then the command.
std::vector<std::string> MpiWorkerEntrypoint();
std::vector<std::string> MpiWorkerCommand(const MpiNode& node);

// The variables a worker gets on top of MpiEnv: its sshd's address and port.
container::KeyValues MpiWorkerEnv(const MpiNode& node);

// A shell command, run in a worker's container (whose MpiWorkerEnv says
// where its sshd listens), that succeeds once that sshd has sent its banner
// and presents the job's host key for the node: the gate of the workers'
// launch stage, the same for every worker.
std::string MpiReadyCommand();

}  // namespace barge::cluster
