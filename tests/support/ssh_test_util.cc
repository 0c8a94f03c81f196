#include "tests/support/ssh_test_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

namespace barge::ssh::testing {

bool PollUntil(EventLoop& loop, const std::function<bool()>& done,
               std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    loop.Poll(std::chrono::milliseconds(100));
  }
  return true;
}

CommandCallbacks CollectInto(std::shared_ptr<Collected> into) {
  CommandCallbacks cb;
  cb.on_stdout = [into](std::string_view d) { into->out.append(d); };
  cb.on_stderr = [into](std::string_view d) { into->err.append(d); };
  cb.on_exit = [into](const ExitStatus& e) {
    into->exit = e;
    into->bytes_at_exit = into->out.size() + into->err.size();
    ++into->exit_calls;
  };
  return cb;
}

Collected RunToEnd(EventLoop& loop, Executor& executor, const std::string& command_line,
                   const std::string& stdin_data, std::chrono::milliseconds limit) {
  auto result = std::make_shared<Collected>();
  auto command = executor.Start(command_line, CollectInto(result));
  if (!command.ok()) {
    ADD_FAILURE() << "Start failed: " << command.status().message();
    return *result;
  }
  if (!stdin_data.empty()) (*command)->WriteStdin(stdin_data);
  (*command)->CloseStdin();
  if (!PollUntil(loop, [&] { return result->finished(); }, limit)) {
    ADD_FAILURE() << "command did not finish: " << command_line;
  }
  return *result;
}

PausedRun RunPaused(EventLoop& loop, Executor& executor, size_t bytes, std::chrono::milliseconds pause) {
  PausedRun run;
  auto result = std::make_shared<Collected>();
  bool paused = false;
  std::unique_ptr<Command> command;
  CommandCallbacks cb = CollectInto(result);
  auto collect = std::move(cb.on_stdout);
  cb.on_stdout = [&, collect](std::string_view data) {
    collect(data);
    if (paused) run.out_during_pause += data.size();
    if (!paused && run.out_when_paused == 0) {
      run.out_when_paused = result->out.size();
      paused = true;
      command->PauseOutput(true);
    }
  };
  auto started = executor.Start("head -c " + std::to_string(bytes) + " /dev/zero; echo written >&2", std::move(cb));
  if (!started.ok()) {
    ADD_FAILURE() << "Start failed: " << started.status().message();
    return run;
  }
  command = std::move(started).value();
  command->CloseStdin();
  if (!PollUntil(loop, [&] { return paused; })) ADD_FAILURE() << "no output within the bound";
  // Output delivered from here on is what the pause let through.
  run.out_during_pause = 0;
  PollUntil(loop, [&] { return result->finished(); }, pause);
  run.exited_during_pause = result->finished();
  run.err_during_pause = !result->err.empty();
  paused = false;
  command->PauseOutput(false);
  if (!PollUntil(loop, [&] { return result->finished(); })) ADD_FAILURE() << "did not finish once unpaused";
  run.end = *result;
  return run;
}

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base && *base ? base : "/tmp") + "/barge-ssh-test-XXXXXX";
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (mkdtemp(buffer.data()) == nullptr) {
    ADD_FAILURE() << "mkdtemp failed";
  }
  path_ = buffer.data();
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
}

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

std::string RunProgram(const std::vector<std::string>& argv, const std::string& cwd,
                       int* exit_code) {
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    *exit_code = -1;
    return "";
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) _exit(126);
    execv(args[0], args.data());
    _exit(127);
  }
  close(out[1]);
  std::string result;
  char buffer[65536];
  ssize_t n;
  while ((n = read(out[0], buffer, sizeof buffer)) > 0 || (n < 0 && errno == EINTR)) {
    if (n > 0) result.append(buffer, static_cast<size_t>(n));
  }
  close(out[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

}  // namespace barge::ssh::testing
