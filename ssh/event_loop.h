// The one event loop that drives every SSH session, every channel, every
// local child process and every timer of a barge process. Single-threaded:
// all of its methods and all callbacks run on the thread that calls Poll
// (Wakeup is the one exception). Poll is the only call that blocks.
//
// Time: every deadline and timer of code that runs on the loop is computed
// from Now(), the loop's clock. A real loop's clock is the steady clock. A
// virtual loop (unit tests whose every event is a timer: the controller on
// fake hosts) has a clock that stands still while callbacks run and, when
// nothing is due, jumps to the next timer instead of waiting for it; so
// a scripted minute of timeouts and backoffs passes in microseconds, in the
// same order as on a real clock.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <vector>

#include <libssh/libssh.h>

#include "base/fd_reactor.h"

namespace barge::ssh {

class EventLoop : public FdReactor {
 public:
  using Clock = std::chrono::steady_clock;
  using TimerId = std::uint64_t;
  // kReal: production. kVirtual: see "Time" above; only for tests.
  enum class TimeSource { kReal, kVirtual };

  explicit EventLoop(TimeSource time = TimeSource::kReal);
  // Sessions added to raw() must have been removed (their executors
  // destroyed) before the loop is destroyed.
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Waits at most `timeout` (negative: no limit) for activity on any session
  // or watched fd, or until the next timer is due, runs the callbacks that
  // are due (including expired timers), and returns. Must not be called from
  // inside one of its own callbacks.
  //
  // On a virtual loop Poll never waits while it has a timer or a timeout:
  // it serves the fds that are ready (without waiting), and if none was,
  // moves Now() to the earlier of the next timer and Now() + `timeout`,
  // then runs the timers due. With no timer and no limit it waits for real
  // (like a real loop, only an fd or Wakeup ends that wait).
  void Poll(std::chrono::milliseconds timeout);

  // The loop's clock: Clock::now() on a real loop, the virtual time on a
  // virtual one (which starts at Clock::now() when the loop is made).
  Clock::time_point Now() const { return virtual_ ? virtual_now_ : Clock::now(); }
  bool is_virtual() const { return virtual_; }

  // Runs `fn` once, from Poll, at or after `when` (on the loop's clock:
  // compute it from Now()). A timer added from a
  // timer callback runs in a later pass, never in the pass that added it.
  TimerId AddTimer(Clock::time_point when, std::function<void()> fn);
  // No-op for a timer that already ran or was cancelled.
  void CancelTimer(TimerId id);

  // Calls `fn(revents)` from Poll whenever `fd` has any of `events` (POLLIN...)
  // or POLLHUP/POLLERR. Watching an fd that is already watched replaces the
  // old watch. The fd stays owned by the caller, who must Unwatch it before
  // closing it; after UnwatchFd returns, `fn` is never called again and the
  // caller may close the fd at once (even from inside `fn`). If the watch
  // cannot be set up (out of file descriptors), `fn` is called once from Poll
  // with POLLERR|POLLNVAL.
  // Returns an id for the form of UnwatchFd below.
  WatchId WatchFd(int fd, short events, std::function<void(short revents)> fn) override;
  void UnwatchFd(int fd) override;
  // Unwatches `fd` only if its watch is still the one `id` names: for a
  // caller whose fd another party may have closed (its number then free for
  // someone else's watch).
  void UnwatchFd(int fd, WatchId id);

  // For transports that drive state machines outside libssh's callbacks
  // (ssh_executor.cc): `fn` runs at the start and at the end of every Poll,
  // never from inside libssh's dispatch, so it may call any libssh function
  // on sessions in raw(). RemovePollHook is safe from inside any callback.
  HookId AddPollHook(std::function<void()> fn) override;
  void RemovePollHook(HookId id) override;

  // Makes a Poll that is waiting (or the next one) return soon. The one
  // method that may be called from any thread or from a signal handler.
  void Wakeup();

  // The libssh event the watched fds are in. Sessions are not added to it
  // (ssh_executor.cc says why).
  ssh_event raw() const { return event_; }

 private:
  struct FdWatch;
  struct Hook {
    HookId id;
    std::function<void()> fn;
    bool removed = false;
  };

  static int OnFdEvent(socket_t fd, int revents, void* userdata) noexcept;
  void RunDueTimers();
  void RunHooks();
  // Takes retired fd watches out of the libssh event; only outside dispatch.
  void DropRetiredWatches();

  const bool virtual_;
  Clock::time_point virtual_now_;  // Now() of a virtual loop
  ssh_event event_;
  int wake_fd_ = -1;  // eventfd, always in event_ so that it is never empty
  bool polling_ = false;
  int fd_callback_depth_ = 0;  // > 0 while an fd callback runs
  TimerId next_timer_ = 1;
  std::multimap<Clock::time_point, std::pair<TimerId, std::function<void()>>> timers_;
  std::map<TimerId, decltype(timers_)::iterator> timer_index_;
  std::map<int, std::unique_ptr<FdWatch>> fds_;      // by the caller's fd
  WatchId next_watch_ = 1;
  std::vector<std::unique_ptr<FdWatch>> retired_;  // unwatched, still in event_
  HookId next_hook_ = 1;
  std::list<Hook> hooks_;  // a list: hooks may be added while others run
};

}  // namespace barge::ssh
