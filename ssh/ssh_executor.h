// Runs command lines on one host over one open SSH session: one exec channel
// per command, all driven by the one EventLoop.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <string>

#include "base/status.h"
#include "ssh/event_loop.h"
#include "ssh/executor.h"
#include "ssh/session.h"

namespace barge::ssh {

// Owns one connected Session, switched to non-blocking mode, in a libssh
// event of its own whose socket the loop watches (one host's errors are
// never charged to another host). Start never touches the network: it queues the
// command, and the loop's poll hook drives every channel's open → exec →
// running state machine, the stdin queues (within each channel's window) and
// the closing of finished channels, so that one loop drives many hosts at
// once and Poll stays the only blocking call.
//
// Channels per session: sshd limits open sessions per connection
// (MaxSessions, 10 by default). When the host refuses to open a channel
// while others are open (or closed moments ago), the command waits for a
// free slot instead of failing, and the executor keeps at most as many
// channels open as the host had when it first refused. It fails only when
// the host refuses with none open.
//
// A dead connection: when the session is found closed (read error, EOF,
// disconnect), every command still running gets on_exit with `error` set
// ("...: connection lost: ..."), then the on_connection_lost callback runs
// once, health() returns that error from then on, and Start fails with it.
//
// A silent connection (host frozen, link cut, packets dropped) is declared
// dead the same way, with "...: no answer for 10 s (ssh.dead_after):
// connection lost", once nothing at all has arrived from the host for
// dead_after (10 s unless set_dead_after says otherwise) while a request
// that needs an answer was outstanding. Whenever the connection has been
// quiet for dead_after/4, the executor sends one ("keepalive@openssh.com"
// with want_reply; any server must answer it), so a host that dies is
// declared lost at most about dead_after after the last bytes it sent, and
// a healthy idle host costs one small round trip per dead_after/4. The
// kernel gives up on the socket too: SO_KEEPALIVE with TCP_KEEPIDLE,
// TCP_KEEPINTVL and TCP_KEEPCNT spread over dead_after, and
// TCP_USER_TIMEOUT = dead_after for data the host never acknowledges (best
// effort: not on a ProxyCommand's pipe); when the kernel gives up first, the
// message is libssh's socket error instead. All timing uses the loop's
// timers and only runs while the loop is polled; an answer that arrived
// while the loop was away is read before anything is declared dead.
//
// A long command line: sshd runs the line as the one argument of `SHELL -c`,
// and Linux refuses any single argument longer than 128 KiB
// (MAX_ARG_STRLEN), so such a command would fail with "Argument list too
// long"; sshd also drops the whole connection over a request larger than its
// largest packet (256 KiB). A line longer than kMaxExecCommandLine is
// therefore not sent in the exec request: a short fixed bootstrap is, which
// reads the line as a script from the channel's stdin into a fresh 0700
// directory (mktemp -d under $TMPDIR or /tmp), answers on stdout, and runs
// it with the user's shell (`SHELL FILE`; the script removes its directory
// before anything else). The executor writes the script first and the
// command's own stdin (and EOF) only after that answer, which it takes out
// of stdout, so the command reads exactly the bytes given to WriteStdin. It
// costs one round trip more; when the host cannot store the script (no
// mktemp, a full /tmp), the command exits 126 with the reason on stderr,
// and a script that arrived short is never run.
//
// Threading: the loop's thread only. `loop` must outlive the executor. The
// executor must not be destroyed from inside Poll (not from its own
// commands' callbacks, nor from on_connection_lost); destroying it closes
// every channel and drops later callbacks (no on_exit). Commands may outlive
// the executor: their methods then do nothing.
class SshExecutor : public Executor {
 public:
  SshExecutor(std::unique_ptr<Session> session, EventLoop* loop);
  ~SshExecutor() override;
  SshExecutor(const SshExecutor&) = delete;
  SshExecutor& operator=(const SshExecutor&) = delete;

  // Fails only once the connection is known dead (with health()).
  [[nodiscard]] Result<std::unique_ptr<Command>> Start(const std::string& command_line,
                                                       CommandCallbacks callbacks) override;
  // A direct-streamlocal channel on the session (executor.h). sshd's reasons
  // for a refused open are coarse: OpenSSH (9.2) answers "open failed" alike
  // for a missing socket, a denied connect and streams forbidden by its
  // configuration (only its log tells them apart), so the error names all
  // of them; a server that says "administratively prohibited" gets the
  // message about the setting alone. Streams are driven by the same poll
  // hook as commands, within their channel's window, and are not counted
  // against the host's channel limit.
  [[nodiscard]] Result<std::unique_ptr<Command>> OpenUnixStream(
      const std::string& socket_path, CommandCallbacks callbacks) override;
  // The session's label, e.g. "root@127.0.0.2:2222".
  std::string label() const override;
  std::string reached_address() const override { return session_->peer_address(); }

  [[nodiscard]] Status health() const override { return health_; }
  ssh_session channel_session() const override { return session_->raw(); }
  // Called once, from Poll, when the connection is found dead, after every
  // open command has had its on_exit.
  void set_on_connection_lost(std::function<void(const Status&)> fn) { on_lost_ = std::move(fn); }

  // Longer command lines run through a script (see the class comment).
  static constexpr size_t kMaxExecCommandLine = 64 * 1024;

