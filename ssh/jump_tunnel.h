// ProxyJump for libssh 0.10: recognising the ProxyCommand libssh makes of a
// config's ProxyJump, and the OpenSSH client processes barge runs instead.
//
// libssh 0.10's config parser turns "ProxyJump a,b,c" into the ProxyCommand
//   ssh [-l USER] [-p PORT] [-J b,c] -W '[%h]:%p' HOST     (a = [USER@]HOST[:PORT])
// Run as it is, that would reach a *through* b and c (the wrong order), check
// the jump hosts against ~/.ssh/known_hosts with OpenSSH's default
// StrictHostKeyChecking=ask instead of barge's file and mode, read
// ~/.ssh/config instead of the config barge was given, and could prompt.
// So Session::Connect recognises that command (ProxyJumpHops), recovers the
// hop list from it, and hands libssh a JumpTunnel's command instead. A
// ProxyCommand the config sets itself does not match and is left as it is.
//
// A JumpTunnel makes a private directory DIR (mkdtemp, $TMPDIR or /tmp,
// "barge-jump-XXXXXX") holding
//   DIR/config  the OpenSSH client config every hop reads (JumpClientConfig)
//   DIR/stderr  what the hops' ssh processes write to stderr
// and its ProxyCommand (JumpProxyCommand) is
//   ssh -F DIR/config [-J HOP1,...,HOPn-1] -W '[HOST]:PORT' ssh://HOPn 2>>DIR/stderr
// OpenSSH passes -F on to the ssh it starts for each earlier hop, so every
// hop reads DIR/config.
//
// Lifetime: the directory lives as long as the JumpTunnel; its destructor
// removes DIR/config, DIR/stderr and DIR. The handshake (SessionHandshake,
// session.h) destroys the tunnel as soon as ssh_connect has finished or
// timed out (the hops have read their config by then), so nothing is left
// on disk once connected. The ssh processes are
// not the tunnel's: libssh starts them and ends them with its session; they
// keep their open stderr file after the directory is gone.
//
// Limits: needs OpenSSH's `ssh` on PATH. Paths (known_hosts, the ssh config,
// identity_file) containing `"`, `\`, CR or LF cannot be written into an
// OpenSSH config and are refused; the ssh config path is Included as it is,
// so OpenSSH globs any `*`, `?` or `[` in it. The hops are whatever libssh
// parsed out of the ProxyJump line; libssh makes no command at all of a list
// too long for its 512-byte buffer, so such a config gets no ProxyJump.
// Only the first 64 KiB of the hops' stderr is read.
//
// Threading: the free functions are reentrant; a JumpTunnel belongs to the
// thread that made it.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "ssh/session_options.h"

namespace barge::ssh {

// The hops of a ProxyJump list, first hop first, as [user@]host[:port] with
// an IPv6 host in brackets ("alice@[fe80::1]:2200"), if `proxy_command` is
// the command libssh 0.10 makes of one; nothing for any other command.
std::optional<std::vector<std::string>> ProxyJumpHops(const std::string& proxy_command);

// The user known_hosts file libssh reads, as a plain path: `configured` is
// libssh's SSH_OPTIONS_KNOWNHOSTS before ssh_connect expands it ("~/..." or
// "%d/..." with %d = HOME/.ssh, "%%" = "%"), empty for libssh's default
// (HOME/.ssh/known_hosts). `home` is the user's home directory.
std::string ExpandKnownHostsPath(const std::string& configured, const std::string& home);

// The text of DIR/config for a connection through `hops`. First (the first
// value obtained wins in ssh_config) a "Host *" block with BatchMode yes,
// StrictHostKeyChecking after options.host_key_checking (strict: yes,
// accept-new: accept-new, off: no), UserKnownHostsFile `known_hosts` (off:
// /dev/null, so that nothing is recorded), ConnectTimeout of 2/3 of
// options.connect_timeout (whole seconds, rounded down, at least 1, so that
// a dead jump host is named before libssh gives up on the whole chain), no
// connection sharing and LogLevel ERROR; then "Include `ssh_config`" (unless empty), whose Host
// blocks for the jump hosts apply as usual; then options.identity_file (if
// set) as a last IdentityFile for every hop. Relative paths are made
// absolute against the current directory; every path is double-quoted, with
// `%` doubled where OpenSSH expands %-tokens (UserKnownHostsFile,
// IdentityFile). Fails, naming "ProxyJump a,b", if a path holds `"`, `\`,
// CR or LF.
[[nodiscard]] Result<std::string> JumpClientConfig(const std::vector<std::string>& hops,
                                                   const SessionOptions& options,
                                                   const std::string& known_hosts,
                                                   const std::string& ssh_config);

// The ProxyCommand that carries a connection to host:port through `hops`
// (at least one), running the OpenSSH client `ssh` with DIR = `dir` (the
// layout above). Every word is shell-quoted (libssh runs it with /bin/sh
// -c), and every `%` is doubled, since libssh expands %-tokens in a
// ProxyCommand. The last hop gets "ssh://" in front unless it has it, so
// that a user@host:port hop means what it says. A non-empty `setsid` (the
// path of util-linux's setsid) runs ssh in a session of its own, so that a
// Ctrl-C at barge's terminal, which signals the whole foreground process
// group, does not cut the tunnel barge needs to tear that host down.
std::string JumpProxyCommand(const std::string& ssh, const std::string& dir,
                             const std::vector<std::string>& hops, const std::string& host,
                             unsigned int port, const std::string& setsid = "");

// Why the jump hosts could not be reached, from what their ssh processes
// wrote to stderr: a changed host key in barge's own words ("jump host NAME:
// " + ChangedHostKeyMessage, with the old lines looked up in the files
// OpenSSH named, else in `known_hosts`); anything else as OpenSSH said it,
// on one line without the @ frame of its warnings and cut to its last ~2000
// bytes, with advice to add the key to `known_hosts` for an unknown key.
std::string DescribeJumpFailure(const std::string& ssh_stderr, const std::string& known_hosts);

// Owns one connection's private directory (above) and the ProxyCommand that
// uses it. Neither copyable nor movable.
class JumpTunnel {
 public:
  // Finds `ssh` on PATH, makes the directory and writes DIR/config
  // (JumpClientConfig). On failure the message starts with "ProxyJump a,b"
  // (no host label) and nothing is left on disk.
  [[nodiscard]] static Result<std::unique_ptr<JumpTunnel>> Make(
      const std::vector<std::string>& hops, const std::string& host, unsigned int port,
      const SessionOptions& options, const std::string& known_hosts,
      const std::string& ssh_config);

  // Removes DIR/config, DIR/stderr and DIR.
  ~JumpTunnel();
  JumpTunnel(const JumpTunnel&) = delete;
  JumpTunnel& operator=(const JumpTunnel&) = delete;

  // For SSH_OPTIONS_PROXYCOMMAND (JumpProxyCommand).
  const std::string& proxy_command() const { return proxy_command_; }
  // "a,b": the hops, as the config lists them.
  const std::string& hops() const { return hops_; }

  // What the ssh processes wrote to stderr so far (the first 64 KiB).
  std::string ErrorOutput() const;

 private:
  JumpTunnel(std::string dir, std::string hops) : dir_(std::move(dir)), hops_(std::move(hops)) {}
  std::string config_file() const;
  std::string error_file() const;

  std::string dir_;
  std::string hops_;
  std::string proxy_command_;
};

}  // namespace barge::ssh
