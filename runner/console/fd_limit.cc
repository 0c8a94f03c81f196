#include "runner/console/fd_limit.h"

#include <sys/resource.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

namespace barge::runner {
namespace {

constexpr uint64_t kBaseFiles = 64;

uint64_t FromRlim(rlim_t v) { return v == RLIM_INFINITY ? UINT64_MAX : static_cast<uint64_t>(v); }

std::string Show(uint64_t v) { return v == UINT64_MAX ? "unlimited" : std::to_string(v); }

}  // namespace

Result<OpenFileLimit> RaiseOpenFileLimit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
    return Status::Error(std::string("getrlimit(RLIMIT_NOFILE): ") + std::strerror(errno));
  }
  rlim_t target = rl.rlim_max;
  if (target == RLIM_INFINITY) {
    // The kernel refuses a soft limit above fs.nr_open.
    std::ifstream nr_open("/proc/sys/fs/nr_open");
    unsigned long long n = 0;
    target = (nr_open >> n) && n > 0 ? static_cast<rlim_t>(n) : static_cast<rlim_t>(1048576);
  }
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < target) {
    rlimit raised = rl;
    raised.rlim_cur = target;
    if (setrlimit(RLIMIT_NOFILE, &raised) != 0) {
      return Status::Error("cannot raise the open-file limit from " + Show(FromRlim(rl.rlim_cur)) +
                           " to " + Show(FromRlim(target)) + ": " + std::strerror(errno));
    }
    rl = raised;
  }
  return OpenFileLimit{FromRlim(rl.rlim_cur), FromRlim(rl.rlim_max)};
}

uint64_t OpenFilesNeeded(int ssh_hosts, int nodes) {
  const uint64_t per_job = 2 * static_cast<uint64_t>(ssh_hosts > 0 ? ssh_hosts : 0) +
                           static_cast<uint64_t>(nodes > 0 ? nodes : 0);
  return kBaseFiles + per_job + (per_job + 3) / 4;
}

Status CheckOpenFileLimit(int ssh_hosts, int nodes, const OpenFileLimit& limit) {
  const uint64_t need = OpenFilesNeeded(ssh_hosts, nodes);
  if (limit.soft >= need) return Status::Ok();
  return Status::Error(
      "barge needs about " + std::to_string(need) + " open files for " + std::to_string(ssh_hosts) +
      " hosts and " + std::to_string(nodes) + " nodes; the open-file limit is " + Show(limit.soft) +
      " (hard limit " + Show(limit.hard) + "): raise the hard limit (as root: `ulimit -Hn " +
      std::to_string(need) + "` in the shell that starts barge, or `nofile` in "
      "/etc/security/limits.conf, or LimitNOFILE= for a systemd unit); nothing was started");
}

}  // namespace barge::runner
