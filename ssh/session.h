// One authenticated SSH connection to one host, and a way to open many of
// them in parallel.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <libssh/libssh.h>

#include "base/status.h"
#include "ssh/session_options.h"

namespace barge::ssh {

// The RAII owner of one connected, host-verified, authenticated
// `ssh_session`. Neither copyable nor movable (its address may be libssh
// userdata).
//
// Threading: Connect may run on any thread, one session per thread. After
// that the session belongs to one thread at a time; once it is handed to an
// SshExecutor, only the event loop's thread touches it.
class Session {
 public:
  // Connects, verifies the host key and authenticates, blocking for up to
  // about options.connect_timeout per network round trip of the handshake
  // (the TCP connect, banner and key exchange are bounded as a whole).
  //
  // Precedence, as `ssh -o` has it: every option set in `options` wins over
  // the ssh config file (options.config_file, else ~/.ssh/config if it
  // exists), which wins over libssh's defaults. The config file is read
  // once, here; libssh is told not to read it again in ssh_connect.
  //
  // Host keys per options.host_key_checking (session_options.h), against
  // the known_hosts file (plain, hashed and "[host]:port" entries) and the
  // global one. An unknown key's message carries its SHA256 fingerprint and
  // the file; a changed key's carries the new fingerprint, the old one with
  // the file:line holding it, and the `ssh-keygen -R` command that removes
  // it. Authentication: with identity_file, that key only; otherwise
  // ssh-agent (if SSH_AUTH_SOCK is set), then libssh's automatic public key
  // auth (agent, default identities, config IdentityFile).
  //
  // ProxyJump (a config Host block's "ProxyJump a,b,..."; hops as
  // [user@]host[:port], ssh://... or Host aliases of the same config): the
  // hops are connected in the order listed by OpenSSH's client (`ssh` on
  // PATH), which barge runs as libssh's ProxyCommand with BatchMode, the
  // same known_hosts file and the same host_key_checking mode, so every
  // jump host's key is checked as strictly as the target's (which barge
  // checks itself); a jump host's changed key is reported like the
  // target's. Jump hosts authenticate with their own Host blocks' identities,
  // ssh-agent and the default identities, then identity_file. While the
  // session lives, one ssh process per hop runs; the session ends them.
  // A ProxyCommand set in the config is run as it is.
  //
  // Every error message starts with the host's label.
  [[nodiscard]] static Result<std::unique_ptr<Session>> Connect(const SessionOptions& options);

  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // "user@address:port" after the config file was applied, with the alias
  // the caller used when it differs: "root@10.0.0.5:22 (gpu1)".
  const std::string& label() const { return label_; }
  // The numeric address (IPv4 dotted, or IPv6 without brackets; an
  // IPv4-mapped IPv6 address as IPv4) of the far end of the session's TCP
  // socket: the address this connection actually reached, after the ssh
  // config's HostName and DNS. Empty when the session does not run over a
  // TCP socket of its own (through ProxyJump hops or a ProxyCommand).
  const std::string& peer_address() const { return peer_address_; }
  // True when the connection goes through ProxyJump hops or a ProxyCommand.
  bool through_proxy() const { return through_proxy_; }
  // For ssh/ internals.
  ssh_session raw() const { return session_; }

 private:
  Session(ssh_session session, std::string label);

  ssh_session session_;
  std::string label_;
  std::string peer_address_;
  bool through_proxy_ = false;
};

// Connects to every host in parallel on up to `parallelism` threads (at
// least one) and returns one result per input, in input order. Blocks until
// every attempt has finished; each is bounded by its own connect_timeout.
[[nodiscard]] std::vector<Result<std::unique_ptr<Session>>> ConnectAll(
    const std::vector<SessionOptions>& options, int parallelism);

// Who a connected session is, as another host's OpenSSH client would log in
// the same way: its user and port (after the ssh config), and the host key
// the server presented, which Connect verified (unless host_key_checking
// was off), as one known_hosts key "TYPE BASE64".
struct SessionLogin {
  std::string user;
  unsigned int port = 22;
  std::string host_key;
};
[[nodiscard]] Result<SessionLogin> LoginOf(ssh_session session);

// The SHA256 fingerprint of a public key as OpenSSH prints it,
// "SHA256:base64-without-padding"; empty if it cannot be computed.
std::string Sha256Fingerprint(ssh_key key);

}  // namespace barge::ssh
