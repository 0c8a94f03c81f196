#include "ssh/event_loop.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cassert>
#include <cerrno>
#include <climits>
#include <cstring>
#include <exception>

#include <spdlog/spdlog.h>

namespace barge::ssh {

// One watched fd. libssh polls `polled_fd`, a duplicate of the caller's fd
// that this struct owns: the caller may close its fd as soon as UnwatchFd
// returns, even while the duplicate is still in the libssh event (removal
// from the event is deferred until no dispatch is running, because libssh
// does not tolerate removing poll handles from inside its dispatch loop).
// Its address is the libssh userdata, so it is neither copied nor moved.
struct EventLoop::FdWatch {
  EventLoop* loop = nullptr;
  int caller_fd = -1;
  int polled_fd = -1;
  EventLoop::WatchId id = 0;
  bool active = true;
  std::function<void(short)> fn;

  FdWatch() = default;
  FdWatch(const FdWatch&) = delete;
  FdWatch& operator=(const FdWatch&) = delete;
};

namespace {

int OnWakeEvent(socket_t fd, int /*revents*/, void* /*userdata*/) noexcept {
  std::uint64_t value;
  while (read(fd, &value, sizeof value) > 0) {
  }
  return 0;
}

}  // namespace

EventLoop::EventLoop(TimeSource time)
    : virtual_(time == TimeSource::kVirtual), virtual_now_(Clock::now()), event_(ssh_event_new()) {
  // Out of memory here is not worth a Status: nothing else would work either.
  if (event_ == nullptr) {
    spdlog::critical("Cannot create the libssh event.");
    std::abort();
  }
  // libssh's poll returns at once, without waiting, on an empty event: the
  // wake fd keeps it non-empty and lets Wakeup interrupt a waiting Poll.
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0 || ssh_event_add_fd(event_, wake_fd_, POLLIN, OnWakeEvent, nullptr) != SSH_OK) {
    spdlog::critical("Cannot set up the event loop's wake fd: {}", std::strerror(errno));
    std::abort();
  }
}

EventLoop::~EventLoop() {
  for (auto& [fd, watch] : fds_) retired_.push_back(std::move(watch));
  fds_.clear();
  DropRetiredWatches();
  ssh_event_remove_fd(event_, wake_fd_);
  close(wake_fd_);
  ssh_event_free(event_);
}

void EventLoop::Poll(std::chrono::milliseconds timeout) {
  assert(!polling_ && "EventLoop::Poll called from inside one of its callbacks");
  polling_ = true;

  RunDueTimers();
  RunHooks();

  int wait_ms = timeout.count() < 0 ? -1 : static_cast<int>(std::min<long long>(timeout.count(), INT_MAX));
  if (!timers_.empty()) {
    auto now = Now();
    auto next = timers_.begin()->first;
    int until_next = 0;
    if (next > now) {
      auto ms = std::chrono::ceil<std::chrono::milliseconds>(next - now).count();
      until_next = static_cast<int>(std::min<long long>(ms, INT_MAX));
    }
    if (wait_ms < 0 || until_next < wait_ms) wait_ms = until_next;
  }

  int rc;
  if (virtual_ && wait_ms != -1) {
    // A virtual loop never waits (see the header): it serves what is ready
    // and, when nothing was (libssh: SSH_AGAIN), jumps to where the wait
    // would have ended.
    rc = ssh_event_dopoll(event_, 0);
    if (rc == SSH_AGAIN) {
      Clock::time_point until = timers_.empty() ? Clock::time_point::max() : timers_.begin()->first;
      if (timeout.count() >= 0) until = std::min(until, virtual_now_ + timeout);
      virtual_now_ = std::max(virtual_now_, until);
    }
  } else {
    rc = ssh_event_dopoll(event_, wait_ms);
  }
  if (rc == SSH_ERROR && errno != EINTR) {
    // Also returned when libssh closed a session's socket during dispatch;
    // the remaining fds are served by the next Poll.
    spdlog::debug("Event loop: poll returned an error. [errno: {}]", std::strerror(errno));
  }

  RunDueTimers();
  RunHooks();

  polling_ = false;
  DropRetiredWatches();
}

EventLoop::TimerId EventLoop::AddTimer(Clock::time_point when, std::function<void()> fn) {
  TimerId id = next_timer_++;
  auto it = timers_.emplace(when, std::make_pair(id, std::move(fn)));
  timer_index_[id] = it;
  return id;
}

void EventLoop::CancelTimer(TimerId id) {
  auto found = timer_index_.find(id);
  if (found == timer_index_.end()) return;
  timers_.erase(found->second);
  timer_index_.erase(found);
}

