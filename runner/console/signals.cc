#include "runner/console/signals.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>

namespace barge::runner {
namespace {

int g_write_fd = -1;
struct sigaction g_previous[3];
constexpr int kSignals[3] = {SIGINT, SIGTERM, SIGHUP};

void Handler(int signo) {
  int saved = errno;
  unsigned char b = static_cast<unsigned char>(signo);
  if (g_write_fd >= 0) (void)!write(g_write_fd, &b, 1);
  errno = saved;
}

}  // namespace

SignalWatcher::SignalWatcher(FdReactor* loop, std::function<void(int)> on_signal)
    : loop_(loop), on_signal_(std::move(on_signal)) {
  if (pipe2(pipe_, O_CLOEXEC | O_NONBLOCK) != 0) return;
  g_write_fd = pipe_[1];
  struct sigaction sa = {};
  sa.sa_handler = Handler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &sa, &g_previous[i]);
  loop_->WatchFd(pipe_[0], POLLIN, [this](short) {
    unsigned char buf[16];
    ssize_t n;
    while ((n = read(pipe_[0], buf, sizeof buf)) > 0) {
      for (ssize_t i = 0; i < n; ++i) on_signal_(buf[i]);
    }
  });
}

SignalWatcher::~SignalWatcher() {
  if (pipe_[0] < 0) return;
  for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &g_previous[i], nullptr);
  g_write_fd = -1;
  loop_->UnwatchFd(pipe_[0]);
  close(pipe_[0]);
  close(pipe_[1]);
}

}  // namespace barge::runner
