// InteractiveChannel: open → (pty) → exec → relay stdin/stdout/stderr, from a
// poll hook, until the channel closes.
#include "ssh/interactive_channel.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <limits>

#include <libssh/callbacks.h>
#include <spdlog/spdlog.h>

namespace barge::ssh {
namespace {

constexpr size_t kChunk = 32 * 1024;
// At most this many reads of each output stream in one Service call; what
// is left waits for the next.
constexpr size_t kReadsPerService = 64;

// Writes all of `data` to `fd` (blocking; a non-blocking fd is waited on).
void WriteAllTo(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = write(fd, data, size);
    if (n > 0) {
      data += n;
      size -= static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      pollfd p{fd, POLLOUT, 0};
      poll(&p, 1, 100);
    } else {
      return;  // the reader is gone: the output is dropped
    }
  }
}

struct ExitInfo {
  std::optional<int> code;
  std::string signal;
};

void OnExitStatus(ssh_session, ssh_channel, int status, void* userdata) noexcept {
  static_cast<ExitInfo*>(userdata)->code = status;
}
void OnExitSignal(ssh_session, ssh_channel, const char* signal, int, const char*, const char*,
                  void* userdata) noexcept {
  static_cast<ExitInfo*>(userdata)->signal = signal ? signal : "";
}

}  // namespace

struct InteractiveChannel::Callbacks {
  ExitInfo info;
  ssh_channel_callbacks_struct cb = {};
};

Result<std::unique_ptr<InteractiveChannel>> InteractiveChannel::Start(
    EventLoop* loop, Executor* via, const std::string& command_line,
    const std::optional<PtySize>& pty, int in_fd, int out_fd, int err_fd) {
  if (!via->health().ok()) return via->health();
  if (via->channel_session() == nullptr) {
    return Status::Error(via->label() + ": no SSH session to open a terminal channel on");
  }
  std::unique_ptr<InteractiveChannel> c(new InteractiveChannel(loop, via));
  c->command_line_ = command_line;
  c->pty_ = pty;
  c->in_fd_ = in_fd;
  c->out_fd_ = out_fd;
  c->err_fd_ = err_fd;
  InteractiveChannel* self = c.get();
  c->hook_ = loop->AddPollHook([self] { self->Service(); });
  loop->Wakeup();
  return c;
}

InteractiveChannel::InteractiveChannel(EventLoop* loop, Executor* via) : loop_(loop), via_(via) {}

InteractiveChannel::~InteractiveChannel() {
  loop_->RemovePollHook(hook_);
  if (in_watched_) loop_->UnwatchFd(in_fd_);
  if (channel_) {
    ssh_remove_channel_callbacks(channel_, &callbacks_->cb);
    ssh_channel_free(channel_);
  }
}

void InteractiveChannel::Resize(int cols, int rows) {
  if (!pty_) return;
  PtySize s = *pty_;
  s.cols = cols;
  s.rows = rows;
  resize_ = s;
  loop_->Wakeup();
}

void InteractiveChannel::Finish(ExitStatus exit) {
  if (done_) return;
  done_ = true;
  exit_ = std::move(exit);
  if (in_watched_) loop_->UnwatchFd(in_fd_);
  in_watched_ = false;
}

void InteractiveChannel::Service() {
  if (done_) return;
  if (!via_->health().ok()) {
    ExitStatus lost;
    lost.error = via_->health().message();
    Finish(lost);
    return;
  }
  if (!Open()) return;
  if (resize_) {
    ssh_channel_change_pty_size(channel_, resize_->cols, resize_->rows);
    resize_.reset();
  }
  RelayOutput(kReadsPerService);
  RelayInput();
  RewatchInput();
  FinishIfEnded();
}

void InteractiveChannel::Fail(const std::string& what) {
  ExitStatus failed;
  failed.error = via_->label() + ": " + what + ": " + ssh_get_error(via_->channel_session());
  Finish(failed);
}

