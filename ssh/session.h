// One authenticated SSH connection to one host, and its handshake as a
// state machine that an event loop can drive (connect_all.h drives many).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <libssh/libssh.h>

#include "base/status.h"
#include "ssh/session_options.h"

namespace barge::ssh {

class JumpTunnel;

// The RAII owner of one connected, host-verified, authenticated
// `ssh_session`. Neither copyable nor movable (its address may be libssh
// userdata).
//
// Threading: a session belongs to one thread at a time; once it is handed
// to an SshExecutor, only the event loop's thread touches it.
class Session {
 public:
  // Connects, verifies the host key and authenticates, blocking the calling
  // thread (no event loop: it polls the one socket itself) for up to
  // options.connect_timeout for the TCP connect, banner and key exchange
  // as a whole, then up to options.connect_timeout again for the
  // authentication. ConnectAll (connect_all.h) runs the same handshake for
  // many hosts on an event loop instead.
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
  friend class SessionHandshake;
  Session(ssh_session session, std::string label);

  ssh_session session_;
  std::string label_;
  std::string peer_address_;
  bool through_proxy_ = false;
};

// Session::Connect's handshake as a non-blocking state machine: the libssh
// session is in non-blocking mode until the handshake ends, and no call
// waits on the network. Its steps, checks and error messages are
// Session::Connect's. Its caller waits for fd() to have events() (or
// POLLERR/POLLHUP), then calls Advance again, and calls Expire once the
// clock passes deadline().
//
// What still runs synchronously inside Advance: local work only (reading
// key and known_hosts files, the host key check, recording a new key with
// accept-new), a DNS lookup of a host name (libssh 0.10 resolves with
// getaddrinfo inside its first ssh_connect; an address needs none), and,
// when ssh-agent is used (no identity_file and SSH_AUTH_SOCK set), libssh's
// exchanges with the agent over its local socket. Every exchange with the
// host, and with ProxyJump hops or a ProxyCommand (libssh talks to those
// over a socketpair), waits on fd() instead.
//
// Threading: belongs to the thread that made it. Neither copyable nor
// movable.
class SessionHandshake {
 public:
  using Clock = std::chrono::steady_clock;

  // Resolves where and how to connect (Session::Connect's precedence: the
  // job's options, the ssh config, OpenSSH's reading of it for an alias,
  // ProxyJump), without sending anything yet. Fails as Session::Connect
  // does for bad options or config.
  [[nodiscard]] static Result<std::unique_ptr<SessionHandshake>> Start(const SessionOptions& options);
  ~SessionHandshake();
  SessionHandshake(const SessionHandshake&) = delete;
  SessionHandshake& operator=(const SessionHandshake&) = delete;

  // Runs the handshake as far as it goes without waiting. Returns true once
  // it has ended (TakeResult then says how), false while it waits on fd().
  bool Advance();
  // Ends a handshake that is still running at deadline(): "LABEL:
  // connection[ through ProxyJump HOPS] timed out after Ns (why)" while it
  // connects, "LABEL: authentication timed out after Ns" after that.
  void Expire();

  // The socket (or ProxyCommand socketpair) to wait on: -1 until the first
  // Advance has started the connection.
  int fd() const;
  // POLLIN, with POLLOUT while libssh has something to write or the TCP
  // connect is in progress.
  short events() const;
  // When the current step gives up: options.connect_timeout after Start
  // for the connect, banner and key exchange, then options.connect_timeout
  // after the host key was verified for the authentication.
  Clock::time_point deadline() const { return deadline_; }
  const std::string& label() const { return label_; }

  // The connected session (back in blocking mode, as Session::Connect
  // returns it) or why there is none. Only once, after Advance returned
  // true or Expire ran.
  [[nodiscard]] Result<std::unique_ptr<Session>> TakeResult();

 private:
  enum class Step { kConnecting, kAuthenticating, kEnded };
  SessionHandshake() = default;
  bool Fail(Status why);
  Status EndConnect(bool connected, bool expired);
  Status PrepareAuthentication();
  bool Authenticate();

  SessionOptions options_;
  std::unique_ptr<Session> session_;
  std::string label_;
  std::string host_;        // where libssh connects, after the config
  unsigned int port_ = 22;
  long timeout_ms_ = 0;
  Clock::time_point started_;
  Clock::time_point deadline_;
  Step step_ = Step::kConnecting;
  std::unique_ptr<JumpTunnel> tunnel_;  // until the connect ends
  std::string jump_known_hosts_;
  bool through_jump_ = false;
  ssh_key identity_ = nullptr;  // identity_file's key, while authenticating
  std::optional<Status> failed_;
};

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
