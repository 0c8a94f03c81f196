// Runs command lines on this machine with /bin/sh -c, with the same callback
// contract as SshExecutor, driven by the same EventLoop.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "ssh/event_loop.h"
#include "ssh/executor.h"

namespace barge::ssh {

// Each command is `/bin/sh -c LINE` in a process group of its own (so a
// Ctrl-C at barge's terminal reaches barge, not its children), with the
// environment of this process, default signal dispositions and an empty
// signal mask. Its stdin, stdout and stderr are pipes watched on the loop;
// the child is reaped with waitpid(WNOHANG) once both output pipes are at
// EOF. Destroying a command closes its pipes but does not kill the child; it
// is still reaped, from the loop, when it exits.
//
// A command line longer than kMaxArgvCommandLine cannot be one argument of
// execve (Linux refuses any argument over 128 KiB, MAX_ARG_STRLEN): it is
// written as a script into a fresh 0700 directory under $TMPDIR (or /tmp)
// and run as `/bin/sh FILE` instead, with the same pipes; the script
// removes its directory before anything else. (Start fails when the script
// cannot be written.)
//
// Threading: the loop's thread only. `loop` must outlive the executor and
// every command it started. Commands may outlive the executor.
class LocalExecutor : public Executor {
 public:
  explicit LocalExecutor(EventLoop* loop);
  ~LocalExecutor() override;
  LocalExecutor(const LocalExecutor&) = delete;
  LocalExecutor& operator=(const LocalExecutor&) = delete;

  // Fails when the pipes or the process cannot be created.
  [[nodiscard]] Result<std::unique_ptr<Command>> Start(const std::string& command_line,
                                                       CommandCallbacks callbacks) override;
  // A non-blocking AF_UNIX connection to `socket_path` on this machine,
  // watched by the loop (executor.h). A connect refused at once (no such
  // socket, no permission, nothing listening) is reported through on_exit
  // from Poll, like every outcome; a full listen backlog is retried for up
  // to kConnectRetryFor. A read error after the connect (a reset) is on_exit
  // with `error`.
  [[nodiscard]] Result<std::unique_ptr<Command>> OpenUnixStream(
      const std::string& socket_path, CommandCallbacks callbacks) override;
  std::string label() const override { return "local"; }
  bool runs_here() const override { return true; }

  static constexpr std::chrono::milliseconds kConnectRetryFor{2000};

  // Longer command lines run through a script (see the class comment).
  static constexpr size_t kMaxArgvCommandLine = 64 * 1024;

 private:
  class LocalCommand;
  class LocalStream;
  EventLoop* loop_;
};

}  // namespace barge::ssh
