// CPU of one container inspect: through the Engine API (DockerApi over a
// LocalExecutor stream to /var/run/docker.sock, in this process) against
// `docker inspect` (a CLI process per call, started by the same loop).
// Prints a table: CPU ms per call on the client side (this process for the
// API; the CLI children for docker), wall ms per call, and their ratio.
//
// Usage: docker_api_cpu [CALLS=50] [DOCKER_CLI=/usr/bin/docker]
//        docker_api_cpu --bed [CALLS=100] [DOCKER_CLI=/usr/bin/docker]
// Makes one container of barge/test:local (label barge.apibench=PID) and
// removes it at the end.
//
// --bed: the same over SSH to the test bed's first namespace host
// (tests/bed/bed.sh must be up): the API through a direct-streamlocal
// channel of one session, against `docker inspect` run in an exec channel
// of that session (the host's docker CLI, Debian's 20.10). Besides this
// process's CPU it reports the host's: the sshd session process serving
// the connection (its own time plus its reaped children's, i.e. the shells
// and CLI processes) and the host's dockerd, from /proc (10 ms ticks).
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <functional>
#include <memory>
#include <string>

#include <fstream>
#include <sstream>
#include <vector>

#include "container/docker_api.h"
#include "runner/remote/engine_streams.h"
#include "ssh/event_loop.h"
#include "ssh/local_executor.h"
#include "ssh/session.h"
#include "ssh/ssh_executor.h"
#include "tests/support/bed_env.h"

