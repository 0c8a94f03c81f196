// An interactive command on an open SSH session: its own session channel,
// with a pseudo-terminal when asked (`barge exec -it`), relaying this
// process's stdin to it and its output to this process's stdout and stderr.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "base/status.h"
#include "ssh/event_loop.h"
#include "ssh/executor.h"

namespace barge::ssh {

struct PtySize {
  std::string term = "xterm";  // TERM sent with the pty request
  int cols = 80;
  int rows = 24;
};

// Driven by one poll hook of the loop (never from inside libssh's dispatch),
// like SshExecutor's own channels, but not one of them: it does not wait for
// the executor's free channel slots. Bytes read from `in_fd` (watched by the
// loop; each read only once a poll says it is ready, so `in_fd` stays
// blocking) go to the channel as its window allows; EOF on `in_fd` is sent
// as EOF (without a pty; with one, the terminal's own ^D is
// just a byte). Output is written to `out_fd` / `err_fd` (blocking writes: a
// terminal or a pipe the user reads). With a pty the host merges stderr into
// stdout, as ssh -t does.
//
// Threading: the loop's thread only. `via` must outlive it.
class InteractiveChannel {
 public:
  [[nodiscard]] static Result<std::unique_ptr<InteractiveChannel>> Start(
      EventLoop* loop, Executor* via, const std::string& command_line,
      const std::optional<PtySize>& pty, int in_fd, int out_fd, int err_fd);
  ~InteractiveChannel();
  InteractiveChannel(const InteractiveChannel&) = delete;
  InteractiveChannel& operator=(const InteractiveChannel&) = delete;

  // Tells the host the terminal's new size (a window-change request), sent
  // from the next poll hook. No-op without a pty.
  void Resize(int cols, int rows);
  // True once the command has ended (or failed to start); exit() then says how.
  bool done() const { return done_; }
  const ExitStatus& exit() const { return exit_; }

 private:
  enum class State { kOpening, kPty, kExec, kRunning };
  struct Callbacks;  // libssh's exit-status callbacks and what they got
  InteractiveChannel(EventLoop* loop, Executor* via);
  // The poll hook: once the channel runs, sends a pending resize, then
  // relays output and input, rewatches in_fd_ and finishes when the command
  // has ended. A lost session finishes it with the session's error.
  void Service();
  // Service's first stage: creates the channel (its exit callbacks set) and
  // moves it through open, pty (when asked) and exec. True once the command
  // runs; false while a step waits for the host, or after one failed
  // (finished with what failed and libssh's error).
  bool Open();
  // Writes what the channel has read of stdout and stderr to out_fd_ and
  // err_fd_: at most `max_reads` reads of each.
  void RelayOutput(size_t max_reads);
  // Sends what in_fd_ has (pending_ first) as the channel's window allows,
  // at most 16 steps; once in_fd_ is at EOF and all is sent, sends EOF
  // (without a pty) and sets eof_sent_.
  void RelayInput();
  // One read of in_fd_ into pending_ (or in_eof_ set), only when the window
  // has room and a poll says in_fd_ is ready; false when nothing was read.
  bool ReadInput();
  // Watches in_fd_ in the loop exactly while more input could be taken now
  // (no EOF, nothing pending, room in the window).
  void RewatchInput();
  // When the channel has closed, or is at EOF with an exit status: writes
  // the output left, then finishes with the exit code, else the signal (code
  // 130 for INT, 137 for KILL, 143 for any other), else an error.
  void FinishIfEnded();
  // Finishes with `what` failed, and libssh's error.
  void Fail(const std::string& what);
  // Marks the command done with `exit`, once; stops watching in_fd_.
  void Finish(ExitStatus exit);

  EventLoop* loop_;
  Executor* via_;
  EventLoop::HookId hook_ = 0;
  ssh_channel channel_ = nullptr;
  std::unique_ptr<Callbacks> callbacks_;  // its address is libssh userdata
  State state_ = State::kOpening;
  std::string command_line_;
  std::optional<PtySize> pty_;
  std::optional<PtySize> resize_;  // to send
  int in_fd_ = -1, out_fd_ = -1, err_fd_ = -1;
  bool in_watched_ = false;
  bool in_eof_ = false;
  bool eof_sent_ = false;
  std::string pending_;  // from in_fd, not yet taken by the channel
  size_t pending_off_ = 0;
  bool done_ = false;
  ExitStatus exit_;
};

}  // namespace barge::ssh
