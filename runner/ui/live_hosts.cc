// The hosts page's live part (live_hosts.h).
#include "runner/ui/live_hosts.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <nlohmann/json.hpp>

#include "base/argv.h"
#include "runner/store/job_store.h"

extern char** environ;

namespace barge::runner::ui {
namespace {

using std::chrono::steady_clock;

// More than any listing of a real fleet; what comes after is dropped.
constexpr size_t kMaxOutput = 16 << 20;

std::string Str(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool Flag(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

struct ChildResult {
  std::string out;
  std::string err;
  int exit_code = -1;      // -1: killed or not waited for
  bool timed_out = false;
  std::string spawn_error;
};

// Runs `args` with `env`, no shell, stdin /dev/null, its stdout and stderr
// read apart, in a session of its own (killed whole at `deadline`), with
// the default signal mask and dispositions (the server's threads block
// SIGINT and SIGTERM).
ChildResult RunChild(const std::vector<std::string>& args, const std::vector<std::string>& env,
                     steady_clock::time_point deadline) {
  ChildResult r;
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) {
    r.spawn_error = std::string("pipe: ") + std::strerror(errno);
    return r;
  }
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    r.spawn_error = std::string("pipe: ") + std::strerror(errno);
    close(out_pipe[0]);
    close(out_pipe[1]);
    return r;
  }
  std::vector<std::string> a = args, e = env;
  std::vector<char*> argv = NullTerminated(a), envp = NullTerminated(e);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int s : {SIGINT, SIGTERM, SIGPIPE, SIGHUP}) sigaddset(&defaults, s);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (rc != 0) {
    close(out_pipe[0]);
    close(err_pipe[0]);
    r.spawn_error = "cannot run " + args[0] + ": " + std::strerror(rc);
    return r;
  }
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* into[2] = {&r.out, &r.err};
  int open_fds = 2;
  while (open_fds > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady_clock::now());
    if (left.count() <= 0) {
      r.timed_out = true;
      break;
    }
    const int n = poll(fds, 2, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[65536];
      const ssize_t got = read(fds[i].fd, buf, sizeof buf);
      if (got > 0) {
        if (into[i]->size() < kMaxOutput) into[i]->append(buf, static_cast<size_t>(got));
        continue;
      }
      if (got < 0 && errno == EINTR) continue;
      close(fds[i].fd);
      fds[i].fd = -1;
      --open_fds;
    }
  }
  for (pollfd& p : fds) {
    if (p.fd >= 0) close(p.fd);
  }
  if (r.timed_out) kill(-pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!r.timed_out && WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  return r;
}

// The last non-empty line of `text`.
std::string LastLine(const std::string& text) {
  size_t end = text.find_last_not_of("\r\n");
  if (end == std::string::npos) return "";
  size_t start = text.rfind('\n', end);
  return text.substr(start == std::string::npos ? 0 : start + 1, end + 1 - (start == std::string::npos ? 0 : start + 1));
}

std::optional<int> JsonInt(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int>();
}

// A host's "record" object, as HostsJson writes it.
LiveRecord ReadLiveRecord(const nlohmann::json& r) {
  LiveRecord out;
  out.out = Flag(r, "out");
  out.counted = JsonInt(r, "counted").value_or(0);
  out.allowed = JsonInt(r, "allowed").value_or(0);
  if (auto w = r.find("window_s"); w != r.end() && w->is_number_integer()) out.window_s = w->get<long long>();
  if (auto g = r.find("gpus_out"); g != r.end() && g->is_array()) {
    for (const nlohmann::json& x : *g) {
      if (x.is_number_integer()) out.gpus_out.push_back(x.get<int>());
    }
  }
  if (auto e = r.find("entries"); e != r.end() && e->is_array()) {
    for (const nlohmann::json& x : *e) {
      if (!x.is_object()) continue;
      out.entries.push_back({Str(x, "at"), Str(x, "kind"), Str(x, "job"), Str(x, "job_name"), Str(x, "user"),
                             Str(x, "machine"), JsonInt(x, "gpu"), Str(x, "detail")});
    }
  }
  return out;
}

}  // namespace