  static constexpr std::chrono::milliseconds kDefaultDeadAfter{std::chrono::seconds(10)};
  // How long the host may stay silent, with a request outstanding, before
  // the connection is declared dead (see the class comment); takes effect
  // at once, also for the socket options. Zero (or less) turns off both the
  // requests and the socket options: only a closed connection is then
  // found dead. Any time, from the loop's thread.
  void set_dead_after(std::chrono::milliseconds dead_after);
  std::chrono::milliseconds dead_after() const { return dead_after_; }

 private:
  struct Channel;
  class Handle;

  // The poll hook: runs at the start and end of every Poll.
  void Service();
  // Sends a delayed TCP ACK now (see the .cc for why).
  void AckNow();
  // Declares the connection dead when libssh says it is closed.
  void CheckConnection();
  // The silence check: notes arrived bytes, sends a keepalive request after
  // dead_after/4 of quiet, declares the connection dead after dead_after of
  // quiet with a request outstanding, and keeps a timer for the next step.
  void CheckLiveness();
  // True (and the time noted) if bytes arrived since the last call.
  bool NoteIncoming(EventLoop::Clock::time_point now);
  // Makes sure a keepalive request is outstanding; also reads (without
  // waiting) whatever the host already sent.
  void SendKeepalive();
  // SO_KEEPALIVE, TCP_KEEP* and TCP_USER_TIMEOUT per dead_after_.
  void ConfigureSocket();
  // Keeps the loop's watch of the session's socket in step with what libssh
  // waits for: readable while the connection is alive, writable too while
  // libssh holds output the socket did not take. No watch once it is dead.
  void WatchSocket();
  void UnwatchSocket();
  // From the watch: lets libssh read (and write) this session's socket and
  // run its callbacks, polling this session alone.
  void Dispatch();
  // The common end of a dead connection: health_ = `why`, every open
  // command's on_exit, then on_connection_lost.
  void LoseConnection(Status why);
  // Sends (or waits for the answer to) a channel's open request: a session
  // for a command, direct-streamlocal for a stream.
  int OpenStep(Channel& c);
  // on_exit's error for a stream whose open the host refused with `why`.
  std::string StreamOpenError(const std::string& socket_path, const std::string& why) const;
  // Drives one channel as far as it can go now; true if its state changed.
  bool Advance(Channel& c);
  void FlushStdin(Channel& c);
  // Writes data[*offset..] as far as the channel's window allows; true when
  // all of it is written (and the channel can take more).
  bool WriteAll(Channel& c, const std::string& data, size_t* offset);
  // Delivers the stdout a paused channel held back, once it is unpaused
  // (then a close that waited for it); true when it did anything.
  bool DeliverHeld(Channel& c);
  // After the host refused to open a channel: true (and a retry is
  // scheduled) when that is most likely its session limit (MaxSessions):
  // some channel is open there, or one closed moments ago.
  bool OpenRefusalIsTransient();
  // Removes our callbacks and frees the libssh channel (which sends a close
  // if it is open). Idempotent.
  void ReleaseChannel(Channel& c);
  // Delivers on_exit once (unless the command was abandoned).
  void Finish(Channel& c, const ExitStatus& exit);

  std::unique_ptr<Session> session_;
  EventLoop* loop_;
  EventLoop::HookId hook_ = 0;
  // This session's own libssh event (see the .cc for why not the loop's).
  ssh_event own_event_ = nullptr;
  bool in_event_ = false;
  int watched_fd_ = -1;        // the session's socket as watched in loop_
  EventLoop::WatchId watch_id_ = 0;
  short watched_events_ = 0;   // what watched_fd_ is watched for
  bool in_service_ = false;
  std::list<std::shared_ptr<Channel>> channels_;  // in start order
  static constexpr int kUnlimited = 1 << 30;
  int open_channels_ = 0;           // channels with a libssh channel
  int max_channels_ = kUnlimited;   // learned from the host's first refusal
  EventLoop::TimerId hold_timer_ = 0;  // no opens while it is pending
  EventLoop::Clock::time_point last_close_{};  // of a channel that ran
  int next_id_ = 1;
  // Dead-connection detection.
  std::chrono::milliseconds dead_after_ = kDefaultDeadAfter;
  ssh_counter_struct socket_counter_ = {};       // libssh adds the socket's bytes
  uint64_t bytes_seen_ = 0;                      // socket_counter_.in_bytes, last read
  EventLoop::Clock::time_point last_incoming_;  // when bytes_seen_ changed
  bool request_outstanding_ = false;             // a keepalive went out after last_incoming_
  EventLoop::TimerId liveness_timer_ = 0;        // wakes Poll for CheckLiveness
  EventLoop::Clock::time_point liveness_wake_{};  // when liveness_timer_ fires
  Status health_;
  std::function<void(const Status&)> on_lost_;
};

// The short command line SshExecutor sends in place of one longer than
// kMaxExecCommandLine: it reads a script of exactly `script_size` bytes from
// stdin into a new 0700 directory (mktemp -d under $TMPDIR or /tmp), prints
// a marker on stdout and runs the script with `$SHELL FILE`. When the
// directory cannot be made, or stdin ends before `script_size` bytes, it
// runs nothing, removes what it wrote, and exits 126 with the reason on
// stderr. Public for tests.
std::string LongCommandBootstrap(size_t script_size);

}  // namespace barge::ssh
