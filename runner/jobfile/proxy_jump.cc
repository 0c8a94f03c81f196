#include "runner/jobfile/proxy_jump.h"

#include "runner/jobfile/job_values.h"

namespace barge::runner {
Result<SshTarget> ParseSshTarget(std::string_view text, std::string_view what) {
  const std::string shown = std::string(what) + " '" + std::string(text) + "'";
  SshTarget out;
  std::string_view rest = text;
  if (size_t at = rest.rfind('@'); at != std::string_view::npos) {
    if (Status s = CheckUserName(rest.substr(0, at)); !s.ok()) return s.Prefixed(shown);
    out.user = std::string(rest.substr(0, at));
    rest = rest.substr(at + 1);
  }
  std::string_view host = rest, port;
  if (!rest.empty() && rest.front() == '[') {
    size_t close = rest.find(']');
    if (close == std::string_view::npos) return Status::Error(shown + ": '[' without ']'");
    host = rest.substr(1, close - 1);
    std::string_view after = rest.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return Status::Error(shown + ": expected ':PORT' after ']'");
      port = after.substr(1);
      if (port.empty()) return Status::Error(shown + ": empty port");
    }
  } else if (size_t colon = rest.find(':'); colon != std::string_view::npos) {
    if (rest.find(':', colon + 1) != std::string_view::npos) {
      return Status::Error(shown + ": write an IPv6 address in brackets ([fe80::1]:22)");
    }
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
    if (port.empty()) return Status::Error(shown + ": empty port");
  }
  if (host == "local") return Status::Error(shown + ": 'local' is not a " + std::string(what));
  if (Status s = CheckHostAddress(host); !s.ok()) return s.Prefixed(shown);
  out.host = std::string(host);
  if (!port.empty()) {
    long value = 0;
    for (char c : port) {
      if (c < '0' || c > '9' || value > 65535) return Status::Error(shown + ": invalid port '" + std::string(port) + "'");
      value = value * 10 + (c - '0');
    }
    if (value < 1 || value > 65535) {
      return Status::Error(shown + ": port must be from 1 to 65535, got " + std::string(port));
    }
    out.port = static_cast<int>(value);
  }
  return out;
}

namespace {

Status CheckHop(std::string_view hop) {
  if (hop.empty()) return Status::Error("empty jump host (expected [user@]host[:port],...)");
  Result<SshTarget> target = ParseSshTarget(hop, "jump host");
  return target.ok() ? Status::Ok() : target.status();
}

}  // namespace

Result<std::vector<std::string>> ParseProxyJump(std::string_view list) {
  std::vector<std::string> hops;
  for (size_t i = 0; i <= list.size();) {
    size_t j = list.find(',', i);
    if (j == std::string_view::npos) j = list.size();
    std::string_view hop = list.substr(i, j - i);
    while (!hop.empty() && hop.front() == ' ') hop.remove_prefix(1);
    while (!hop.empty() && hop.back() == ' ') hop.remove_suffix(1);
    if (Status s = CheckHop(hop); !s.ok()) return s;
    hops.emplace_back(hop);
    if (hops.size() > kMaxJumpHops) {
      return Status::Error("more than " + std::to_string(kMaxJumpHops) + " jump hosts");
    }
    i = j + 1;
  }
  return hops;
}

}  // namespace barge::runner
