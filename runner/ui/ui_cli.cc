#include "runner/ui/ui_cli.h"

#include <signal.h>

#include "runner/job_store.h"
#include "runner/jobs_cli.h"
#include "runner/ui/auth.h"
#include "runner/ui/timeline.h"

namespace barge::runner::ui {

namespace {
constexpr int kExitError = 125;
int FailCli(std::FILE* err, const std::string& message) {
  std::fprintf(err, "barge: %s\n", message.c_str());
  return kExitError;
}
}  // namespace

Status ParseListen(const std::string& text, UiOptions* options) {
  const Status bad = Status::Error("--listen: '" + text +
                                   "' is not HOST:PORT (e.g. 127.0.0.1:8765 or [::1]:8765)");
  std::string host;
  std::string port;
  if (!text.empty() && text[0] == '[') {
    const size_t close = text.find("]:");
    if (close == std::string::npos) return bad;
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string::npos || text.find(':') != colon) return bad;
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  if (host.empty() || port.empty() || port.size() > 5) return bad;
  for (char c : port) {
    if (c < '0' || c > '9') return bad;
  }
  const int p = std::stoi(port);
  if (p > 65535) return bad;
  options->listen_host = host;
  options->port = p;
  return Status::Ok();
}

int UiCommand(const UiOptions& options, std::FILE* out, std::FILE* err) {
  // Block the stop signals before any thread starts, so that every server
  // thread inherits the mask and only sigwait below takes them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  Result<std::unique_ptr<UiServer>> server = UiServer::Start(options);
  if (!server.ok()) return FailCli(err, server.status().message());
  if (!IsLoopback(options.listen_host)) {
    std::fprintf(err,
                 "barge: warning: the dashboard listens on %s, not loopback: anyone who can "
                 "reach it and learns the token can stop jobs\n",
                 options.listen_host.c_str());
  }
  std::fprintf(out, "barge ui: %s\n", (*server)->Url().c_str());
  std::fflush(out);
  int sig = 0;
  sigwait(&stop_signals, &sig);
  (*server)->Stop();
  return 0;
}

int TimelineCommand(const std::string& state_dir, const std::string& job_text, std::FILE* out,
                    std::FILE* err) {
  Result<FoundJob> found = FindJob(state_dir, job_text);
  if (!found.ok()) return FailCli(err, found.status().message());
  JobStore& store = *found->store;
  const JobRecord& job = found->job;
  Result<std::vector<NodeRecord>> nodes = store.GetNodes(job.id);
  if (!nodes.ok()) return FailCli(err, nodes.status().message());
  Result<std::vector<EventRecord>> events = store.GetEvents(job.id);
  if (!events.ok()) return FailCli(err, events.status().message());
  Result<std::vector<PhaseRecord>> phases = store.GetPhases(job.id);
  if (!phases.ok()) return FailCli(err, phases.status().message());
  const Timeline t = BuildTimeline(job, *nodes, *phases, *events, WallNow());
  std::fprintf(out, "job %s (%s) %s\n", job.id.c_str(), job.name.c_str(), ToString(job.status));
  std::fputs(TimelineText(t).c_str(), out);
  return 0;
}

}  // namespace barge::runner::ui