namespace {

using barge::container::ContainerState;
using barge::container::DockerApi;
using barge::container::Reply;
using barge::ssh::CommandCallbacks;
using barge::ssh::EventLoop;
using barge::ssh::ExitStatus;
using barge::ssh::Executor;
using barge::ssh::LocalExecutor;

double CpuMs(int who) {
  rusage u{};
  getrusage(who, &u);
  return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 +
         (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
}

double NowMs() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Runs a command line to its end on `local`; returns its exit code and stdout.
int Run(EventLoop& loop, Executor& local, const std::string& line, std::string* out) {
  std::optional<int> code;
  CommandCallbacks cb;
  cb.on_stdout = [&](std::string_view b) {
    if (out) out->append(b);
  };
  cb.on_exit = [&](const ExitStatus& e) { code = e.known() ? e.code : -1; };
  auto c = local.Start(line, std::move(cb));
  if (!c.ok()) return -1;
  while (!code) loop.Poll(std::chrono::milliseconds(100));
  return *code;
}

// utime+stime (self) and cutime+cstime (reaped children) of `pid`, in ms.
std::pair<double, double> ProcCpuMs(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream fields(stat.substr(stat.rfind(')') + 2));
  std::vector<long long> f;
  for (std::string x; fields >> x;) f.push_back(std::atoll(x.c_str()));
  // After the name: state(0) ... utime(11) stime(12) cutime(13) cstime(14).
  if (f.size() < 15) return {0, 0};
  const double tick = 1000.0 / sysconf(_SC_CLK_TCK);
  return {(f[11] + f[12]) * tick, (f[13] + f[14]) * tick};
}

int BedMain(int calls, const std::string& cli) {
  const barge::testing::Bed& bed = barge::testing::GetBed();
  const barge::testing::BedHost& h = bed.hosts.at(0);
  barge::ssh::SessionOptions o;
  o.host = h.address;
  o.port = h.port;
  o.user = bed.user;
  o.identity_file = bed.key;
  o.known_hosts_file = bed.known_hosts;
  o.config_file = "/dev/null";
  auto session = barge::ssh::Session::Connect(o);
  if (!session.ok()) {
    std::fprintf(stderr, "%s\n", session.status().message().c_str());
    return 1;
  }
  EventLoop loop;
  barge::ssh::SshExecutor ssh(std::move(session).value(), &loop);
  std::string out;
  Run(loop, ssh, "echo $PPID", &out);
  const int sshd = std::atoi(out.c_str());
  const int dockerd = std::atoi(
      std::string((std::istreambuf_iterator<char>(
                      *std::make_unique<std::ifstream>(bed.dir + "/" + h.name + "/dockerd.pid"))),
                  std::istreambuf_iterator<char>())
          .c_str());
  const std::string name = "barge-apibench-" + std::to_string(getpid());
  if (Run(loop, ssh,
          "docker run -d --name " + name + " --label barge.apibench=" + std::to_string(getpid()) +
              " " + bed.image + " sleep 600 >/dev/null",
          nullptr) != 0) {
    std::fprintf(stderr, "cannot start a container on %s\n", h.name.c_str());
    return 1;
  }
  barge::runner::EngineStreams streams(&ssh);
  DockerApi api(&streams, h.docker_host.substr(std::string("unix://").size()));
  Run(loop, ssh, "docker inspect " + name + " >/dev/null", nullptr);  // warm up

  struct Row {
    double self, sshd, dockerd, wall;
  };
  auto measure = [&](const std::function<bool()>& one) {
    int failures = 0;
    const double c0 = CpuMs(RUSAGE_SELF), w0 = NowMs();
    auto s0 = ProcCpuMs(sshd);
    const double d0 = ProcCpuMs(dockerd).first;
    for (int i = 0; i < calls; ++i) failures += one() ? 0 : 1;
    auto s1 = ProcCpuMs(sshd);
    Row r{(CpuMs(RUSAGE_SELF) - c0) / calls,
          (s1.first + s1.second - s0.first - s0.second) / calls,
          (ProcCpuMs(dockerd).first - d0) / calls, (NowMs() - w0) / calls};
    if (failures) std::fprintf(stderr, "%d calls failed\n", failures);
    return r;
  };
  Row api_row = measure([&] {
    std::optional<Reply<ContainerState>> got;
    auto call = api.InspectContainer(name, [&](Reply<ContainerState> r) { got = std::move(r); });
    if (!call.ok()) return false;
    while (!got) loop.Poll(std::chrono::milliseconds(100));
    return got->ok() && got->value->running;
  });
  Row cli_row = measure([&] {
    std::string json;
    return Run(loop, ssh, "exec " + cli + " inspect " + name, &json) == 0 && json.size() > 100;
  });
  Run(loop, ssh, "docker rm -f " + name + " >/dev/null", nullptr);
  std::printf("one container inspect on bed host %s over one SSH session, %d calls each, CLI %s\n",
              h.name.c_str(), calls, cli.c_str());
  std::printf("%-30s %10s %10s %10s %10s %10s\n", "path (ms per call)", "barge cpu", "sshd+kids",
              "dockerd", "host cpu", "wall");
  for (const auto& [label, r] :
       {std::pair<const char*, Row>{"engine API (streamlocal)", api_row},
        std::pair<const char*, Row>{"docker inspect (exec)", cli_row}}) {
    std::printf("%-30s %10.2f %10.2f %10.2f %10.2f %10.2f\n", label, r.self, r.sshd, r.dockerd,
                r.sshd + r.dockerd, r.wall);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--bed") {
    return BedMain(argc > 2 ? std::atoi(argv[2]) : 100, argc > 3 ? argv[3] : "/usr/bin/docker");
  }
  const int calls = argc > 1 ? std::atoi(argv[1]) : 50;
  const std::string cli = argc > 2 ? argv[2] : "/usr/bin/docker";
  EventLoop loop;
  LocalExecutor local(&loop);
  const std::string name = "barge-apibench-" + std::to_string(getpid());
  if (Run(loop, local,
          cli + " run -d --name " + name + " --label barge.apibench=" + std::to_string(getpid()) +
              " barge/test:local sleep 600 >/dev/null",
          nullptr) != 0) {
    std::fprintf(stderr, "cannot start a container of barge/test:local with %s\n", cli.c_str());
    return 1;
  }
  barge::runner::EngineStreams streams(&local);
  DockerApi api(&streams, "/var/run/docker.sock");

  // Warm up both paths once.
  std::string ignored;
  Run(loop, local, cli + " inspect " + name + " >/dev/null", nullptr);

  int failures = 0;
  double cpu0 = CpuMs(RUSAGE_SELF), wall0 = NowMs();
  for (int i = 0; i < calls; ++i) {
    std::optional<Reply<ContainerState>> got;
    auto call = api.InspectContainer(name, [&](Reply<ContainerState> r) { got = std::move(r); });
    if (!call.ok()) return 1;
    while (!got) loop.Poll(std::chrono::milliseconds(100));
    if (!got->ok() || !got->value->running) ++failures;
  }
  const double api_cpu = (CpuMs(RUSAGE_SELF) - cpu0) / calls;
  const double api_wall = (NowMs() - wall0) / calls;

  double child0 = CpuMs(RUSAGE_CHILDREN);
  wall0 = NowMs();
  for (int i = 0; i < calls; ++i) {
    if (Run(loop, local, "exec " + cli + " inspect " + name + " >/dev/null", nullptr) != 0) {
      ++failures;
    }
  }
  const double cli_cpu = (CpuMs(RUSAGE_CHILDREN) - child0) / calls;
  const double cli_wall = (NowMs() - wall0) / calls;

  Run(loop, local, cli + " rm -f " + name + " >/dev/null", nullptr);
  std::printf("one container inspect, %d calls each, %s\n", calls, cli.c_str());
  std::printf("%-28s %12s %12s\n", "path", "cpu ms/call", "wall ms/call");
  std::printf("%-28s %12.2f %12.2f\n", "engine API (DockerApi)", api_cpu, api_wall);
  std::printf("%-28s %12.2f %12.2f\n", "docker inspect (CLI)", cli_cpu, cli_wall);
  std::printf("CLI/API cpu ratio: %.0fx\n", api_cpu > 0 ? cli_cpu / api_cpu : 0.0);
  if (failures) std::fprintf(stderr, "%d calls failed\n", failures);
  return failures ? 1 : 0;
}
