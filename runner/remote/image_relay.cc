#include "runner/remote/image_relay.h"

#include <cstdlib>

#include "runner/remote/watchdog.h"
#include "ssh/quote.h"

namespace barge::runner {
namespace {

using ssh::ShellQuote;

// The sender's ssh to one child: only the relay's key, only the host key
// the controller verified, no user or system ssh config, no prompt, bounded
// connect and silence.
std::string RelaySshLine(const std::string& job_dir, const RelayPeer& to) {
  return ssh::ShellJoin({"ssh", "-T", "-F", "/dev/null", "-i", RelayKeyFile(job_dir),
                         "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
                         "-o", "StrictHostKeyChecking=yes",
                         "-o", "UserKnownHostsFile=" + RelayKnownHostsFile(job_dir),
                         "-o", "GlobalKnownHostsFile=/dev/null",
                         "-o", "HostKeyAlias=" + RelayHostKeyAlias(to.index),
                         "-o", "CheckHostIP=no", "-o", "UpdateHostKeys=no",
                         "-o", "ConnectTimeout=10", "-o", "ServerAliveInterval=5",
                         "-o", "ServerAliveCountMax=6", "-o", "LogLevel=ERROR",
                         "-p", std::to_string(to.port), "-l", to.user, to.address});
}

// authorized_keys option values sit between double quotes: \ and " escaped.
std::string OptionValue(const std::string& value) {
  std::string out = "\"";
  for (char c : value) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string Marker(const std::string& job_dir) { return "barge-relay:" + job_dir; }

}  // namespace

std::vector<std::vector<size_t>> RelayChildren(size_t n, size_t fan_out) {
  std::vector<std::vector<size_t>> children(n);
  if (fan_out == 0) return children;
  for (size_t i = 1; i < n; ++i) children[(i - 1) / fan_out].push_back(i);
  return children;
}

std::string RelayDir(const std::string& job_dir) { return job_dir + "/relay"; }
std::string RelayKeyFile(const std::string& job_dir) { return RelayDir(job_dir) + "/key"; }
std::string RelayKnownHostsFile(const std::string& job_dir) { return RelayDir(job_dir) + "/known_hosts"; }
std::string RelayScriptFile(const std::string& job_dir) { return RelayDir(job_dir) + "/run"; }

std::string RelayHostKeyAlias(size_t index) { return "barge-relay-" + std::to_string(index); }

std::string RelayKnownHosts(const std::vector<RelayPeer>& children) {
  std::string out;
  for (const RelayPeer& c : children) out += RelayHostKeyAlias(c.index) + " " + c.host_key + "\n";
  return out;
}

std::string RelayRunCommand(const std::string& job_dir) { return "sh " + ShellQuote(RelayScriptFile(job_dir)); }

std::string RelayScript(const std::string& job_dir, const DockerCommands& docker,
                        const std::vector<RelayPeer>& children) {
  std::string s = "# barge: load the image on stdin here and pass it on (image_pull: push)\n";
  s += OwnDirGuard(job_dir) + " || exit 125\n";
  if (children.empty()) return s + "exec " + docker.Load() + "\n";
  const std::string d = RelayDir(job_dir);
  auto file = [&](const char* what, size_t index) { return ShellQuote(d + "/" + what + std::to_string(index)); };
  // An older OpenSSH client makes ~/.ssh when it runs: RelayCleanupCommand
  // removes it again (when empty), as it does where RelayAuthorizeCommand
  // made it.
  s += "[ -d \"$HOME/.ssh\" ] || : >" + ShellQuote(d + "/made-ssh-dir") + "\n";
  std::string fifos;
  // One pipe per child, read by its ssh; once ssh has ended (failed or
  // not), `cat` drains the rest so that tee, and this host's own load, go on
  // (again after a pause if ssh left the pipe non-blocking: EAGAIN).
  for (const RelayPeer& c : children) {
    const std::string fifo = file("to-", c.index);
    fifos += " " + fifo;
    s += "rm -f " + fifo + " && mkfifo " + fifo + " || exit 125\n";
    s += "{ " + RelaySshLine(job_dir, c) + " >/dev/null 2>" + file("err-", c.index) + "; echo $? >" +
         file("rc-", c.index) + "; until cat >/dev/null 2>&1; do sleep 0.1 2>/dev/null || sleep 1; done; } <" + fifo + " &\n";
  }
  s += "tee" + fifos + " | " + docker.Load() + "\nrc=$?\nwait\n";
  // What each hop said of its own children goes up; then this hop's own.
  for (const RelayPeer& c : children) {
    const std::string err = file("err-", c.index);
    s += "grep '^" + std::string(kRelayFailedMarker) + "' " + err + " >&2 2>/dev/null\n";
    s += "r=$(cat " + file("rc-", c.index) + " 2>/dev/null)\n";
    s += "[ \"$r\" = 0 ] || printf '" + std::string(kRelayFailedMarker) + std::to_string(c.index) +
         " %s: %s\\n' \"${r:-?}\" \"$(grep -v '^" + std::string(kRelayFailedMarker) + "' " + err +
         " 2>/dev/null | tail -n 1)\" >&2\n";
  }
  return s + "exit $rc\n";
}

std::string RelayAuthorizedKey(const std::string& job_dir, const std::string& sender_address,
                               const std::string& public_key) {
  return "restrict,from=" + OptionValue(sender_address) + ",command=" + OptionValue(RelayRunCommand(job_dir)) +
         " " + public_key + " " + Marker(job_dir) + "\n";
}

std::string RelayAuthorizeCommand(const std::string& job_dir) {
  return OwnDirGuard(job_dir) + " && umask 077 && d=" + ShellQuote(RelayDir(job_dir)) +
         " && mkdir -p \"$d\" && cd && { [ -d .ssh ] || { mkdir .ssh && : >\"$d/made-ssh-dir\"; }; }"
         " && f=.ssh/authorized_keys && { [ -e \"$f\" ] || { : >\"$f\" && : >\"$d/made-keys\"; }; }"
         " && { [ ! -s \"$f\" ] || [ -z \"$(tail -c 1 \"$f\")\" ] || { echo >>\"$f\" && : >\"$d/added-newline\"; }; }"
         " && cat >>\"$f\"";
}

namespace {

// Removes every line of ~/.ssh/authorized_keys that holds the text of $m
// (set by the caller), keeping the file's inode, owner and mode; where $own
// is 1 and "$d/added-newline" exists, the final newline
// RelayAuthorizeCommand added too. Needs f, m, own and d set.
constexpr char kRemoveMarkedLines[] =
    " if [ -f \"$f\" ] && grep -qF -- \"$m\" \"$f\" && t=$(mktemp); then"
    " grep -vF -- \"$m\" \"$f\" >\"$t\";"
    " if [ $own = 1 ] && [ -e \"$d/added-newline\" ] && [ -s \"$t\" ] && u=$(mktemp); then"
    " n=$(wc -c <\"$t\"); head -c $((n - 1)) \"$t\" >\"$u\" && mv \"$u\" \"$t\"; fi;"
    " cat \"$t\" >\"$f\"; rm -f \"$t\"; fi;";

}  // namespace

std::string RelayCleanupOf(const std::string& job_dir_word) {
  // The lines go whatever became of the job's directory; what it noted
  // (made, added) is trusted only while it is still the job's own.
  return "(j=" + job_dir_word + "; d=\"$j/relay\"; m=\" " + Marker("") +
         "$j\"; f=\"$HOME/.ssh/authorized_keys\"; own=0; " + OwnDirTestOfWord("\"$j\"") +
         " && [ -d \"$d\" ] && [ ! -L \"$d\" ] && own=1;" + kRemoveMarkedLines +
         " if [ $own = 1 ]; then [ ! -e \"$d/made-keys\" ] || [ -s \"$f\" ] || rm -f \"$f\";"
         " [ ! -e \"$d/made-ssh-dir\" ] || rmdir \"$HOME/.ssh\" 2>/dev/null; rm -rf \"$d\"; fi; exit 0)";
}

std::string RelayCleanupCommand(const std::string& job_dir) { return RelayCleanupOf(ShellQuote(job_dir)); }

std::string RelayLinesCleanupCommand(const std::string& job_dir_prefix) {
  return "(m=" + ShellQuote(" " + Marker(job_dir_prefix)) + "; f=\"$HOME/.ssh/authorized_keys\"; own=0; d=;" +
         kRemoveMarkedLines + " exit 0)";
}

std::map<size_t, std::string> ParseRelayFailures(const std::string& stderr_text) {
  std::map<size_t, std::string> out;
  const std::string marker = kRelayFailedMarker;
  size_t start = 0;
  while (start < stderr_text.size()) {
    size_t end = stderr_text.find('\n', start);
    if (end == std::string::npos) end = stderr_text.size();
    const std::string line = stderr_text.substr(start, end - start);
    start = end + 1;
    if (line.compare(0, marker.size(), marker) != 0) continue;
    const std::string rest = line.substr(marker.size());
    const size_t space = rest.find(' ');
    const size_t colon = rest.find(": ");
    if (space == std::string::npos || colon == std::string::npos || colon < space || space == 0) continue;
    char* parsed_end = nullptr;
    const std::string number = rest.substr(0, space);
    const unsigned long index = std::strtoul(number.c_str(), &parsed_end, 10);
    if (parsed_end != number.c_str() + number.size() || number[0] == '-') continue;
    const std::string exit = rest.substr(space + 1, colon - space - 1);
    std::string why = rest.substr(colon + 2);
    // OpenSSH ends its messages with "\r\n".
    while (!why.empty() && (why.back() == '\r' || why.back() == ' ')) why.pop_back();
    out.emplace(index, why.empty() ? "exit " + exit : why + " (exit " + exit + ")");
  }
  return out;
}

}  // namespace barge::runner
