// Turns SIGINT, SIGTERM and SIGHUP into events on the event loop: an RAII
// object that installs the handlers (self-pipe) and restores the previous
// ones when destroyed. One instance per process at a time.
#pragma once

#include <functional>

#include "base/fd_reactor.h"

namespace barge::runner {

class SignalWatcher {
 public:
  // `on_signal(signo)` runs from the event loop (ssh::EventLoop::Poll), once per delivered signal.
  SignalWatcher(FdReactor* loop, std::function<void(int)> on_signal);
  ~SignalWatcher();
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

 private:
  FdReactor* loop_;
  std::function<void(int)> on_signal_;
  int pipe_[2] = {-1, -1};
};

}  // namespace barge::runner