Result<std::vector<LiveHost>> ParseHostsJson(const std::string& text) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_array()) return Status::Error("not the JSON array `barge hosts --json` prints");
  std::vector<LiveHost> out;
  for (const nlohmann::json& h : j) {
    if (!h.is_object()) return Status::Error("a host entry is not an object");
    LiveHost v;
    v.host = Str(h, "host");
    v.error = Str(h, "error");
    if (auto holds = h.find("holds"); holds != h.end() && holds->is_array()) {
      for (const nlohmann::json& x : *holds) {
        if (!x.is_object()) continue;
        LiveHold hold{Str(x, "name"), Str(x, "job"),      Str(x, "job_name"), Str(x, "user"),
                      Str(x, "machine"), Str(x, "gpus"),  Str(x, "since"),    Str(x, "stale_at"),
                      Flag(x, "stale"), Flag(x, "lease"), Flag(x, "ticket"),  std::nullopt};
        if (auto q = x.find("queue_position"); q != x.end() && q->is_number_integer()) hold.queue_position = q->get<int>();
        v.holds.push_back(std::move(hold));
      }
    }
    if (auto record = h.find("record"); record != h.end() && record->is_object()) v.record = ReadLiveRecord(*record);
    if (auto ctrs = h.find("containers"); ctrs != h.end() && ctrs->is_array()) {
      for (const nlohmann::json& x : *ctrs) {
        if (!x.is_object()) continue;
        v.containers.push_back({Str(x, "name"), Str(x, "job"), Str(x, "role"), Str(x, "rank"), Str(x, "status")});
      }
    }
    out.push_back(std::move(v));
  }
  return out;
}

LiveHostsReading LiveHosts::Ask() const {
  std::vector<std::string> args = {source_.barge_binary, "hosts", "--json"};
  if (!source_.job_file.empty()) {
    args.push_back(source_.job_file);
  } else {
    args.push_back("--hosts");
    args.push_back(source_.hosts_list);
  }
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    if (std::strncmp(*e, "BARGE_HOME=", 11) != 0) env.emplace_back(*e);
  }
  env.push_back("BARGE_HOME=" + source_.state_dir);
  LiveHostsReading reading;
  reading.at = WallNow();
  reading.command = "barge hosts --json " + (source_.job_file.empty() ? "--hosts " + source_.hosts_list : source_.job_file);
  ChildResult r = RunChild(args, env, steady_clock::now() + source_.deadline);
  if (!r.spawn_error.empty()) {
    reading.error = r.spawn_error;
    return reading;
  }
  if (r.timed_out) {
    reading.error = "no answer within " + std::to_string(source_.deadline.count()) + " s (stopped)";
    return reading;
  }
  // It prints the hosts that answered and those that did not (exit 125)
  // alike; anything else is its error message.
  Result<std::vector<LiveHost>> hosts = ParseHostsJson(r.out);
  if (!hosts.ok()) {
    const std::string why = LastLine(r.err);
    reading.error = "exit " + std::to_string(r.exit_code) + (why.empty() ? "" : ": " + why);
    return reading;
  }
  reading.hosts = std::move(hosts).value();
  return reading;
}

std::optional<LiveHostsReading> LiveHosts::Read() {
  if (!enabled()) return std::nullopt;
  auto last = [this] {
    std::lock_guard<std::mutex> lock(last_mutex_);
    return last_;
  };
  std::unique_lock<std::mutex> asking(asking_, std::try_to_lock);
  if (!asking.owns_lock()) return last();
  std::optional<LiveHostsReading> now = last();
  if (now && WallNow() - now->at < source_.max_age) return now;
  LiveHostsReading fresh = Ask();
  std::lock_guard<std::mutex> lock(last_mutex_);
  last_ = fresh;
  return fresh;
}

}  // namespace barge::runner::ui
