// window: looking into a running job, HostVerbs' `barge forward`, `barge
// top` and `barge exec -i/-it` (host_verbs.h), each of which connects to the
// job's hosts itself (its own sessions, its own loop), so nothing here can
// block a running job's controller.
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <set>

#include "runner/console/exit_codes.h"
#include "runner/console/terminal.h"
#include "runner/console/time_format.h"
#include "runner/controller/host_verbs.h"
#include "runner/controller/job_state.h"
#include "runner/remote/stats.h"
#include "ssh/interactive_channel.h"
#include "ssh/local_executor.h"
#include "ssh/quote.h"

namespace barge::runner::internal {
namespace {

volatile std::sig_atomic_t g_winch = 0;
ssh::EventLoop* g_winch_loop = nullptr;
void OnWinch(int) {
  g_winch = 1;
  if (g_winch_loop) g_winch_loop->Wakeup();
}

}  // namespace

int HostVerbs::Forward(const std::vector<ForwardSpec>& forwards) {
  if (!Prepare(/*with_store=*/false)) return kExitBargeFailure;
  // The ports first: a busy one is reported before anything connects.
  if (Status s = forwarding_.Bind(forwards, "forward"); !s.ok()) {
    Say(s.message());
    return kExitBargeFailure;
  }
  std::set<size_t> used;
  for (const ForwardSpec& f : forwards) used.insert(plan_.nodes[f.rank].host_index);
  planner_.UseHosts({used.begin(), used.end()});
  if (Status s = connections_.Connect(); !s.ok()) {
    Say(s.message());
    return kExitBargeFailure;
  }
  CommandGroup group(&ctx_.loop, &ctx_.redact);
  bool failed = false;
  forwarding_.Serve(group, [&](const Status& why) {
    failed = true;
    Say(why.message());
  });
  RunUntil([&] { return failed || ctx_.interrupts > 0; }, Clock::time_point::max());
  forwarding_.Close();
  return failed ? kExitBargeFailure : 0;
}

int HostVerbs::ExecInteractive(int rank, const std::vector<std::string>& argv, bool tty) {
  if (!Prepare(/*with_store=*/false)) return kExitBargeFailure;
  if (tty && !isatty(STDIN_FILENO)) {
    Say("exec -t needs a terminal on stdin (use -i alone to pass a pipe or a file)");
    return kExitBargeFailure;
  }
  HostState* connected = ConnectToNode(rank);
  if (connected == nullptr) return kExitBargeFailure;
  const cluster::NodePlan& node = plan_.nodes[rank];
  HostState& host = *connected;
  const std::string line = host.docker->ExecInteractive(node.container.name, argv, tty);
  if (host.exec->runs_here()) {
    // The local engine: docker runs here, on this terminal (its own pty
    // handling, resizes and ^C included); barge waits for it.
    std::fflush(nullptr);
    pid_t pid = fork();
    if (pid < 0) {
      Say(std::string("fork: ") + std::strerror(errno));
      return kExitBargeFailure;
    }
    if (pid == 0) {
      std::signal(SIGINT, SIG_DFL);
      std::signal(SIGPIPE, SIG_DFL);
      execl("/bin/sh", "sh", "-c", line.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    // The child owns the terminal's ^C; barge only waits.
    struct sigaction ignore {}, old_int {}, old_quit {};
    ignore.sa_handler = SIG_IGN;
    sigaction(SIGINT, &ignore, &old_int);
    sigaction(SIGQUIT, &ignore, &old_quit);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGQUIT, &old_quit, nullptr);
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return kExitBargeFailure;
  }

  std::optional<ssh::PtySize> pty;
  if (tty) {
    ssh::PtySize size;
    const char* term = std::getenv("TERM");
    if (term && *term) size.term = term;
    TerminalSize ts = SizeOf(STDIN_FILENO);
    size.cols = ts.cols;
    size.rows = ts.rows;
    pty = size;
  }
  Result<std::unique_ptr<ssh::InteractiveChannel>> channel = ssh::InteractiveChannel::Start(
      &ctx_.loop, host.exec.get(), line, pty, STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO);
  if (!channel.ok()) {
    Say(channel.status().message());
    return kExitBargeFailure;
  }
  ssh::InteractiveChannel& ch = **channel;
  struct sigaction winch {}, old_winch {};
  if (tty) {
    g_winch_loop = &ctx_.loop;
    winch.sa_handler = OnWinch;
    sigaction(SIGWINCH, &winch, &old_winch);
  }
  {
    std::optional<RawTerminal> raw;
    if (tty) raw.emplace(STDIN_FILENO);
    RunUntil(
        [&] {
          if (g_winch) {
            g_winch = 0;
            TerminalSize ts = SizeOf(STDIN_FILENO);
            ch.Resize(ts.cols, ts.rows);
          }
          // Without a pty, ^C reaches barge: the command's channel is closed.
          return ch.done() || ctx_.interrupts > 0;
        },
        Clock::time_point::max());
  }
  if (tty) {
    sigaction(SIGWINCH, &old_winch, nullptr);
    g_winch_loop = nullptr;
  }
  if (!ch.done()) return kExitInterrupted;
  if (!ch.exit().known()) {
    Say(ch.exit().error);
    return kExitBargeFailure;
  }
  return ch.exit().code;
}

int HostVerbs::Top(const TopOptions& top) {
  if (!Prepare(/*with_store=*/false)) return kExitBargeFailure;
  if (Status s = connections_.Connect(); !s.ok()) {
    Say(s.message());
    return kExitBargeFailure;
  }
  const bool clear_screen = !top.once && !top.json && isatty(STDOUT_FILENO);
  for (;;) {
    const Clock::time_point began = Now();
    // One `docker stats --no-stream` and one nvidia-smi query per host, all
    // hosts at once.
    struct HostSample {
      Outcome stats;
      Outcome gpus;
    };
    std::map<size_t, HostSample> by_host;
    CommandGroup group(&ctx_.loop, &ctx_.redact);
    for (auto& [h, host] : hosts_.by_index) {
      if (!host->exec) continue;
      std::vector<std::string> names;
      for (const auto& n : plan_.nodes) {
        if (n.host_index == h) names.push_back(n.container.name);
      }
      if (names.empty()) continue;
      HostSample* sample = &by_host[h];
      group.Run(*host->exec, Bounded(host->docker->Stats(names), seconds(20)),
                [sample](const Outcome& o) { sample->stats = o; });
      group.Run(*host->exec, Bounded(GpuStatsLine(), seconds(20)),
                [sample](const Outcome& o) { sample->gpus = o; });
    }
    RunUntil([&] { return group.idle() || ctx_.interrupts > 0; }, Now() + seconds(30));
    if (ctx_.interrupts > 0) return 0;
    group.Cancel();

    std::vector<NodeSample> samples;
    for (const auto& n : plan_.nodes) {
      NodeSample s;
      s.rank = n.rank;
      s.role = n.role;
      s.host = HostName(plan_.hosts[n.host_index]);
      s.container = n.container.name;
      s.host_network = n.container.options.network && *n.container.options.network == "host";
      auto it = by_host.find(n.host_index);
      if (it == by_host.end()) {
        s.error = "not connected";
        samples.push_back(s);
        continue;
      }
      const HostSample& hs = it->second;
      Result<std::vector<ContainerStats>> stats =
          hs.stats.ok() ? ParseDockerStats(hs.stats.out)
                        : Result<std::vector<ContainerStats>>(Status::Error(hs.stats.Reason()));
      if (!stats.ok()) {
        s.error = stats.status().message();
      } else {
        for (const auto& c : *stats) {
          if (c.name == n.container.name) s.stats = c;
        }
        if (!s.stats) s.error = "not running";
      }
      if (hs.gpus.ok()) {
        Result<std::vector<GpuStats>> gpus = ParseGpuStats(hs.gpus.out);
        if (gpus.ok()) {
          s.host_has_nvidia_smi = !gpus->empty();
          s.gpus = NodeGpus(n.container.options.gpus, *gpus);
        }
      }
      samples.push_back(s);
    }
    if (top.json) {
      std::printf("%s\n", TopJson(plan_.job_id, IsoUtc(WallNow()), samples).dump(2).c_str());
    } else {
      if (clear_screen) std::printf("\033[H\033[2J");
      std::printf("%s", RenderTopTable(plan_.job_id, samples).c_str());
    }
    std::fflush(stdout);
    if (top.once) return 0;
    RunUntil([&] { return ctx_.interrupts > 0; }, began + top.every);
    if (ctx_.interrupts > 0) return 0;
  }
}

}  // namespace barge::runner::internal
