// ParseForwardPorts: "[LOCAL:]REMOTE" into two TCP ports.
#include "runner/jobfile/forward_spec.h"

namespace barge::runner {
namespace {

bool ParsePort(const std::string& s, int* port) {
  if (s.empty() || s.size() > 5) return false;
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  if (v < 1 || v > 65535) return false;
  *port = v;
  return true;
}

}  // namespace

Result<ForwardPorts> ParseForwardPorts(const std::string& text) {
  const Status bad = Status::Error("'" + text +
                                   "' is not [LOCAL:]REMOTE (ports 1-65535, e.g. 8265 or "
                                   "\"16006:6006\")");
  ForwardPorts p;
  const size_t colon = text.find(':');
  if (colon == std::string::npos) {
    if (!ParsePort(text, &p.remote_port)) return bad;
    p.local_port = p.remote_port;
    return p;
  }
  if (!ParsePort(text.substr(0, colon), &p.local_port) ||
      !ParsePort(text.substr(colon + 1), &p.remote_port)) {
    return bad;
  }
  return p;
}

}  // namespace barge::runner
