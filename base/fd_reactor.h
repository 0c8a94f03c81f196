// FdReactor: what code above ssh/ needs of the one event loop to wait on
// file descriptors of its own (the terminal's stdout and stderr, a signal
// pipe), so that it need not know the loop's type. ssh::EventLoop is the
// one implementation; the contract of each method is EventLoop's.
//
// Threading: the loop's thread only.
#pragma once

#include <cstdint>
#include <functional>

namespace barge {

class FdReactor {
 public:
  using WatchId = std::uint64_t;
  using HookId = std::uint64_t;
  virtual ~FdReactor() = default;

  // Calls `fn(revents)` from the loop whenever `fd` has any of `events`
  // (POLLIN, POLLOUT) or POLLHUP/POLLERR, until UnwatchFd(fd). The fd
  // stays the caller's; after UnwatchFd returns, `fn` is never called again.
  virtual WatchId WatchFd(int fd, short events, std::function<void(short revents)> fn) = 0;
  virtual void UnwatchFd(int fd) = 0;
  // `fn` runs at the start and at the end of every pass of the loop.
  virtual HookId AddPollHook(std::function<void()> fn) = 0;
  virtual void RemovePollHook(HookId id) = 0;
};

}  // namespace barge
