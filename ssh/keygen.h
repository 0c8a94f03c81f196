// Fresh SSH key pairs made in memory (libssh), for keys a job owns: no file,
// no child process, nothing on a command line.
#pragma once

#include <string>

#include "base/status.h"

namespace barge::ssh {

struct KeyPair {
  // OpenSSH's private key format ("-----BEGIN OPENSSH PRIVATE KEY-----"),
  // unencrypted, ending in a newline: what sshd's HostKey and ssh's
  // IdentityFile read.
  std::string private_key;
  // One authorized_keys / known_hosts key: "ssh-ed25519 AAAA...".
  std::string public_key;
};

// A new ed25519 key pair.
[[nodiscard]] Result<KeyPair> GenerateEd25519();

}  // namespace barge::ssh
