// Runs command lines on one host over one open SSH session: one exec channel
// per command, all driven by the EventLoop's one libssh event.
#pragma once

#include <functional>
#include <list>
#include <memory>
#include <string>

#include "base/status.h"
#include "ssh/event_loop.h"
#include "ssh/executor.h"
#include "ssh/session.h"

namespace barge::ssh {

// Owns one connected Session, switched to non-blocking mode and added to the
// loop's libssh event. Start never touches the network: it queues the
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
// (Issue 5 adds keepalives: CheckConnection is where they go.)
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
  // The session's label, e.g. "root@127.0.0.2:2222".
  std::string label() const override;

  // Ok while the connection is believed alive; once it was found dead, the
  // error that says so, for good.
  [[nodiscard]] Status health() const { return health_; }
  // Called once, from Poll, when the connection is found dead, after every
  // open command has had its on_exit.
  void set_on_connection_lost(std::function<void(const Status&)> fn) { on_lost_ = std::move(fn); }

 private:
  struct Channel;
  class Handle;

  // The poll hook: runs at the start and end of every Poll.
  void Service();
  // Sends a delayed TCP ACK now (see the .cc for why).
  void AckNow();
  // Declares the connection dead when libssh says it is closed.
  void CheckConnection();
  // Drives one channel as far as it can go now; true if its state changed.
  bool Advance(Channel& c);
  void FlushStdin(Channel& c);
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
  bool in_event_ = false;
  bool in_service_ = false;
  std::list<std::shared_ptr<Channel>> channels_;  // in start order
  static constexpr int kUnlimited = 1 << 30;
  int open_channels_ = 0;           // channels with a libssh channel
  int max_channels_ = kUnlimited;   // learned from the host's first refusal
  EventLoop::TimerId hold_timer_ = 0;  // no opens while it is pending
  EventLoop::Clock::time_point last_close_{};  // of a channel that ran
  int next_id_ = 1;
  Status health_;
  std::function<void(const Status&)> on_lost_;
};

}  // namespace barge::ssh
