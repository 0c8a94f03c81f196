// Runs shell command lines on one host: over an open SSH session
// (SshExecutor, session.h) or on this machine (LocalExecutor,
// local_executor.h). This is the seam between barge's controller and the
// transport; the controller never knows which one it drives.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"

struct ssh_session_struct;  // libssh's session (libssh/libssh.h: ssh_session)

namespace barge::ssh {

struct ExitStatus {
  // The command's exit code; 128+N when it was killed by signal N.
  // -1 when the outcome is unknown (see error).
  int code = -1;
  std::string signal;  // e.g. "KILL" when the remote reported a signal
  // Set when the command's outcome is unknown: the channel could not be
  // opened, or the connection was lost before an exit status arrived.
  std::string error;

  bool known() const { return error.empty(); }
};

// Callbacks of one command. All run on the event loop's thread, from inside
// EventLoop::Poll, never from inside Executor::Start.
struct CommandCallbacks {
  std::function<void(std::string_view)> on_stdout;  // raw bytes, any chunking
  std::function<void(std::string_view)> on_stderr;
  // Called exactly once, after the last on_stdout/on_stderr call.
  std::function<void(const ExitStatus&)> on_exit;
};

// One running command. May be destroyed at any time on the loop's thread,
// also from inside its own callbacks. Destroying it closes its channel (or
// pipes) and drops later callbacks; it does not promise to stop the remote
// process.
class Command {
 public:
  virtual ~Command() = default;
  // Queues bytes for the command's stdin; written as the transport allows.
  virtual void WriteStdin(std::string_view data) = 0;
  // Sends EOF once everything queued has been written.
  virtual void CloseStdin() = 0;
  // True once on_exit has run.
  virtual bool done() const = 0;
  // Bytes queued by WriteStdin and not yet handed to the transport; lets a
  // producer stream a large input without holding all of it in memory.
  virtual size_t stdin_pending() const = 0;
  // Back-pressure on the command's stdout (commands from Start only; a
  // stream from OpenUnixStream ignores it). While paused, on_stdout is not
  // called and the transport stops taking the command's output: over SSH
  // the channel's window is no longer grown (libssh holds at most about
  // 1.3 MB), locally the pipe is no longer read, so the command blocks on
  // its writes. Unpaused, what was held is delivered first, in order; an
  // exit that came meanwhile is delivered after it. stderr never pauses.
  // May be called from inside on_stdout.
  virtual void PauseOutput(bool paused) = 0;
};

class Executor {
 public:
  virtual ~Executor() = default;
  // Starts `command_line`, a POSIX shell command line whose arguments the
  // caller has quoted (quote.h). Returns at once; progress is delivered
  // through `callbacks` from EventLoop::Poll. Fails only when the command
  // cannot even be attempted (e.g. the connection is already known dead).
  [[nodiscard]] virtual Result<std::unique_ptr<Command>> Start(
      const std::string& command_line, CommandCallbacks callbacks) = 0;
  // Opens a byte stream to the unix socket `socket_path` on the host (e.g.
  // its Docker engine's /var/run/docker.sock) without running any process
  // there: SshExecutor opens a direct-streamlocal channel on its session
  // (sshd's AllowStreamLocalForwarding, default yes), LocalExecutor connects
  // to the socket itself. The returned Command is the stream: bytes from the
  // socket arrive through on_stdout (on_stderr is never called), WriteStdin
  // sends bytes, CloseStdin sends EOF once they are written. on_exit runs
  // exactly once: with code 0 when the far side has ended the stream (its
  // EOF or close; a stream is over once the socket reads no more), or with
  // `error` set, naming the host and the socket, when the stream could not
  // be opened (forwarding prohibited, no such socket, permission denied) or
  // the connection was lost. Like Start, it returns at once, fails only when
  // nothing can be attempted, and delivers every outcome from Poll.
  // Streams are not commands: they do not count against, nor wait for, a
  // limit of commands per connection.
  // The default says the transport has no streams (fakes of tests).
  [[nodiscard]] virtual Result<std::unique_ptr<Command>> OpenUnixStream(
      const std::string& socket_path, CommandCallbacks callbacks) {
    (void)callbacks;
    return Status::Error(label() + ": cannot open a stream to " + socket_path +
                         ": this transport has no streams");
  }
  // What to call this host in messages, e.g. "root@127.0.0.2:2222" or "local".
  virtual std::string label() const = 0;
  // The numeric IP address the transport's connection reached (the peer of
  // a direct TCP connection: Session::peer_address). Empty when there is
  // none: a connection through jump hosts or a ProxyCommand, the local
  // engine.
  virtual std::string reached_address() const { return ""; }
  // Ok while the transport is believed alive; once it was found dead, the
  // error that says so, for good.
  [[nodiscard]] virtual Status health() const { return Status::Ok(); }
  // True when commands run on this machine (the local engine): a caller
  // that needs this terminal itself (exec -it) runs the command here.
  virtual bool runs_here() const { return false; }
  // For ssh/'s own channels of other kinds (port_forward.cc,
  // interactive_channel.cc): the SSH session to open them on; nullptr for a
  // transport without one. The loop's thread only, from a poll hook.
  virtual ssh_session_struct* channel_session() const { return nullptr; }
};

}  // namespace barge::ssh
