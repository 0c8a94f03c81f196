// The one event loop that drives every SSH session, every channel, every
// local child process and every timer of a barge process. Single-threaded:
// all of its methods and all callbacks run on the thread that calls Poll.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>

#include <libssh/libssh.h>

namespace barge::ssh {

class EventLoop {
 public:
  using Clock = std::chrono::steady_clock;
  using TimerId = std::uint64_t;

  EventLoop();
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Waits at most `timeout` for activity on any session or watched fd, runs
  // the callbacks that are due (including expired timers), and returns.
  void Poll(std::chrono::milliseconds timeout);

  // Runs `fn` once, from Poll, at or after `when`.
  TimerId AddTimer(Clock::time_point when, std::function<void()> fn);
  void CancelTimer(TimerId id);

  // Calls `fn(revents)` from Poll whenever `fd` has any of `events` (POLLIN...).
  // The fd stays owned by the caller, who must Unwatch it before closing it.
  void WatchFd(int fd, short events, std::function<void(short revents)> fn);
  void UnwatchFd(int fd);

  // For ssh/ internals: the libssh event every session is added to.
  ssh_event raw() const { return event_; }

 private:
  struct FdWatch;
  void RunDueTimers();

  ssh_event event_;
  TimerId next_timer_ = 1;
  std::multimap<Clock::time_point, std::pair<TimerId, std::function<void()>>> timers_;
  std::map<int, std::unique_ptr<FdWatch>> fds_;
};

}  // namespace barge::ssh
