#include "runner/jobfile/hosts_command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>
#include <vector>

#include "base/lines.h"

namespace barge::runner {
namespace {

// `text` without terminal escape sequences (ESC [ ... letter: the colours
// of terraform's and other CLIs' errors) and other control characters but
// newlines and tabs.
std::string Plain(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == 0x1b) {
      if (i + 1 < text.size() && text[i + 1] == '[') {
        i += 2;
        while (i < text.size() && !((text[i] >= '@' && text[i] <= '~'))) ++i;
      }
      continue;
    }
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) continue;
    out += text[i];
  }
  return out;
}

// The last `n` non-blank lines of `text`, each cut to 300 bytes, joined by
// " | "; the whole at most ~1000 bytes. Escape sequences are left out.
std::string LastLines(const std::string& raw, size_t n) {
  const std::string text = Plain(raw);
  std::vector<std::string> lines;
  for (std::string_view piece : SplitLines(text)) {
    std::string line(piece);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
    if (!line.empty()) lines.push_back(line.size() > 300 ? line.substr(0, 300) + "..." : line);
  }
  if (lines.size() > n) lines.erase(lines.begin(), lines.end() - n);
  std::string out;
  for (const std::string& l : lines) out += (out.empty() ? "" : " | ") + l;
  return out;
}

std::string Named(const std::string& command) {
  std::string shown = command.size() > 200 ? command.substr(0, 200) + "..." : command;
  return "hosts_command `" + shown + "`";
}

bool Blank(const std::string& s) {
  return s.find_first_not_of(" \t\r\n") == std::string::npos;
}

}  // namespace

Result<std::string> RunHostsCommand(const std::string& command, const std::string& dir,
                                    std::chrono::milliseconds timeout) {
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return Status::Error(Named(command) + ": pipe: " + std::strerror(errno));
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    close(out_pipe[0]);
    close(out_pipe[1]);
    return Status::Error(Named(command) + ": pipe: " + std::strerror(errno));
  }
  const pid_t pid = fork();
  if (pid < 0) {
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) close(fd);
    return Status::Error(Named(command) + ": fork: " + std::strerror(errno));
  }
  if (pid == 0) {
    setpgid(0, 0);
    int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    if (!dir.empty() && chdir(dir.c_str()) != 0) {
      const std::string msg = "cannot change to directory " + dir + ": " + std::strerror(errno) + "\n";
      (void)!write(STDERR_FILENO, msg.data(), msg.size());
      _exit(127);
    }
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  setpgid(pid, pid);  // both sides, so that the group exists before a kill
  close(out_pipe[1]);
  close(err_pipe[1]);

  std::string out, err;
  bool too_much = false, timed_out = false;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  int open_fds = 2;
  char buf[65536];
  while (open_fds > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    int n = poll(fds, 2, static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (n < 0 && errno != EINTR) break;
    for (pollfd& p : fds) {
      if (p.fd < 0 || !(p.revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t got = read(p.fd, buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        close(p.fd);
        p.fd = -1;
        --open_fds;
        continue;
      }
      std::string& into = p.fd == out_pipe[0] ? out : err;
      if (&into == &err && err.size() > (64u << 10)) err.erase(0, err.size() - (32u << 10));
      into.append(buf, static_cast<size_t>(got));
      if (out.size() > kMaxHostsCommandOutput) too_much = true;
    }
    if (too_much) break;
  }
  for (pollfd& p : fds) {
    if (p.fd >= 0) close(p.fd);
  }
  if (timed_out || too_much) kill(-pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  const std::string tail = LastLines(err, 5);
  const std::string said = tail.empty() ? " (its stderr is empty)" : "; its stderr ends: " + tail;
  if (timed_out) {
    return Status::Error(Named(command) + " did not finish within " +
                         std::to_string(std::chrono::duration_cast<std::chrono::seconds>(timeout).count()) +
                         " s and was killed" + said);
  }
  if (too_much) {
    return Status::Error(Named(command) + " printed more than " +
                         std::to_string(kMaxHostsCommandOutput) + " bytes and was killed");
  }
  if (WIFSIGNALED(status)) {
    return Status::Error(Named(command) + " was killed by signal " +
                         std::to_string(WTERMSIG(status)) + said);
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Status::Error(Named(command) + " failed with exit code " +
                         std::to_string(WEXITSTATUS(status)) + said);
  }
  if (Blank(out)) {
    return Status::Error(Named(command) + " printed no hosts (exit code 0, empty output" +
                         (tail.empty() ? std::string(")") : "; its stderr ends: " + tail + ")"));
  }
  return out;
}

std::string HostsCommandOutputAsYaml(const std::string& output) {
  const size_t first = output.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && output[first] == '[') return output;
  std::string yaml;
  size_t start = 0;
  while (start < output.size()) {
    size_t end = output.find('\n', start);
    if (end == std::string::npos) end = output.size();
    std::string line = output.substr(start, end - start);
    const size_t a = line.find_first_not_of(" \t\r");
    const size_t b = line.find_last_not_of(" \t\r");
    line = a == std::string::npos ? "" : line.substr(a, b - a + 1);
    if (!line.empty() && line[0] != '#') {
      std::string quoted = "\"";
      for (char ch : line) {
        const unsigned char u = static_cast<unsigned char>(ch);
        if (ch == '"' || ch == '\\') {
          quoted += '\\';
          quoted += ch;
        } else if (u < 0x20 || u == 0x7f) {
          static const char kHex[] = "0123456789abcdef";
          quoted += "\\x";
          quoted += kHex[u >> 4];
          quoted += kHex[u & 15];
        } else {
          quoted += ch;
        }
      }
      yaml += "- " + quoted + "\"";
    }
    yaml += "\n";
    start = end + 1;
  }
  return yaml;
}

}  // namespace barge::runner
