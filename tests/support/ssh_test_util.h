// Helpers shared by ssh/'s unit and bed tests.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ssh/event_loop.h"
#include "ssh/executor.h"

namespace barge::ssh::testing {

// Polls `loop` until `done()` is true or `limit` has passed; returns done().
// `limit` is a correctness bound against hangs, not a performance target.
bool PollUntil(EventLoop& loop, const std::function<bool()>& done,
               std::chrono::milliseconds limit = std::chrono::seconds(30));

// Everything one command produced.
struct Collected {
  std::string out;
  std::string err;
  ExitStatus exit;
  int exit_calls = 0;
  // Bytes of stdout+stderr seen when on_exit ran.
  size_t bytes_at_exit = 0;
  bool finished() const { return exit_calls > 0; }
};

// Callbacks that append into `into`.
CommandCallbacks CollectInto(std::shared_ptr<Collected> into);

// Runs one command to completion on `executor` (failing the test if Start
// fails or it does not finish within `limit`).
Collected RunToEnd(EventLoop& loop, Executor& executor, const std::string& command_line,
                   const std::string& stdin_data = "",
                   std::chrono::milliseconds limit = std::chrono::seconds(30));

// A fresh directory under $TMPDIR (or /tmp), removed with its contents.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// RunPaused: a command that writes `bytes` of stdout, then a line on
// stderr, run with its output paused (Command::PauseOutput) from its first
// stdout chunk for `pause`, then unpaused and run to its end.
struct PausedRun {
  size_t out_when_paused = 0;   // stdout delivered before the pause took hold
  size_t out_during_pause = 0;  // stdout delivered while paused (must be 0)
  bool exited_during_pause = false;
  bool err_during_pause = false;  // the command got past its writes
  Collected end;
};
PausedRun RunPaused(EventLoop& loop, Executor& executor, size_t bytes, std::chrono::milliseconds pause);

std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& content);
bool Exists(const std::string& path);

// Runs argv (fork/exec, no shell in between) in `cwd` ("" = here); returns
// its stdout and sets *exit_code (128+N for signal N).
std::string RunProgram(const std::vector<std::string>& argv, const std::string& cwd,
                       int* exit_code);

}  // namespace barge::ssh::testing
