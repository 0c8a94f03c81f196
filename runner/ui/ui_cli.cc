#include "runner/ui/ui_cli.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <signal.h>

#include "runner/console/failure.h"
#include "runner/store/job_store.h"
#include "runner/store/job_lookup.h"
#include "runner/ui/auth.h"
#include "runner/ui/timeline.h"

namespace barge::runner::ui {


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

Status SetLiveHosts(const std::string& job_file, const std::string& hosts, UiOptions* options) {
  if (!job_file.empty() && !hosts.empty()) {
    return Status::Error("--job-file and --hosts: the hosts page asks the hosts of one of them, not both");
  }
  if (!job_file.empty()) {
    std::error_code ec;
    const std::filesystem::path path = std::filesystem::absolute(job_file, ec);
    if (ec || !std::filesystem::is_regular_file(path, ec) || access(path.c_str(), R_OK) != 0) {
      return Status::Error("--job-file " + job_file + ": not a readable file");
    }
    options->hosts_job_file = path.string();
  }
  options->hosts_list = hosts;
  return Status::Ok();
}

namespace {

Status CheckToken(const std::string& token, const std::string& from) {
  if (token.size() < kMinTokenLength) {
    return Status::Error(from + ": the token has " + std::to_string(token.size()) + " characters; at least " +
                         std::to_string(kMinTokenLength) + " are needed (leave it out for a random one)");
  }
  if (token.find_first_of(" \t\r\n") != std::string::npos) return Status::Error(from + ": the token holds whitespace");
  return Status::Ok();
}

}  // namespace

Result<std::string> ResolveToken(const std::string& cli_token, const std::string& token_file) {
  if (!cli_token.empty()) {
    return Status::Error(
        "--token: a token on the command line is readable by every user of this machine (/proc/PID/cmdline); "
        "put it in a file only you can read and pass --token-file FILE, or set BARGE_UI_TOKEN");
  }
  if (!token_file.empty()) {
    const int fd = open(token_file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return Status::Error("--token-file " + token_file + ": " + std::strerror(errno));
    struct stat st {};
    std::string text;
    Status bad;
    if (fstat(fd, &st) != 0) {
      bad = Status::Error("--token-file " + token_file + ": " + std::strerror(errno));
    } else if (!S_ISREG(st.st_mode)) {
      bad = Status::Error("--token-file " + token_file + ": not a regular file");
    } else if (st.st_uid != geteuid()) {
      bad = Status::Error("--token-file " + token_file + ": owned by another user");
    } else if ((st.st_mode & 077) != 0) {
      char mode[8];
      std::snprintf(mode, sizeof mode, "%o", static_cast<unsigned>(st.st_mode & 0777));
      bad = Status::Error("--token-file " + token_file + ": mode " + mode +
                          " lets other users read or change it (chmod 600 " + token_file + ")");
    } else {
      char buf[4096];
      ssize_t n = read(fd, buf, sizeof buf);
      if (n < 0) bad = Status::Error("--token-file " + token_file + ": " + std::strerror(errno));
      if (n > 0) text.assign(buf, static_cast<size_t>(n));
    }
    close(fd);
    if (!bad.ok()) return bad;
    text = text.substr(0, text.find('\n'));
    if (!text.empty() && text.back() == '\r') text.pop_back();
    if (Status s = CheckToken(text, "--token-file " + token_file); !s.ok()) return s;
    return text;
  }
  if (const char* env = std::getenv("BARGE_UI_TOKEN"); env != nullptr && *env != '\0') {
    if (Status s = CheckToken(env, "BARGE_UI_TOKEN"); !s.ok()) return s;
    return std::string(env);
  }
  return std::string();
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
  if (!server.ok()) return SayFailure(err, server.status().message());
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
  if (!found.ok()) return SayFailure(err, found.status().message());
  JobStore& store = *found->store;
  const JobRecord& job = found->job;
  Result<std::vector<NodeRecord>> nodes = store.GetNodes(job.id);
  if (!nodes.ok()) return SayFailure(err, nodes.status().message());
  Result<std::vector<EventRecord>> events = store.GetEvents(job.id);
  if (!events.ok()) return SayFailure(err, events.status().message());
  Result<std::vector<PhaseRecord>> phases = store.GetPhases(job.id);
  if (!phases.ok()) return SayFailure(err, phases.status().message());
  const Timeline t = BuildTimeline(job, *nodes, *phases, *events, WallNow());
  std::fprintf(out, "job %s (%s) %s\n", job.id.c_str(), job.name.c_str(), ToString(job.status));
  std::fputs(TimelineText(t).c_str(), out);
  return 0;
}

}  // namespace barge::runner::ui
