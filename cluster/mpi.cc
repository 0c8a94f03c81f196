#include "cluster/mpi.h"

#include <arpa/inet.h>

#include <cstdint>

namespace barge::cluster {

namespace {

std::vector<const MpiNode*> Workers(const std::vector<MpiNode>& nodes) {
  std::vector<const MpiNode*> out;
  for (const MpiNode& n : nodes) {
    if (n.rank != 0) out.push_back(&n);
  }
  return out;
}

}  // namespace

std::string MpiSshConfig(const std::vector<MpiNode>& nodes) {
  std::string out = "# barge: the job's MPI workers (generated; read by ssh -F)\n";
  for (const MpiNode* n : Workers(nodes)) {
    out += "Host " + n->name + "\n";
    out += "  HostName " + n->address + "\n";
    out += "  Port " + std::to_string(n->port) + "\n";
  }
  out += "Host *\n";
  out += std::string("  IdentityFile ") + kMpiClientKey + "\n";
  out += "  IdentitiesOnly yes\n";
  out += std::string("  UserKnownHostsFile ") + kMpiKnownHosts + "\n";
  out += "  GlobalKnownHostsFile /dev/null\n";
  out += "  StrictHostKeyChecking yes\n";
  out += "  BatchMode yes\n";
  out += "  PasswordAuthentication no\n";
  out += "  ConnectTimeout 10\n";
  return out;
}

std::string MpiHostfile(const std::vector<MpiNode>& nodes) {
  std::string out;
  for (const MpiNode& n : nodes) out += n.name + " slots=" + n.slots + "\n";
  return out;
}

std::string HorovodHosts(const std::vector<MpiNode>& nodes) {
  std::string out;
  for (const MpiNode& n : nodes) out += (out.empty() ? "" : ",") + n.name + ":" + n.slots;
  return out;
}

std::string MpiKnownHosts(const std::vector<MpiNode>& nodes,
                          const std::map<int, std::string>& public_keys) {
  std::string out;
  for (const MpiNode* n : Workers(nodes)) {
    auto key = public_keys.find(n->rank);
    if (key == public_keys.end()) continue;
    const std::string host =
        n->port == 22 ? n->address : "[" + n->address + "]:" + std::to_string(n->port);
    out += host + " " + key->second + "\n";
  }
  return out;
}

std::optional<std::string> CoveringCidr(const std::vector<std::string>& addresses) {
  if (addresses.empty()) return std::nullopt;
  uint32_t first = 0;
  int prefix = 32;
  for (size_t i = 0; i < addresses.size(); ++i) {
    in_addr a{};
    if (inet_pton(AF_INET, addresses[i].c_str(), &a) != 1) return std::nullopt;
    const uint32_t v = ntohl(a.s_addr);
    if (i == 0) {
      first = v;
      continue;
    }
    while (prefix > 0) {
      const uint32_t mask = prefix == 32 ? 0xffffffffu : ~(0xffffffffu >> prefix);
      if ((v & mask) == (first & mask)) break;
      --prefix;
    }
  }
  const uint32_t mask = prefix == 0 ? 0 : prefix == 32 ? 0xffffffffu : ~(0xffffffffu >> prefix);
  in_addr net{};
  net.s_addr = htonl(first & mask);
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &net, text, sizeof text);
  return std::string(text) + "/" + std::to_string(prefix);
}

