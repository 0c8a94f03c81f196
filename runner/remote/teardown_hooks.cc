#include "runner/remote/teardown_hooks.h"

#include "cluster/plan.h"
#include "ssh/quote.h"

namespace barge::runner {

Result<std::string> SubstituteHook(const std::string& hook, const cluster::Host& host,
                                   const std::string& job_id) {
  std::string out;
  size_t pos = 0;
  while (pos < hook.size()) {
    size_t open = hook.find('{', pos);
    if (open == std::string::npos) {
      out += hook.substr(pos);
      break;
    }
    size_t close = hook.find('}', open);
    if (close == std::string::npos) {
      out += hook.substr(pos);
      break;
    }
    out += hook.substr(pos, open - pos);
    const std::string name = hook.substr(open + 1, close - open - 1);
    std::string value;
    if (name == "host.address") {
      value = host.address;
    } else if (name == "host.internal_address") {
      value = cluster::InternalAddress(host);
    } else if (name == "job.id") {
      value = job_id;
    } else if (name.rfind("host.vars.", 0) == 0) {
      auto it = host.vars.find(name.substr(10));
      if (it == host.vars.end()) {
        return Status::Error("{" + name + "} is not set for host " + host.address);
      }
      value = it->second;
    } else if (name.find_first_of(" \t\n;$") != std::string::npos || name.empty()) {
      // Not a placeholder (e.g. a shell brace group): keep the text.
      out += hook.substr(open, close - open + 1);
      pos = close + 1;
      continue;
    } else {
      return Status::Error("unknown placeholder {" + name + "} in teardown hook");
    }
    out += ssh::ShellQuote(value);
    pos = close + 1;
  }
  return out;
}

}  // namespace barge::runner
