#include "runner/jobfile/job_values.h"

#include <arpa/inet.h>
#include <climits>
#include <cstdio>
#include <vector>

#include "container/container_spec.h"

namespace barge::runner {
namespace {

bool IsAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// [A-Za-z0-9][A-Za-z0-9_.-]*: container, volume and network names.
bool IsDockerName(std::string_view s) {
  if (s.empty() || !IsAlnum(s[0])) return false;
  for (char c : s) {
    if (!IsAlnum(c) && c != '_' && c != '.' && c != '-') return false;
  }
  return true;
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t at = s.find(sep, start);
    if (at == std::string_view::npos) {
      parts.push_back(s.substr(start));
      return parts;
    }
    parts.push_back(s.substr(start, at - start));
    start = at + 1;
  }
}

// The first byte of `s` that `allowed` rejects, described for a message
// ("';'", "a space"), or "" when every byte is allowed.
template <typename Pred>
std::string FirstBadChar(std::string_view s, Pred allowed) {
  for (char c : s) {
    if (allowed(c)) continue;
    if (c == ' ') return "a space";
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) {
      char buf[16];
      std::snprintf(buf, sizeof buf, "byte 0x%02X", static_cast<unsigned char>(c));
      return buf;
    }
    if (static_cast<unsigned char>(c) >= 0x80) return "a non-ASCII character";
    return std::string("'") + c + "'";
  }
  return "";
}

Status CheckAbsolutePath(std::string_view path, std::string_view what) {
  if (path.empty()) return Status::Error(std::string(what) + " is empty");
  if (path[0] != '/') {
    return Status::Error(std::string(what) + " " + QuoteValue(path) + " is not an absolute path");
  }
  if (path.size() >= PATH_MAX) {
    return Status::Error(std::string(what) + " is " + std::to_string(path.size()) +
                         " bytes long; the limit is " + std::to_string(PATH_MAX - 1));
  }
  return Status::Ok();
}

bool IsValidIpv4(std::string_view s) {
  std::string copy(s);
  in_addr addr;
  return inet_pton(AF_INET, copy.c_str(), &addr) == 1;
}

}  // namespace

