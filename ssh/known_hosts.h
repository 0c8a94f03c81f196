// known_hosts files as OpenSSH writes them: which lines name a host, and the
// message for a host whose key is not the one they record.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace barge::ssh {

// The name known_hosts files give a host: "host" on port 22, "[host]:port"
// on any other port (a plain "host" line does not vouch for other ports).
std::string KnownHostsName(const std::string& host, unsigned int port);

// One line of a known_hosts file that names a host.
struct KnownHostsLine {
  std::string file;
  int line_number = 0;      // 1-based
  std::string key_type;     // "ssh-ed25519"
  std::string fingerprint;  // "SHA256:..." as OpenSSH prints it
};

// The lines of `file` whose host field matches `name` (a KnownHostsName):
// plain names, comma-separated lists, patterns, and hashed entries
// (|1|salt|hash, as `ssh-keygen -H` writes them), matched the way libssh
// matches them when it verifies a key. Comments, blank lines, @marker lines
// and lines libssh cannot parse are skipped. A missing or unreadable file
// has no lines.
std::vector<KnownHostsLine> FindKnownHostsLines(const std::string& file, const std::string& name);

// The explanation (no host label in front) for a host `name` that presents
// a `presented_type` key with `presented_fingerprint` while known_hosts
// records another key: the old and the new SHA256 fingerprints, each
// file:line that holds an old key, and the `ssh-keygen -R` command that
// removes them. `old_lines` are FindKnownHostsLines' results for `name` over
// every known_hosts file that was consulted (lines holding the presented
// key itself are left out); when it is empty, `known_hosts` is named as the
// file holding another key.
std::string ChangedHostKeyMessage(const std::string& name, const std::string& presented_type,
                                  const std::string& presented_fingerprint,
                                  const std::vector<KnownHostsLine>& old_lines,
                                  const std::string& known_hosts);

// A changed host key as OpenSSH's client reports it on stderr when it
// refuses one (StrictHostKeyChecking yes or accept-new).
struct OpenSshChangedKey {
  std::string name;         // as known_hosts names the host: "10.0.0.5", "[10.0.0.5]:2222"
  std::string key_type;     // the presented key's type as OpenSSH names it: "ED25519"
  std::string fingerprint;  // the presented key's "SHA256:..."
  // The files OpenSSH found the old key in ("Offending ... key in FILE:N"),
  // each once, in order.
  std::vector<std::string> files;
};

// Finds that report in `ssh_stderr` (OpenSSH 8 and 9 wording); nothing if
// it is not there or is incomplete.
std::optional<OpenSshChangedKey> ParseOpenSshChangedKey(const std::string& ssh_stderr);

}  // namespace barge::ssh
