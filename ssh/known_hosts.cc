#include "ssh/known_hosts.h"

#include <libssh/libssh.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <set>

#include "ssh/quote.h"
#include "ssh/session.h"

namespace barge::ssh {

std::string KnownHostsName(const std::string& host, unsigned int port) {
  if (port == 22) return host;
  return "[" + host + "]:" + std::to_string(port);
}

std::vector<KnownHostsLine> FindKnownHostsLines(const std::string& file, const std::string& name) {
  std::vector<KnownHostsLine> found;
  std::ifstream in(file);
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] == '#' || line[start] == '@') continue;
    // Matches `name` against the host field (hashing it with each line's
    // salt for |1| entries) and parses the key.
    struct ssh_knownhosts_entry* entry = nullptr;
    if (ssh_known_hosts_parse_line(name.c_str(), line.c_str() + start, &entry) != SSH_OK ||
        entry == nullptr) {
      continue;
    }
    KnownHostsLine known;
    known.file = file;
    known.line_number = number;
    if (entry->publickey != nullptr) {
      known.key_type = ssh_key_type_to_char(ssh_key_type(entry->publickey));
      known.fingerprint = Sha256Fingerprint(entry->publickey);
    }
    ssh_knownhosts_entry_free(entry);
    found.push_back(std::move(known));
  }
  return found;
}

std::string ChangedHostKeyMessage(const std::string& name, const std::string& presented_type,
                                  const std::string& presented_fingerprint,
                                  const std::vector<KnownHostsLine>& old_lines,
                                  const std::string& known_hosts) {
  std::string message = "the host key has CHANGED: the host presents " + presented_type + " key " +
                        presented_fingerprint + ", but ";
  std::vector<std::string> files;  // in order of first appearance
  std::set<std::string> seen;
  for (const KnownHostsLine& line : old_lines) {
    if (!presented_fingerprint.empty() && line.fingerprint == presented_fingerprint) continue;
    message += files.empty() ? "" : ", and ";
    message += line.file + ":" + std::to_string(line.line_number) + " holds " +
               (line.key_type.empty() ? "a" : line.key_type) + " key " +
               (line.fingerprint.empty() ? "(unreadable)" : line.fingerprint) + " for " + name;
    if (seen.insert(line.file).second) files.push_back(line.file);
  }
  if (files.empty()) {
    message += known_hosts + " holds another key for " + name;
    files.push_back(known_hosts);
  }
  message +=
      ". Someone could be impersonating the host (man-in-the-middle), or it was reinstalled. "
      "If you are sure the new key is right, remove the old key (";
  for (size_t i = 0; i < files.size(); ++i) {
    if (i > 0) message += "; ";
    message += "ssh-keygen -R " + ShellQuote(name) + " -f " + ShellQuote(files[i]);
  }
  message += ") and connect again.";
  return message;
}

std::optional<OpenSshChangedKey> ParseOpenSshChangedKey(const std::string& ssh_stderr) {
  std::string text = ssh_stderr;
  text.erase(std::remove(text.begin(), text.end(), '\r'), text.end());
  static const std::regex kHost("Host key for (\\S+) has changed and you have requested strict");
  static const std::regex kPresented(
      "The fingerprint for the (\\S+) key sent by the remote host is\\s+(SHA256:[A-Za-z0-9+/]+)");
  static const std::regex kOffending("Offending \\S+ key in (.+):[0-9]+");
  std::smatch host, presented;
  if (!std::regex_search(text, host, kHost) || !std::regex_search(text, presented, kPresented)) {
    return std::nullopt;
  }
  OpenSshChangedKey changed{host[1], presented[1], presented[2], {}};
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    std::smatch m;
    if (std::regex_match(line, m, kOffending) &&
        std::find(changed.files.begin(), changed.files.end(), m[1].str()) == changed.files.end()) {
      changed.files.push_back(m[1]);
    }
    start = end + 1;
  }
  return changed;
}

}  // namespace barge::ssh