container::KeyValues MpiEnv(const std::vector<MpiNode>& nodes) {
  container::KeyValues env;
  env.emplace_back("BARGE_MPI_HOSTFILE", kMpiHostfile);
  env.emplace_back("DSTACK_MPI_HOSTFILE", kMpiHostfile);
  env.emplace_back("BARGE_HOROVOD_HOSTS", HorovodHosts(nodes));
  // mpirun reaches the workers with `ssh -F CONFIG`: port, key and strict
  // host keys come from there. Only the head launches (no tree spawn), so
  // only the head holds the client key.
  env.emplace_back("OMPI_MCA_plm_rsh_args", std::string("-F ") + kMpiSshConfig);
  env.emplace_back("OMPI_MCA_plm_rsh_no_tree_spawn", "1");
  std::vector<std::string> addresses;
  for (const MpiNode& n : nodes) addresses.push_back(n.address);
  if (std::optional<std::string> cidr = CoveringCidr(addresses)) {
    env.emplace_back("OMPI_MCA_btl_tcp_if_include", *cidr);
    env.emplace_back("OMPI_MCA_oob_tcp_if_include", *cidr);
  }
  // Several ranks per node in a container: no cross-memory attach.
  env.emplace_back("OMPI_MCA_btl_vader_single_copy_mechanism", "none");
  env.emplace_back("OMPI_ALLOW_RUN_AS_ROOT", "1");
  env.emplace_back("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
  return env;
}

std::vector<std::string> MpiWorkerEntrypoint() { return {"--entrypoint", "/bin/sh"}; }

std::vector<std::string> MpiWorkerCommand(const MpiNode& node) {
  const std::string sshd = kSshdPath;
  // sshd starts every session with a clean environment: the container's
  // own (rendezvous variables, the image's ENV, container.env, env
  // secrets) goes to ~/.ssh/environment, which PermitUserEnvironment makes
  // sshd read. A value holding a line break cannot be written there and is
  // left out. The script ends by exec'ing sshd: it is the main process.
  // Besides sshd, the script needs only a POSIX shell and the tools it
  // names first (no grep: minimal images cut from a package closure lack
  // it), so a missing one is named rather than blamed on something else.
  std::string script =
      "for t in id mkdir chmod sed tr; do command -v \"$t\" >/dev/null 2>&1 || { echo \"barge: this "
      "image has no '$t', which the MPI worker's start needs (with sshd: id, mkdir, chmod, sed, tr)\" "
      ">&2; exit 127; }; done\n"
      "[ -x " + sshd + " ] || { echo 'barge: this image has no " + sshd +
      ", which every MPI worker runs (Debian/Ubuntu package " + kSshdPackage +
      ")' >&2; exit 127; }\n"
      // Only a root sshd separates privileges (the sshd user, /run/sshd as
      // its chroot); one running as the image's non-root USER needs neither.
      "if [ \"$(id -u)\" = 0 ]; then\n"
      "u=; [ -r /etc/passwd ] && while IFS=: read -r n _; do [ \"$n\" = sshd ] && u=1; done < /etc/passwd\n"
      "[ -n \"$u\" ] || { echo \"barge: this image has no 'sshd' user in "
      "/etc/passwd, which sshd needs (" + kSshdPackage +
      "'s install adds it: useradd -r -d /run/sshd -s /usr/sbin/nologin sshd)\" >&2; exit 1; }\n"
      "mkdir -p /run/sshd 2>/dev/null; chmod 0755 /run/sshd 2>/dev/null\n"
      "fi\n"
      "h=${HOME:-/root}\n"
      "mkdir -p \"$h/.ssh\" && sed -z '/\\n/d' /proc/self/environ | tr '\\0' '\\n' > "
      "\"$h/.ssh/environment\" || { echo \"barge: cannot write $h/.ssh/environment\" >&2; exit 1; }\n"
      "c=/etc/ssh/sshd_config; [ -f \"$c\" ] || c=/dev/null\n"
      "exec " + sshd + " -D -e -f \"$c\" -p " + std::to_string(node.port) +
      " -o ListenAddress=" + node.address + " -h " + kMpiHostKey +
      " -o AuthorizedKeysFile=" + kMpiAuthorizedKeys +
      " -o PubkeyAuthentication=yes -o PasswordAuthentication=no"
      " -o KbdInteractiveAuthentication=no -o UsePAM=no -o StrictModes=no"
      " -o PermitUserEnvironment=yes -o PermitRootLogin=prohibit-password\n";
  return {"-c", script};
}

container::KeyValues MpiWorkerEnv(const MpiNode& node) {
  return {{"BARGE_MPI_SSHD_ADDR", node.address}, {"BARGE_MPI_SSHD_PORT", std::to_string(node.port)}};
}

std::string MpiReadyCommand() {
  // Shell built-ins and ssh-keyscan only (no cut or grep in the image).
  return std::string("read -r _ k _ < ") + kMpiHostKey + ".pub && [ -n \"$k\" ] && " +
         "case \"$(ssh-keyscan -T 2 -t ed25519 -p \"$BARGE_MPI_SSHD_PORT\" \"$BARGE_MPI_SSHD_ADDR\" "
         "2>/dev/null)\" in *\"$k\"*) true ;; *) false ;; esac";
}

}  // namespace barge::cluster