std::string QuoteValue(std::string_view value) {
  constexpr size_t kMaxShown = 60;
  std::string out = "'";
  size_t shown = 0;
  for (size_t i = 0; i < value.size(); ++i) {
    if (shown >= kMaxShown) {
      // Do not cut a UTF-8 sequence in half.
      while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0x80)
        out.pop_back();
      if (!out.empty() && static_cast<unsigned char>(out.back()) >= 0xC0) out.pop_back();
      out += "...";
      break;
    }
    unsigned char c = static_cast<unsigned char>(value[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
    ++shown;
  }
  return out + "'";
}

bool ParseInteger(std::string_view text, long long* out) {
  std::string_view digits = text;
  bool negative = false;
  if (!digits.empty() && digits[0] == '-') {
    negative = true;
    digits.remove_prefix(1);
  }
  if (digits.empty() || digits.size() > 18) return false;
  if (digits.size() > 1 && digits[0] == '0') return false;
  long long value = 0;
  for (char c : digits) {
    if (!IsDigit(c)) return false;
    value = value * 10 + (c - '0');
  }
  *out = negative ? -value : value;
  return true;
}

Status CheckJobName(std::string_view name) {
  if (name.empty()) return Status::Error("empty name");
  if (name.size() > 63) {
    return Status::Error("name is " + std::to_string(name.size()) +
                         " characters long; the limit is 63");
  }
  if (!IsDockerName(name)) {
    return Status::Error("invalid name " + QuoteValue(name) +
                         " (letters, digits, '_', '.', '-'; starting with a letter or digit)");
  }
  return Status::Ok();
}

Status CheckHostAddress(std::string_view address) {
  const std::string shown = "invalid host address " + QuoteValue(address);
  if (address.empty()) return Status::Error("empty host address");
  if (address == "local") return Status::Ok();
  if (address.find(':') != std::string_view::npos) {
    // IPv6, possibly with a zone: fe80::1%eth0.
    std::string_view ip = address;
    if (size_t pct = address.find('%'); pct != std::string_view::npos) {
      std::string_view zone = address.substr(pct + 1);
      ip = address.substr(0, pct);
      if (!IsDockerName(zone)) return Status::Error(shown + ": bad IPv6 zone");
    }
    std::string copy(ip);
    in6_addr addr;
    if (inet_pton(AF_INET6, copy.c_str(), &addr) != 1) {
      return Status::Error(shown + " (not an IPv6 address; write IPv6 without brackets)");
    }
    return Status::Ok();
  }
  std::string bad =
      FirstBadChar(address, [](char c) { return IsAlnum(c) || c == '.' || c == '-' || c == '_'; });
  if (!bad.empty()) return Status::Error(shown + ": " + bad + " is not allowed in a host name");
  if (address.size() > 253) return Status::Error(shown + ": longer than 253 characters");
  std::vector<std::string_view> labels = Split(address, '.');
  bool last_numeric = true;
  for (char c : labels.back()) last_numeric = last_numeric && IsDigit(c);
  if (last_numeric) {
    if (IsValidIpv4(address)) return Status::Ok();
    return Status::Error(shown + " (not a valid IPv4 address)");
  }
  for (std::string_view label : labels) {
    if (label.empty()) return Status::Error(shown + ": empty label between dots");
    if (label.size() > 63) return Status::Error(shown + ": a label is longer than 63 characters");
    if (label.front() == '-' || label.back() == '-') {
      return Status::Error(shown + ": a name part may not start or end with '-'");
    }
  }
  return Status::Ok();
}

Status CheckUserName(std::string_view user) {
  if (user.empty()) return Status::Error("empty user name");
  std::string_view body = user;
  if (body.back() == '$') body.remove_suffix(1);
  std::string bad =
      FirstBadChar(body, [](char c) { return IsAlnum(c) || c == '_' || c == '.' || c == '-'; });
  if (!bad.empty() || body.empty() || body[0] == '-' || user.size() > 64) {
    return Status::Error("invalid user name " + QuoteValue(user) +
                         " (letters, digits, '_', '.', '-', not starting with '-')");
  }
  return Status::Ok();
}

Status CheckImageReference(std::string_view image) {
  if (image.empty()) return Status::Error("empty image reference");
  std::string bad = FirstBadChar(image, [](char c) {
    return IsAlnum(c) || c == '.' || c == '_' || c == '/' || c == ':' || c == '@' || c == '-';
  });
  if (!bad.empty()) {
    return Status::Error("invalid image reference " + QuoteValue(image) + ": " + bad +
                         " is not allowed");
  }
  if (!IsAlnum(image[0])) {
    return Status::Error("invalid image reference " + QuoteValue(image) +
                         ": must start with a letter or digit");
  }
  if (image.size() > 255) return Status::Error("image reference longer than 255 characters");
  return Status::Ok();
}

namespace {

bool IsAllowedInDockerCommand(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  switch (c) {
    case '-': case '_': case '.': case '/': case ':': case '=':
    case ',': case '+': case '@': case '%':
      return true;
    default:
      return false;
  }
}

std::string DescribeChar(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (u < 0x20 || u >= 0x7f) {
    static constexpr char kHex[] = "0123456789abcdef";
    return std::string("byte 0x") + kHex[u >> 4] + kHex[u & 0xf];
  }
  return std::string("character ") + c;
}

}  // namespace

Result<std::vector<std::string>> SplitDockerCommand(std::string_view docker_command) {
  const std::string quoted = "docker_command \"" + std::string(docker_command) + "\"";
  std::vector<std::string> words;
  std::string word;
  for (size_t i = 0; i <= docker_command.size(); ++i) {
    const bool end = i == docker_command.size();
    const char c = end ? ' ' : docker_command[i];
    if (c == ' ' || c == '\t') {
      if (!word.empty()) words.push_back(std::move(word));
      word.clear();
      continue;
    }
    if (!IsAllowedInDockerCommand(c)) {
      return Status::Error(quoted + ": " + DescribeChar(c) + " at position " + std::to_string(i + 1) +
                           " is not allowed: write plain words separated by spaces, without "
                           "quotes or shell syntax, e.g. \"sudo -n docker\"");
    }
    word += c;
  }
  if (words.empty()) {
    return Status::Error("docker_command is empty: write the command that runs docker, "
                         "e.g. \"docker\" or \"sudo -n docker\"");
  }
  if (words.front().find('=') != std::string::npos) {
    return Status::Error(quoted + ": the first word sets a variable, which only a shell "
                         "would understand; write \"env " + std::string(docker_command) +
                         "\" instead");
  }
  return words;
}

// SplitDockerCommand's grammar; a program name cannot start with '-'.
Status CheckDockerCommand(std::string_view command) {
  Result<std::vector<std::string>> words = SplitDockerCommand(command);
  if (!words.ok()) return words.status();
  if (words->front()[0] == '-') {
    return Status::Error("docker_command \"" + std::string(command) + "\": must start with a program name");
  }
  return Status::Ok();
}

Status CheckEnvName(std::string_view name) {
  bool ok = !name.empty() && !IsDigit(name[0]);
  for (char c : name) ok = ok && (IsAlnum(c) || c == '_');
  if (!ok) {
    return Status::Error("invalid environment variable name " + QuoteValue(name) +
                         " (letters, digits and '_', not starting with a digit)");
  }
  return Status::Ok();
}

Status CheckArrayColumnName(std::string_view name) {
  static constexpr std::string_view kReadByPrograms[] = {
      "http_proxy", "https_proxy", "ftp_proxy", "no_proxy", "all_proxy", "rsync_proxy",
      "path",       "cdpath",      "fpath",     "manpath",  "mailpath",  "module_path"};
  bool lower = !name.empty() && !IsDigit(name[0]);
  for (char c : name) lower = lower && ((c >= 'a' && c <= 'z') || IsDigit(c) || c == '_');
  if (!lower) {
    return Status::Error("column " + QuoteValue(name) +
                         " is not a lower-case variable name ([a-z_][a-z0-9_]*): a row's columns become "
                         "environment variables of every member, and upper-case ones (PATH, LD_PRELOAD, "
                         "BASH_ENV, MASTER_ADDR...) are read by loaders, shells and launchers");
  }
  for (std::string_view read : kReadByPrograms) {
    if (name == read) {
      return Status::Error("column " + QuoteValue(name) +
                           " is a variable programs read (a proxy or a shell's search path): name the column "
                           "otherwise");
    }
  }
  return Status::Ok();
}

Status CheckVolumeSpec(std::string_view spec) {
  const std::string shown = "invalid volume " + QuoteValue(spec);
  std::vector<std::string_view> parts = Split(spec, ':');
  if (parts.size() < 2) {
    return Status::Error(shown +
                         " (expected HOST_PATH:CONTAINER_PATH[:MODE], e.g. /data:/data:ro)");
  }
  if (parts.size() > 3) {
    return Status::Error(shown + ": too many ':' (a path may not contain ':')");
  }
  std::string_view host = parts[0];
  if (host.empty() || host[0] != '/') {
    if (!IsDockerName(host)) {
      return Status::Error(shown + ": host side " + QuoteValue(host) +
                           " must be an absolute path or a volume name");
    }
  } else if (Status s = CheckAbsolutePath(host, "host path"); !s.ok()) {
    return s.Prefixed(shown);
  }
  if (Status s = CheckAbsolutePath(parts[1], "container path"); !s.ok()) {
    return s.Prefixed(shown);
  }
  if (parts.size() == 3) {
    static constexpr std::string_view kModes[] = {
        "ro",     "rw",      "z",        "Z",      "shared",     "rshared", "slave",
        "rslave", "private", "rprivate", "nocopy", "consistent", "cached",  "delegated"};
    bool ro = false, rw = false;
    for (std::string_view mode : Split(parts[2], ',')) {
      bool known = false;
      for (std::string_view m : kModes) known = known || m == mode;
      if (!known) {
        return Status::Error(shown + ": unknown mode " + QuoteValue(mode) +
                             " (expected ro, rw, z, Z, shared, slave, private, nocopy, ...)");
      }
      ro = ro || mode == "ro";
      rw = rw || mode == "rw";
    }
    if (ro && rw) return Status::Error(shown + ": both 'ro' and 'rw'");
  }
  return Status::Ok();
}

Status CheckDeviceSpec(std::string_view spec) {
  const std::string shown = "invalid device " + QuoteValue(spec);
  auto is_permissions = [](std::string_view s) {
    if (s.empty() || s.size() > 3) return false;
    for (char c : s) {
      if (c != 'r' && c != 'w' && c != 'm') return false;
    }
    return true;
  };
  std::vector<std::string_view> parts = Split(spec, ':');
  if (parts.size() > 3) return Status::Error(shown + ": too many ':'");
  // HOST, HOST:PERMISSIONS, HOST:CONTAINER or HOST:CONTAINER:PERMISSIONS.
  const bool has_container = parts.size() == 3 || (parts.size() == 2 && !is_permissions(parts[1]));
  if (Status s = CheckAbsolutePath(parts[0], "host device"); !s.ok()) return s.Prefixed(shown);
  if (has_container) {
    if (Status s = CheckAbsolutePath(parts[1], "container device"); !s.ok()) {
      return s.Prefixed(shown);
    }
  }
  if (parts.size() == 3 && !is_permissions(parts[2])) {
    return Status::Error(shown + ": permissions " + QuoteValue(parts[2]) +
                         " must be made of r, w, m");
  }
  return Status::Ok();
}

Status CheckCapability(std::string_view capability) {
  bool ok = !capability.empty() && !IsDigit(capability[0]) && capability[0] != '_';
  for (char c : capability) ok = ok && ((IsAlnum(c) && !IsDigit(c)) || c == '_');
  if (!ok) {
    return Status::Error("invalid capability " + QuoteValue(capability) +
                         " (e.g. SYS_ADMIN, NET_ADMIN, ALL)");
  }
  return Status::Ok();
}

Status CheckCpus(std::string_view cpus) {
  if (!container::NanoCpus(cpus)) {
    return Status::Error("invalid cpus " + QuoteValue(cpus) + " (expected a number of CPUs above zero, e.g. 4 or 1.5)");
  }
  return Status::Ok();
}

Status CheckIpcMode(std::string_view mode) {
  if (mode == "host" || mode == "private" || mode == "shareable" || mode == "none") {
    return Status::Ok();
  }
  if (mode.substr(0, 10) == "container:" && IsDockerName(mode.substr(10))) return Status::Ok();
  return Status::Error("invalid ipc mode " + QuoteValue(mode) +
                       " (expected host, private, shareable, none or container:NAME)");
}

Status CheckNetworkMode(std::string_view mode) {
  if (mode.substr(0, 10) == "container:" ? IsDockerName(mode.substr(10)) : IsDockerName(mode)) {
    return Status::Ok();
  }
  return Status::Error("invalid network " + QuoteValue(mode) +
                       " (expected host, bridge, none, container:NAME or a network name)");
}

Status CheckGpuDeviceId(std::string_view id) {
  bool ok = !id.empty();
  for (char c : id) ok = ok && (IsAlnum(c) || c == '-');
  if (!ok) {
    return Status::Error("invalid GPU device id " + QuoteValue(id) + " (an index or a GPU UUID)");
  }
  return Status::Ok();
}

std::span<const std::string_view> UlimitNames() {
  static constexpr std::string_view kNames[] = {
      "core",   "cpu",   "data", "fsize",  "locks",  "memlock",    "msgqueue", "nice",
      "nofile", "nproc", "rss",  "rtprio", "rttime", "sigpending", "stack"};
  return kNames;
}

Status CheckUlimitValue(std::string_view value) {
  const std::string shown = "invalid ulimit " + QuoteValue(value) +
                            " (expected a number or SOFT:HARD; -1 means unlimited)";
  std::vector<std::string_view> parts = Split(value, ':');
  if (parts.size() > 2) return Status::Error(shown);
  long long limits[2] = {0, 0};
  for (size_t i = 0; i < parts.size(); ++i) {
    if (!ParseInteger(parts[i], &limits[i]) || limits[i] < -1) return Status::Error(shown);
  }
  if (parts.size() == 2) {
    long long soft = limits[0], hard = limits[1];
    if (hard != -1 && (soft == -1 || soft > hard)) {
      return Status::Error("invalid ulimit " + QuoteValue(value) +
                           ": the soft limit is above the hard limit");
    }
  }
  return Status::Ok();
}

}  // namespace barge::runner
