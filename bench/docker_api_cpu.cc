// CPU of one container inspect: through the Engine API (DockerApi over a
// LocalExecutor stream to /var/run/docker.sock, in this process) against
// `docker inspect` (a CLI process per call, started by the same loop).
// Prints a table: CPU ms per call on the client side (this process for the
// API; the CLI children for docker), wall ms per call, and their ratio.
//
// Usage: docker_api_cpu [CALLS=50] [DOCKER_CLI=/usr/bin/docker]
// Makes one container of barge/test:local (label barge.apibench=PID) and
// removes it at the end.
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "container/docker_api.h"
#include "ssh/event_loop.h"
#include "ssh/local_executor.h"

namespace {

using barge::container::ContainerState;
using barge::container::DockerApi;
using barge::container::Reply;
using barge::ssh::CommandCallbacks;
using barge::ssh::EventLoop;
using barge::ssh::ExitStatus;
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
int Run(EventLoop& loop, LocalExecutor& local, const std::string& line, std::string* out) {
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

}  // namespace

int main(int argc, char** argv) {
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
  DockerApi api(&local, "/var/run/docker.sock");

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
