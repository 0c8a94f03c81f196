// bench/fanout: SSH fan-out of one command to N hosts, the way barge does it
// (parallel connects, then one exec channel per host, all channels driven by
// one event loop), against pdsh -R ssh doing the same in the same run.
//
//   bench/fanout.sh [RUNS]   (brings up a 64-host sshd-only bed and runs this)
//   build/bench/fanout BED_ENV SIZES... RUNS
//
// Prints, per size, the median wall time of each and the ratio barge/pdsh.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "ssh/event_loop.h"
#include "ssh/session.h"
#include "ssh/connect_all.h"
#include "ssh/ssh_executor.h"

using Clock = std::chrono::steady_clock;

namespace {

std::map<std::string, std::string> ReadEnv(const std::string& path) {
  std::map<std::string, std::string> env;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    auto eq = line.find('=');
    if (line.empty() || line[0] == '#' || eq == std::string::npos) continue;
    std::string v = line.substr(eq + 1);
    if (v.size() >= 2 && v.front() == '"') v = v.substr(1, v.size() - 2);
    env[line.substr(0, eq)] = v;
  }
  return env;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// barge's way: returns seconds, or -1 on any failure.
double BargeFanout(const std::vector<std::string>& hosts, const std::string& user,
                   const std::string& key, const std::string& known_hosts) {
  auto start = Clock::now();
  std::vector<barge::ssh::SessionOptions> opts;
  for (const auto& h : hosts) {
    barge::ssh::SessionOptions o;
    o.host = h;
    o.user = user;
    o.identity_file = key;
    o.known_hosts_file = known_hosts;
    opts.push_back(o);
  }
  barge::ssh::EventLoop loop;
  auto sessions = barge::ssh::ConnectAll(opts, 32, &loop);
  std::vector<std::unique_ptr<barge::ssh::SshExecutor>> execs;
  for (auto& s : sessions) {
    if (!s.ok()) {
      std::fprintf(stderr, "fanout: %s\n", s.status().message().c_str());
      return -1;
    }
    execs.push_back(std::make_unique<barge::ssh::SshExecutor>(std::move(s).value(), &loop));
  }
  int pending = static_cast<int>(execs.size()), failed = 0;
  std::vector<std::unique_ptr<barge::ssh::Command>> cmds;
  for (auto& e : execs) {
    barge::ssh::CommandCallbacks cb;
    cb.on_exit = [&](const barge::ssh::ExitStatus& st) {
      --pending;
      if (!st.known() || st.code != 0) ++failed;
    };
    auto cmd = e->Start("true", std::move(cb));
    if (!cmd.ok()) return -1;
    (*cmd)->CloseStdin();
    cmds.push_back(std::move(cmd).value());
  }
  while (pending > 0 && Clock::now() - start < std::chrono::seconds(120)) {
    loop.Poll(std::chrono::milliseconds(100));
  }
  double secs = std::chrono::duration<double>(Clock::now() - start).count();
  cmds.clear();
  execs.clear();
  return pending == 0 && failed == 0 ? secs : -1;
}

double PdshFanout(const std::vector<std::string>& hosts, const std::string& user,
                  const std::string& key, const std::string& known_hosts) {
  std::string list;
  for (const auto& h : hosts) list += (list.empty() ? "" : ",") + h;
  std::string cmd = "PDSH_RCMD_TYPE=ssh PDSH_SSH_ARGS_APPEND='-i " + key +
                    " -o UserKnownHostsFile=" + known_hosts +
                    " -o StrictHostKeyChecking=yes -o BatchMode=yes' pdsh -f 64 -l " + user +
                    " -w " + list + " true";
  auto start = Clock::now();
  int rc = std::system(cmd.c_str());
  double secs = std::chrono::duration<double>(Clock::now() - start).count();
  return rc == 0 ? secs : -1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: fanout BED_ENV SIZE... RUNS\n");
    return 2;
  }
  auto env = ReadEnv(argv[1]);
  int runs = std::atoi(argv[argc - 1]);
  std::vector<std::string> all;
  std::istringstream names(env["BED_HOSTS"]);
  for (std::string n; names >> n;) all.push_back(env["BED_HOST_" + n + "_ADDR"]);
  std::printf("%-6s %-12s %-12s %s\n", "hosts", "barge (s)", "pdsh (s)", "barge/pdsh");
  for (int a = 2; a < argc - 1; ++a) {
    size_t n = std::strtoul(argv[a], nullptr, 10);
    if (n > all.size()) {
      std::fprintf(stderr, "fanout: the bed has only %zu hosts\n", all.size());
      return 1;
    }
    std::vector<std::string> hosts(all.begin(), all.begin() + n);
    std::vector<double> b, p;
    for (int r = 0; r < runs; ++r) {  // interleaved, so drift hits both alike
      double tb = BargeFanout(hosts, env["BED_SSH_USER"], env["BED_SSH_KEY"], env["BED_KNOWN_HOSTS"]);
      double tp = PdshFanout(hosts, env["BED_SSH_USER"], env["BED_SSH_KEY"], env["BED_KNOWN_HOSTS"]);
      if (tb < 0 || tp < 0) {
        std::fprintf(stderr, "fanout: a run failed at %zu hosts\n", n);
        return 1;
      }
      b.push_back(tb);
      p.push_back(tp);
    }
    std::printf("%-6zu %-12.3f %-12.3f %.2f\n", n, Median(b), Median(p), Median(b) / Median(p));
  }
  return 0;
}
