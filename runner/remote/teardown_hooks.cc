#include "runner/remote/teardown_hooks.h"

#include "cluster/plan.h"
#include "ssh/quote.h"

namespace barge::runner {

Result<std::string> SubstituteHook(const std::string& hook, const cluster::Host& host,
                                   const std::string& job_id, const std::string& job_dir) {
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
      // A var's value comes from the job file or a hosts_command's JSON:
      // pasted into text the user quoted themselves, it could break out.
      return Status::Error("{" + name + "} is not allowed in a teardown hook: write \"$" + kHookVarPrefix +
                           name.substr(10) + "\" (barge sets it for the hook)");
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
  // The hook's variables, set before it (each value quoted once, by
  // barge, as a whole word: never inside the user's own quotes).
  std::string vars = "export BARGE_JOB_ID=" + ssh::ShellQuote(job_id) +
                     " BARGE_HOST_ADDRESS=" + ssh::ShellQuote(host.address) +
                     " BARGE_HOST_INTERNAL_ADDRESS=" + ssh::ShellQuote(cluster::InternalAddress(host));
  if (!job_dir.empty()) vars += " BARGE_JOB_DIR=" + ssh::ShellQuote(job_dir);
  for (const auto& [name, value] : host.vars) vars += " " + std::string(kHookVarPrefix) + name + "=" + ssh::ShellQuote(value);
  return vars + "; " + out;
}

}  // namespace barge::runner
