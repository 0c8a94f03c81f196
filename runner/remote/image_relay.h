// image_pull: push by relay: every line and script a host runs so that an
// image tar sent once from the controller is passed on from host to host.
//
// The hosts form a tree (RelayChildren). The controller streams the tar into
// the root's RelayRunCommand; each host's run script (RelayScript) pipes it
// through `tee` into its own `docker load` and, at the same time, into one
// `ssh` per child (streaming, not store-and-forward). Each hop is
// authenticated both ways:
//   - the sender logs in with a key pair barge made for this push (the
//     private key only in a 0600 file in the sender's job directory,
//     RelayKeyFile), accepted by the receiver only from the sender's address
//     and only to run the receiver's own run script (RelayAuthorizedKey:
//     `restrict,from=...,command=...` in ~/.ssh/authorized_keys, added by
//     RelayAuthorizeCommand);
//   - the sender checks the receiver's host key against the key the
//     controller's own session verified (RelayKnownHosts, with
//     StrictHostKeyChecking=yes and a HostKeyAlias; never "no").
// RelayCleanupCommand removes all of it (the authorized_keys lines, the
// directory with keys, scripts and pipes). What a hop could not deliver is
// reported up the tree on stderr (RelayFailureLine) and read by
// ParseRelayFailures; the controller then sends to those hosts itself.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "runner/remote/docker_commands.h"

namespace barge::runner {

// Each host of the relay sends to at most this many others: a binary tree.
// One slow or failed host holds up or loses only its own subtree (at most
// half the hosts below the root), the depth is log2 of the hosts (a hop's
// connect time is paid once per level), and each host's uplink carries two
// copies at most.
inline constexpr size_t kRelayFanOut = 2;

// The tree over `n` hosts in heap order: position 0 is the root (the one
// the controller sends to), position i's children are fan_out*i+1 ...
// fan_out*i+fan_out (those below n). Returns each position's children.
std::vector<std::vector<size_t>> RelayChildren(size_t n, size_t fan_out);

// A host a sender passes the image on to, as the controller reached it.
struct RelayPeer {
  size_t index = 0;     // the host's index in the plan: names it in reports
  std::string address;  // numeric, as the controller's session reached it
  unsigned int port = 22;
  std::string user;
  std::string host_key;  // "ssh-ed25519 AAAA...": what the controller verified
};

// Where a job keeps the relay's files on a host: DIR/relay (DIR the job's
// directory, NewHostJobDir).
std::string RelayDir(const std::string& job_dir);
// The sender's private key (0600), the receivers' host keys, the run script.
std::string RelayKeyFile(const std::string& job_dir);
std::string RelayKnownHostsFile(const std::string& job_dir);
std::string RelayScriptFile(const std::string& job_dir);

// The name a sender's ssh checks child `index`'s host key under
// (HostKeyAlias): known_hosts lines need not know the address or port.
std::string RelayHostKeyAlias(size_t index);
// RelayKnownHostsFile's content for `children`: one line each,
// "ALIAS KEYTYPE BASE64".
std::string RelayKnownHosts(const std::vector<RelayPeer>& children);

// `sh RelayScriptFile`: the root's command (the controller streams into
// it) and every other host's forced command.
std::string RelayRunCommand(const std::string& job_dir);

// The run script of a host whose engine `docker` loads the image and which
// passes it on to `children` (none: a leaf, which only loads). It exits
// with its own `docker load`'s status and, for each child whose hop failed
// (ssh could not connect or log in, or the child's own load failed),
// prints RelayFailureLine on stderr; the lines its children printed about
// their own children are passed up the same way.
std::string RelayScript(const std::string& job_dir, const DockerCommands& docker,
                        const std::vector<RelayPeer>& children);

// The line that lets the host holding `public_key` at `sender_address` run
// this host's relay script, and nothing else (no pty, no forwarding, no
// other command), marked as this job directory's (RelayCleanupCommand).
std::string RelayAuthorizedKey(const std::string& job_dir, const std::string& sender_address,
                               const std::string& public_key);
// Appends the line on stdin to ~/.ssh/authorized_keys (made 0700/0600 when
// missing, which RelayCleanupCommand then removes again; a newline first
// when the file lacks a final one, which it removes again too). Only with
// the job's own directory (OwnDirGuard), where it notes what it made.
std::string RelayAuthorizeCommand(const std::string& job_dir);
// Removes this job directory's lines from ~/.ssh/authorized_keys (keeping
// the file's inode, owner and mode), what RelayAuthorizeCommand made, and
// RelayDir. Exits 0. A line another process appends to authorized_keys
// while this runs (a few milliseconds) can be lost: the file is rewritten.
std::string RelayCleanupCommand(const std::string& job_dir);
// RelayCleanupCommand for the job directory a shell word names (a quoted
// path, or "$D" inside a script that sets D): what the watchdog runs when
// it tears a job down (a controller killed during a push leaves the lines)
// and what disarming it runs (runner/remote/watchdog.h).
std::string RelayCleanupOf(const std::string& job_dir_word);
// Removes from ~/.ssh/authorized_keys every relay line of a job directory
// whose name starts with `job_dir_prefix` (all of a job's: "/tmp/barge-ID."),
// whether or not the directory is still there; leaves everything else as
// it is (a newline RelayAuthorizeCommand added, a file or ~/.ssh it made:
// those notes were in the directory). Exits 0.
std::string RelayLinesCleanupCommand(const std::string& job_dir_prefix);

// What a run script prints on stderr for a child whose hop failed:
// "barge-relay-failed INDEX EXIT: REASON" (REASON: the last line the hop's
// ssh printed that is not such a line, or nothing).
inline constexpr char kRelayFailedMarker[] = "barge-relay-failed ";
// The failures in a root's stderr, by host index; for one index the first
// line wins. Other lines are ignored.
std::map<size_t, std::string> ParseRelayFailures(const std::string& stderr_text);

}  // namespace barge::runner