void EventLoop::RunDueTimers() {
  // Only timers that exist when the pass starts run in it, so a timer that
  // re-arms itself for "now" cannot starve the loop.
  const TimerId limit = next_timer_;
  const auto now = Now();
  for (auto it = timers_.begin(); it != timers_.end() && it->first <= now;) {
    if (it->second.first >= limit) {
      ++it;
      continue;
    }
    std::function<void()> fn = std::move(it->second.second);
    timer_index_.erase(it->second.first);
    timers_.erase(it);
    try {
      fn();
    } catch (const std::exception& e) {
      spdlog::error("A timer callback threw: {}", e.what());
    } catch (...) {
      spdlog::error("A timer callback threw.");
    }
    // The callback may have added or cancelled timers: start over.
    it = timers_.begin();
  }
}

EventLoop::WatchId EventLoop::WatchFd(int fd, short events, std::function<void(short revents)> fn) {
  UnwatchFd(fd);
  auto watch = std::make_unique<FdWatch>();
  watch->loop = this;
  watch->id = next_watch_++;
  const WatchId id = watch->id;
  watch->caller_fd = fd;
  watch->fn = std::move(fn);
  watch->polled_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (watch->polled_fd < 0 ||
      ssh_event_add_fd(event_, watch->polled_fd, events, OnFdEvent, watch.get()) != SSH_OK) {
    int err = errno;
    spdlog::error("Cannot watch a file descriptor: {} [fd: {}]", std::strerror(err), fd);
    if (watch->polled_fd >= 0) close(watch->polled_fd);
    watch->polled_fd = -1;
    // Fail visibly, from Poll, like any other event on that fd.
    FdWatch* raw_watch = watch.get();
    AddTimer(Now(), [this, fd, raw_watch] {
      auto it = fds_.find(fd);
      if (it == fds_.end() || it->second.get() != raw_watch || !raw_watch->active) return;
      std::function<void(short)> callback = raw_watch->fn;
      callback(POLLERR | POLLNVAL);
    });
  }
  fds_[fd] = std::move(watch);
  return id;
}

void EventLoop::UnwatchFd(int fd, WatchId id) {
  auto it = fds_.find(fd);
  if (it != fds_.end() && it->second->id == id) UnwatchFd(fd);
}

void EventLoop::UnwatchFd(int fd) {
  auto it = fds_.find(fd);
  if (it == fds_.end()) return;
  std::unique_ptr<FdWatch> watch = std::move(it->second);
  fds_.erase(it);
  watch->active = false;
  retired_.push_back(std::move(watch));
  if (!polling_ && fd_callback_depth_ == 0) DropRetiredWatches();
}

int EventLoop::OnFdEvent(socket_t /*fd*/, int revents, void* userdata) noexcept {
  auto* watch = static_cast<FdWatch*>(userdata);
  if (!watch->active) return 0;
  EventLoop* loop = watch->loop;
  ++loop->fd_callback_depth_;
  try {
    watch->fn(static_cast<short>(revents));
  } catch (const std::exception& e) {
    spdlog::error("An fd callback threw: {} [fd: {}]", e.what(), watch->caller_fd);
  } catch (...) {
    spdlog::error("An fd callback threw. [fd: {}]", watch->caller_fd);
  }
  --loop->fd_callback_depth_;
  // Always 0: a negative value tells libssh the handle was removed, which
  // never happens here (removal is deferred).
  return 0;
}

void EventLoop::DropRetiredWatches() {
  std::vector<std::unique_ptr<FdWatch>> retired;
  retired.swap(retired_);
  for (auto& watch : retired) {
    if (watch->polled_fd >= 0) {
      ssh_event_remove_fd(event_, watch->polled_fd);
      close(watch->polled_fd);
    }
  }
}

EventLoop::HookId EventLoop::AddPollHook(std::function<void()> fn) {
  HookId id = next_hook_++;
  hooks_.push_back(Hook{id, std::move(fn)});
  return id;
}

void EventLoop::RemovePollHook(HookId id) {
  for (Hook& hook : hooks_) {
    if (hook.id == id) hook.removed = true;
  }
  if (!polling_) hooks_.remove_if([](const Hook& h) { return h.removed; });
}

void EventLoop::RunHooks() {
  for (Hook& hook : hooks_) {
    if (hook.removed) continue;
    try {
      hook.fn();
    } catch (const std::exception& e) {
      spdlog::error("A poll hook threw: {}", e.what());
    } catch (...) {
      spdlog::error("A poll hook threw.");
    }
  }
  hooks_.remove_if([](const Hook& h) { return h.removed; });
}

void EventLoop::Wakeup() {
  std::uint64_t one = 1;
  ssize_t ignored = write(wake_fd_, &one, sizeof one);
  (void)ignored;
}

}  // namespace barge::ssh
