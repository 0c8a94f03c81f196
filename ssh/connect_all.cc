#include "ssh/connect_all.h"

#include <poll.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <utility>

#include <spdlog/spdlog.h>

namespace barge::ssh {
namespace {

// The connects of one ConnectAll call. Owns every attempt's handshake, fd
// watch and deadline timer until that attempt has ended; its callbacks only
// mark an attempt, and Run (outside the loop's dispatch) advances it.
class ConnectQueue {
 public:
  ConnectQueue(const std::vector<SessionOptions>& options, int parallelism, EventLoop* loop)
      : options_(options),
        limit_(static_cast<size_t>(std::max(1, parallelism))),
        loop_(loop),
        attempts_(options.size()),
        results_(options.size()) {}
  ConnectQueue(const ConnectQueue&) = delete;
  ConnectQueue& operator=(const ConnectQueue&) = delete;

  std::vector<Result<std::unique_ptr<Session>>> Run();

 private:
  struct Attempt {
    std::unique_ptr<SessionHandshake> handshake;
    int watched_fd = -1;
    short watched_events = 0;
    EventLoop::WatchId watch = 0;
    EventLoop::TimerId timer = 0;
    SessionHandshake::Clock::time_point timer_at;
    bool ready = false;    // its fd had events since it last advanced
    bool expired = false;  // its deadline timer ran
  };

  void Launch(size_t i);
  void Step(size_t i);
  void Rewatch(size_t i);
  void Finish(size_t i, Result<std::unique_ptr<Session>> result);

  const std::vector<SessionOptions>& options_;
  const size_t limit_;
  EventLoop* loop_;
  std::vector<Attempt> attempts_;
  std::vector<std::optional<Result<std::unique_ptr<Session>>>> results_;
  std::vector<size_t> running_;  // attempts in flight, by index
  size_t next_ = 0;              // the first attempt not launched yet
};

std::vector<Result<std::unique_ptr<Session>>> ConnectQueue::Run() {
  for (;;) {
    while (running_.size() < limit_ && next_ < attempts_.size()) Launch(next_++);
    if (running_.empty()) break;  // and nothing left to launch
    loop_->Poll(std::chrono::milliseconds(-1));
    const std::vector<size_t> running = running_;
    for (size_t i : running) {
      if (attempts_[i].ready || attempts_[i].expired) Step(i);
    }
  }
  std::vector<Result<std::unique_ptr<Session>>> out;
  out.reserve(results_.size());
  for (auto& result : results_) out.push_back(std::move(*result));
  spdlog::debug("SSH connects: done. [hosts: {}, at once: {}]", out.size(), limit_);
  return out;
}

void ConnectQueue::Launch(size_t i) {
  Result<std::unique_ptr<SessionHandshake>> started = SessionHandshake::Start(options_[i]);
  if (!started.ok()) {
    results_[i].emplace(started.status());
    return;
  }
  attempts_[i].handshake = std::move(started).value();
  running_.push_back(i);
  attempts_[i].ready = true;  // the first Advance starts the connection
  Step(i);
}

void ConnectQueue::Step(size_t i) {
  Attempt& a = attempts_[i];
  SessionHandshake& h = *a.handshake;
  bool ended = false;
  if (a.ready) {
    a.ready = false;
    ended = h.Advance();
  }
  if (!ended && SessionHandshake::Clock::now() >= h.deadline()) {
    h.Expire();
    ended = true;
  }
  a.expired = false;
  if (ended) {
    Finish(i, h.TakeResult());
  } else {
    Rewatch(i);
  }
}

// Watches the handshake's fd for what it waits on now, and keeps one timer
// at its current deadline.
void ConnectQueue::Rewatch(size_t i) {
  Attempt& a = attempts_[i];
  const SessionHandshake& h = *a.handshake;
  if (h.fd() != a.watched_fd || h.events() != a.watched_events) {
    if (a.watched_fd >= 0) loop_->UnwatchFd(a.watched_fd, a.watch);
    a.watched_fd = -1;
  }
  if (a.watched_fd < 0 && h.fd() >= 0) {  // (no socket: only the deadline ends it)
    a.watched_fd = h.fd();
    a.watched_events = h.events();
    a.watch = loop_->WatchFd(a.watched_fd, a.watched_events, [this, i](short) { attempts_[i].ready = true; });
  }
  if (a.timer == 0 || a.timer_at != h.deadline()) {
    if (a.timer != 0) loop_->CancelTimer(a.timer);
    a.timer_at = h.deadline();
    a.timer = loop_->AddTimer(a.timer_at, [this, i] {
      attempts_[i].timer = 0;
      attempts_[i].expired = true;
    });
  }
}

void ConnectQueue::Finish(size_t i, Result<std::unique_ptr<Session>> result) {
  Attempt& a = attempts_[i];
  if (a.watched_fd >= 0) loop_->UnwatchFd(a.watched_fd, a.watch);
  if (a.timer != 0) loop_->CancelTimer(a.timer);
  a = Attempt{};
  results_[i].emplace(std::move(result));
  running_.erase(std::find(running_.begin(), running_.end(), i));
}

}  // namespace

std::vector<Result<std::unique_ptr<Session>>> ConnectAll(const std::vector<SessionOptions>& options,
                                                         int parallelism, EventLoop* loop) {
  if (options.empty()) return {};
  spdlog::debug("SSH connects: start. [hosts: {}, at once: {}]", options.size(), std::max(1, parallelism));
  ConnectQueue queue(options, parallelism, loop);
  return queue.Run();
}

}  // namespace barge::ssh