bool InteractiveChannel::Open() {
  if (channel_ == nullptr) {
    channel_ = ssh_channel_new(via_->channel_session());
    if (channel_ == nullptr) {
      Fail("cannot create a channel");
      return false;
    }
    callbacks_ = std::make_unique<Callbacks>();
    ssh_callbacks_init(&callbacks_->cb);
    callbacks_->cb.userdata = &callbacks_->info;
    callbacks_->cb.channel_exit_status_function = &OnExitStatus;
    callbacks_->cb.channel_exit_signal_function = &OnExitSignal;
    ssh_set_channel_callbacks(channel_, &callbacks_->cb);
  }
  if (state_ == State::kOpening) {
    int rc = ssh_channel_open_session(channel_);
    if (rc == SSH_AGAIN) return false;
    if (rc != SSH_OK) {
      Fail("cannot open a channel");
      return false;
    }
    state_ = pty_ ? State::kPty : State::kExec;
  }
  if (state_ == State::kPty) {
    int rc = ssh_channel_request_pty_size(channel_, pty_->term.c_str(), pty_->cols, pty_->rows);
    if (rc == SSH_AGAIN) return false;
    if (rc != SSH_OK) {
      Fail("the host refused a terminal (pty request)");
      return false;
    }
    state_ = State::kExec;
  }
  if (state_ == State::kExec) {
    int rc = ssh_channel_request_exec(channel_, command_line_.c_str());
    if (rc == SSH_AGAIN) return false;
    if (rc != SSH_OK) {
      Fail("the host refused to run the command");
      return false;
    }
    state_ = State::kRunning;
  }
  return true;
}

void InteractiveChannel::RelayOutput(size_t max_reads) {
  char buf[kChunk];
  for (int stream = 0; stream < 2; ++stream) {
    for (size_t i = 0; i < max_reads; ++i) {
      int n = ssh_channel_read_nonblocking(channel_, buf, sizeof buf, stream);
      if (n <= 0) break;
      WriteAllTo(stream == 0 ? out_fd_ : err_fd_, buf, static_cast<size_t>(n));
    }
  }
}

bool InteractiveChannel::ReadInput() {
  uint32_t room = std::min<uint32_t>(ssh_channel_window_size(channel_), kChunk);
  if (room == 0) return false;
  // Read only what is there: the input is not made non-blocking (the
  // flag lives in the open file description, shared with the shell
  // and whatever else holds it, and would outlive a killed barge).
  pollfd ready{in_fd_, POLLIN, 0};
  if (poll(&ready, 1, 0) <= 0 || (ready.revents & (POLLIN | POLLHUP | POLLERR)) == 0) return false;
  char buf[kChunk];
  ssize_t n = read(in_fd_, buf, room);
  if (n > 0) {
    pending_.assign(buf, static_cast<size_t>(n));
    pending_off_ = 0;
  } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
    in_eof_ = true;
  } else {
    return false;
  }
  return true;
}

void InteractiveChannel::RelayInput() {
  for (int i = 0; i < 16 && !eof_sent_; ++i) {
    if (pending_off_ == pending_.size() && !in_eof_ && !ReadInput()) break;
    if (pending_off_ < pending_.size()) {
      uint32_t room = ssh_channel_window_size(channel_);
      size_t want = std::min<size_t>(room, pending_.size() - pending_off_);
      if (want == 0) break;
      int rc = ssh_channel_write(channel_, pending_.data() + pending_off_, static_cast<uint32_t>(want));
      if (rc == SSH_ERROR) break;
      pending_off_ += static_cast<size_t>(std::max(rc, 0));
      if (pending_off_ < pending_.size()) break;
    }
    if (pending_off_ == pending_.size() && in_eof_) {
      if (!pty_) ssh_channel_send_eof(channel_);
      eof_sent_ = true;
    }
  }
}

void InteractiveChannel::RewatchInput() {
  const bool want_in = !in_eof_ && pending_off_ == pending_.size() &&
                       ssh_channel_window_size(channel_) > 0;
  if (want_in == in_watched_) return;
  if (want_in) {
    loop_->WatchFd(in_fd_, POLLIN, [](short) {});  // Service runs after it
  } else {
    loop_->UnwatchFd(in_fd_);
  }
  in_watched_ = want_in;
}

void InteractiveChannel::FinishIfEnded() {
  if (!ssh_channel_is_closed(channel_) &&
      !(ssh_channel_is_eof(channel_) && ssh_channel_poll(channel_, 0) == SSH_EOF &&
        callbacks_->info.code)) {
    return;
  }
  // Whatever is left in the buffers first.
  RelayOutput(std::numeric_limits<size_t>::max());
  ExitStatus exit;
  if (callbacks_->info.code) {
    exit.code = *callbacks_->info.code;
  } else if (!callbacks_->info.signal.empty()) {
    exit.signal = callbacks_->info.signal;
    exit.code = callbacks_->info.signal == "INT" ? 130 : callbacks_->info.signal == "KILL" ? 137 : 143;
  } else {
    exit.error = via_->label() + ": the command's channel closed without an exit status";
  }
  Finish(exit);
}

}  // namespace barge::ssh
