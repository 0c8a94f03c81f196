#include "ssh/local_executor.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>

#include <spdlog/spdlog.h>

extern char** environ;

namespace barge::ssh {
namespace {

constexpr size_t kReadChunk = 64 * 1024;
// Reads per readiness callback, so that one chatty child cannot starve the
// other fds of the loop.
constexpr int kReadsPerEvent = 4;
constexpr std::chrono::milliseconds kFirstReapDelay{1};
constexpr std::chrono::milliseconds kMaxReapDelay{100};

// Writes `command_line` as a script into a new 0700 directory and returns
// the script's path; the script removes the directory before anything
// else ($0 is the script when it runs as `sh FILE`).
Result<std::string> WriteScript(const std::string& command_line) {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base != nullptr && *base != '\0' ? base : "/tmp") +
                        "/barge.XXXXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) {
    return Status::Error("local: cannot create a directory for a long command line (" +
                         std::to_string(command_line.size()) + " bytes) in " +
                         pattern.substr(0, pattern.rfind('/')) + ": " + std::strerror(errno));
  }
  const std::string path = pattern + "/s";
  const std::string script = "rm -rf -- \"${0%/*}\"\n" + command_line;
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  size_t written = 0;
  while (fd >= 0 && written < script.size()) {
    ssize_t n = write(fd, script.data() + written, script.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    written += static_cast<size_t>(n);
  }
  bool ok = fd >= 0 && written == script.size();
  int e = errno;
  if (fd >= 0 && close(fd) != 0 && ok) {
    ok = false;
    e = errno;
  }
  if (!ok) {
    unlink(path.c_str());
    rmdir(pattern.c_str());
    return Status::Error("local: cannot write a long command line (" +
                         std::to_string(command_line.size()) + " bytes) to " + path + ": " +
                         std::strerror(e));
  }
  return path;
}

// Removes what WriteScript made when the script will never run.
void RemoveScript(const std::string& path) {
  unlink(path.c_str());
  rmdir(path.substr(0, path.rfind('/')).c_str());
}

void CloseFd(int* fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

bool SetNonBlocking(int fd) {
  int flags = fcntl(fd, F_GETFL);
  return flags >= 0 && fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
}

// write(2) that turns a SIGPIPE into EPIPE without touching the process's
// signal dispositions (which children would otherwise inherit): SIGPIPE is
// blocked around the write and a SIGPIPE it raised is consumed.
ssize_t WriteWithoutSigpipe(int fd, const char* data, size_t size) {
  sigset_t pipe_set, pending, old_mask;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  sigpending(&pending);
  bool was_pending = sigismember(&pending, SIGPIPE) == 1;
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old_mask);
  ssize_t n = write(fd, data, size);
  int saved = errno;
  if (n < 0 && saved == EPIPE && !was_pending) {
    struct timespec zero = {0, 0};
    while (sigtimedwait(&pipe_set, nullptr, &zero) < 0 && errno == EINTR) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  errno = saved;
  return n;
}

ExitStatus FromWaitStatus(int status) {
  ExitStatus exit;
  if (WIFEXITED(status)) {
    exit.code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    exit.code = 128 + WTERMSIG(status);
    const char* name = sigabbrev_np(WTERMSIG(status));
    exit.signal = name ? name : std::to_string(WTERMSIG(status));
  } else {
    exit.error = "unexpected wait status " + std::to_string(status);
  }
  return exit;
}

// Reaps a child nobody waits for any more (its command was destroyed), from
// the loop, with a growing delay.
void ReapLater(EventLoop* loop, pid_t pid, std::chrono::milliseconds delay) {
  loop->AddTimer(EventLoop::Clock::now() + delay, [loop, pid, delay] {
    int status;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == 0) {
      ReapLater(loop, pid, std::min(delay * 2, std::chrono::milliseconds(1000)));
    } else {
      spdlog::debug("Local process: reaped after its command was dropped. [pid: {}]", pid);
    }
  });
}

}  // namespace

// One child process. Owns its pipe ends, its fd watches and its timers; the
// loop calls back into it only while it exists (the destructor unwatches and
// cancels everything).
class LocalExecutor::LocalCommand : public Command {
 public:
  LocalCommand(EventLoop* loop, pid_t pid, int stdin_fd, int stdout_fd, int stderr_fd,
               CommandCallbacks callbacks)
      : loop_(loop),
        pid_(pid),
        stdin_fd_(stdin_fd),
        stdout_fd_(stdout_fd),
        stderr_fd_(stderr_fd),
        callbacks_(std::move(callbacks)),
        alive_(std::make_shared<bool>(true)) {
    loop_->WatchFd(stdout_fd_, POLLIN, [this](short) { OnOutput(&stdout_fd_, false); });
    loop_->WatchFd(stderr_fd_, POLLIN, [this](short) { OnOutput(&stderr_fd_, true); });
  }

  ~LocalCommand() override {
    *alive_ = false;
    if (stdin_watched_) loop_->UnwatchFd(stdin_fd_);
    if (stdout_fd_ >= 0 && !stdout_paused_) loop_->UnwatchFd(stdout_fd_);
    if (stderr_fd_ >= 0) loop_->UnwatchFd(stderr_fd_);
    CloseFd(&stdin_fd_);
    CloseFd(&stdout_fd_);
    CloseFd(&stderr_fd_);
    if (reap_timer_) loop_->CancelTimer(reap_timer_);
    if (!reaped_) {
      spdlog::debug("Local process: command dropped while running. [pid: {}]", pid_);
      ReapLater(loop_, pid_, kFirstReapDelay);
    }
  }

  LocalCommand(const LocalCommand&) = delete;
  LocalCommand& operator=(const LocalCommand&) = delete;

  void WriteStdin(std::string_view data) override {
    if (stdin_fd_ < 0 || stdin_close_requested_) return;
    stdin_queue_.append(data);
    FlushStdin();
  }

  void CloseStdin() override {
    if (stdin_fd_ < 0 || stdin_close_requested_) return;
    stdin_close_requested_ = true;
    FlushStdin();
  }

  bool done() const override { return done_; }
  size_t stdin_pending() const override { return stdin_queue_.size() - stdin_offset_; }

  // Paused, the stdout pipe is not watched (nor read): the child blocks on
  // its writes once the pipe is full.
  void PauseOutput(bool paused) override {
    if (paused == stdout_paused_) return;
    stdout_paused_ = paused;
    if (stdout_fd_ < 0) return;
    if (paused) {
      loop_->UnwatchFd(stdout_fd_);
    } else {
      loop_->WatchFd(stdout_fd_, POLLIN, [this](short) { OnOutput(&stdout_fd_, false); });
    }
  }

 private:
  // Writes what the pipe takes now; watches for POLLOUT while bytes remain.
  void FlushStdin() {
    while (stdin_offset_ < stdin_queue_.size()) {
      ssize_t n = WriteWithoutSigpipe(stdin_fd_, stdin_queue_.data() + stdin_offset_,
                                      stdin_queue_.size() - stdin_offset_);
      if (n > 0) {
        stdin_offset_ += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        if (!stdin_watched_) {
          stdin_watched_ = true;
          loop_->WatchFd(stdin_fd_, POLLOUT, [this](short) { FlushStdin(); });
        }
        return;
      }
      // EPIPE: the child closed its stdin. What is queued cannot arrive.
      spdlog::debug("Local process: stdin closed by the child, {} bytes dropped. [pid: {}, error: {}]",
                    stdin_queue_.size() - stdin_offset_, pid_, std::strerror(errno));
      ShutStdin();
      return;
    }
    stdin_queue_.clear();
    stdin_offset_ = 0;
    if (stdin_watched_) {
      stdin_watched_ = false;
      loop_->UnwatchFd(stdin_fd_);
    }
    if (stdin_close_requested_) ShutStdin();
  }

  void ShutStdin() {
    if (stdin_watched_) {
      stdin_watched_ = false;
      loop_->UnwatchFd(stdin_fd_);
    }
    CloseFd(&stdin_fd_);
    stdin_queue_.clear();
    stdin_offset_ = 0;
  }

  void OnOutput(int* fd, bool is_stderr) {
    char buffer[kReadChunk];
    for (int i = 0; i < kReadsPerEvent && *fd >= 0; ++i) {
      ssize_t n = read(*fd, buffer, sizeof buffer);
      if (n > 0) {
        std::shared_ptr<bool> alive = alive_;
        auto& callback = is_stderr ? callbacks_.on_stderr : callbacks_.on_stdout;
        if (callback) {
          try {
            callback(std::string_view(buffer, static_cast<size_t>(n)));
          } catch (const std::exception& e) {
            spdlog::error("An output callback threw: {} [pid: {}]", e.what(), pid_);
          } catch (...) {
            spdlog::error("An output callback threw. [pid: {}]", pid_);
          }
        }
        if (!*alive) return;  // the callback destroyed this command
        if (!is_stderr && stdout_paused_) return;  // the callback paused it
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n < 0) {
        spdlog::debug("Local process: read failed, treated as EOF. [pid: {}, error: {}]", pid_,
                      std::strerror(errno));
      }
      loop_->UnwatchFd(*fd);
      CloseFd(fd);
    }
    if (stdout_fd_ < 0 && stderr_fd_ < 0) TryReap();  // last statement: may finish
  }

  // Once both output pipes are at EOF: collect the exit status, polling with
  // a short, growing delay if the child has not exited yet.
  void TryReap() {
    reap_timer_ = 0;
    int status = 0;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == 0) {
      reap_timer_ = loop_->AddTimer(EventLoop::Clock::now() + reap_delay_, [this] { TryReap(); });
      reap_delay_ = std::min(reap_delay_ * 2, kMaxReapDelay);
      return;
    }
    reaped_ = true;
    ExitStatus exit;
    if (r == pid_) {
      exit = FromWaitStatus(status);
    } else {
      exit.error = std::string("local: the exit status of process ") + std::to_string(pid_) +
                   " was lost: " + std::strerror(errno);
    }
    Finish(exit);  // last statement: may destroy this
  }

  // Delivers on_exit; the callback may destroy this command, so nothing
  // touches a member after it.
  void Finish(const ExitStatus& exit) {
    done_ = true;
    if (stdin_fd_ >= 0) ShutStdin();
    spdlog::debug("Local process: exited. [pid: {}, code: {}, error: {}]", pid_, exit.code,
                  exit.error);
    std::function<void(const ExitStatus&)> on_exit = std::move(callbacks_.on_exit);
    if (!on_exit) return;
    try {
      on_exit(exit);
    } catch (const std::exception& e) {
      spdlog::error("An exit callback threw: {}", e.what());
    } catch (...) {
      spdlog::error("An exit callback threw.");
    }
  }

  EventLoop* loop_;
  pid_t pid_;
  int stdin_fd_;
  int stdout_fd_;
  int stderr_fd_;
  CommandCallbacks callbacks_;
  std::shared_ptr<bool> alive_;  // false once destroyed; checked after callbacks
  std::string stdin_queue_;
  size_t stdin_offset_ = 0;
  bool stdin_watched_ = false;
  bool stdout_paused_ = false;  // PauseOutput: stdout_fd_ is not watched
  bool stdin_close_requested_ = false;
  bool reaped_ = false;
  bool done_ = false;
  EventLoop::TimerId reap_timer_ = 0;
  std::chrono::milliseconds reap_delay_ = kFirstReapDelay;
};

// One connection to a unix socket (OpenUnixStream). Connects from a timer of
// the loop (so that every outcome arrives from Poll), then watches its
// socket: POLLIN always, POLLOUT while queued bytes wait. Owns its fd, its
// watch and its timer; the destructor releases them.
class LocalExecutor::LocalStream : public Command {
 public:
  LocalStream(EventLoop* loop, std::string path, CommandCallbacks callbacks)
      : loop_(loop),
        path_(std::move(path)),
        callbacks_(std::move(callbacks)),
        alive_(std::make_shared<bool>(true)) {
    deadline_ = loop_->Now() + kConnectRetryFor;
    timer_ = loop_->AddTimer(loop_->Now(), [this] { Connect(); });
  }

  ~LocalStream() override {
    *alive_ = false;
    if (timer_ != 0) loop_->CancelTimer(timer_);
    Release();
  }

  LocalStream(const LocalStream&) = delete;
  LocalStream& operator=(const LocalStream&) = delete;

  void WriteStdin(std::string_view data) override {
    if (done_ || close_requested_ || write_shut_) return;
    queue_.append(data);
    if (connected_) Flush();
  }

  void CloseStdin() override {
    if (done_ || close_requested_) return;
    close_requested_ = true;
    if (connected_) Flush();
  }

  bool done() const override { return done_; }
  size_t stdin_pending() const override { return done_ ? 0 : queue_.size() - offset_; }
  void PauseOutput(bool) override {}  // a stream: see executor.h

 private:
  void Connect() {
    timer_ = 0;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path_.size() >= sizeof addr.sun_path) {
      return Fail("the path is longer than a unix socket path may be (" +
                  std::to_string(sizeof addr.sun_path - 1) + " bytes)");
    }
    std::memcpy(addr.sun_path, path_.data(), path_.size());
    fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return Fail(std::string("cannot create a socket: ") + std::strerror(errno));
    if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) return Connected();
    const int e = errno;
    if (e == EINPROGRESS) {
      // Not done by Linux for unix sockets; handled like TCP to be safe.
      connecting_ = true;
      loop_->WatchFd(fd_, POLLOUT, [this](short revents) { OnEvent(revents); });
      return;
    }
    if (e == EAGAIN && loop_->Now() < deadline_) {
      // The listener's backlog is full: try again shortly.
      CloseFd(&fd_);
      timer_ = loop_->AddTimer(loop_->Now() + std::chrono::milliseconds(10), [this] { Connect(); });
      return;
    }
    Fail(std::string("cannot connect: ") + std::strerror(e));
  }

  void Connected() {
    connecting_ = false;
    connected_ = true;
    spdlog::debug("Local stream: connected. [socket: {}]", path_);
    Flush();
    if (!done_) Watch();
  }

  void Watch() {
    if (fd_ < 0) return;
    const short want =
        static_cast<short>(POLLIN | (offset_ < queue_.size() && !write_shut_ ? POLLOUT : 0));
    if (want == watched_) return;
    loop_->WatchFd(fd_, want, [this](short revents) { OnEvent(revents); });
    watched_ = want;
  }

  void OnEvent(short revents) {
    (void)revents;
    if (connecting_) {
      int err = 0;
      socklen_t len = sizeof err;
      getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) return Fail(std::string("cannot connect: ") + std::strerror(err));
      loop_->UnwatchFd(fd_);
      watched_ = 0;
      return Connected();
    }
    Flush();
    char buffer[kReadChunk];
    for (int i = 0; i < kReadsPerEvent && !done_; ++i) {
      ssize_t n = recv(fd_, buffer, sizeof buffer, MSG_DONTWAIT);
      if (n > 0) {
        std::shared_ptr<bool> alive = alive_;
        if (callbacks_.on_stdout) {
          try {
            callbacks_.on_stdout(std::string_view(buffer, static_cast<size_t>(n)));
          } catch (const std::exception& e) {
            spdlog::error("A stream's output callback threw: {} [socket: {}]", e.what(), path_);
          } catch (...) {
            spdlog::error("A stream's output callback threw. [socket: {}]", path_);
          }
        }
        if (!*alive) return;  // the callback destroyed this stream
        continue;
      }
      if (n == 0) {
        ExitStatus closed;
        closed.code = 0;
        return Finish(closed);  // last statement: may destroy this
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return Fail(std::string("connection lost: ") + std::strerror(errno));
    }
    if (!done_) Watch();
  }

  // Sends what the socket takes now; EOF (SHUT_WR) once all is sent and
  // CloseStdin was called.
  void Flush() {
    while (offset_ < queue_.size() && !write_shut_) {
      ssize_t n = send(fd_, queue_.data() + offset_, queue_.size() - offset_,
                       MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        offset_ += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      // The peer stopped reading (EPIPE, a reset): what is queued cannot
      // arrive; the read side tells how the stream ended.
      spdlog::debug("Local stream: write failed, {} bytes dropped. [socket: {}, error: {}]",
                    queue_.size() - offset_, path_, std::strerror(errno));
      write_shut_ = true;
    }
    if (offset_ == queue_.size() || write_shut_) {
      queue_.clear();
      offset_ = 0;
    }
    if (queue_.empty() && close_requested_ && !write_shut_) {
      shutdown(fd_, SHUT_WR);
      write_shut_ = true;
    }
    if (connected_ && !done_) Watch();
  }

  void Release() {
    if (watched_ != 0 || connecting_) loop_->UnwatchFd(fd_);
    watched_ = 0;
    connecting_ = false;
    CloseFd(&fd_);
  }

  void Fail(const std::string& why) {
    ExitStatus failed;
    failed.error = "local: unix socket " + path_ + ": " + why;
    Finish(failed);  // last statement: may destroy this
  }

  // Delivers on_exit once; the callback may destroy this stream.
  void Finish(const ExitStatus& exit) {
    if (done_) return;
    done_ = true;
    Release();
    queue_.clear();
    offset_ = 0;
    spdlog::debug("Local stream: closed. [socket: {}, error: {}]", path_, exit.error);
    std::function<void(const ExitStatus&)> on_exit = std::move(callbacks_.on_exit);
    callbacks_ = {};
    if (!on_exit) return;
    try {
      on_exit(exit);
    } catch (const std::exception& e) {
      spdlog::error("A stream's exit callback threw: {}", e.what());
    } catch (...) {
      spdlog::error("A stream's exit callback threw.");
    }
  }

  EventLoop* loop_;
  std::string path_;
  CommandCallbacks callbacks_;
  std::shared_ptr<bool> alive_;  // false once destroyed; checked after callbacks
  EventLoop::Clock::time_point deadline_;  // of connect retries
  EventLoop::TimerId timer_ = 0;
  int fd_ = -1;
  short watched_ = 0;
  bool connecting_ = false;
  bool connected_ = false;
  std::string queue_;
  size_t offset_ = 0;
  bool close_requested_ = false;
  bool write_shut_ = false;
  bool done_ = false;
};

LocalExecutor::LocalExecutor(EventLoop* loop) : loop_(loop) {}

Result<std::unique_ptr<Command>> LocalExecutor::OpenUnixStream(const std::string& socket_path,
                                                               CommandCallbacks callbacks) {
  if (socket_path.empty() || socket_path.find('\0') != std::string::npos) {
    return Status::Error("local: \"" + socket_path + "\" is not a unix socket path");
  }
  return std::unique_ptr<Command>(
      std::make_unique<LocalStream>(loop_, socket_path, std::move(callbacks)));
}

LocalExecutor::~LocalExecutor() = default;

Result<std::unique_ptr<Command>> LocalExecutor::Start(const std::string& command_line,
                                                      CommandCallbacks callbacks) {
  if (command_line.find('\0') != std::string::npos) {
    return Status::Error("local: the command line contains a NUL byte");
  }
  std::string script;  // for a long command line: its script's path
  if (command_line.size() > kMaxArgvCommandLine) {
    Result<std::string> written = WriteScript(command_line);
    if (!written.ok()) return written.status();
    script = std::move(written).value();
  }
  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
  auto close_all = [&] {
    for (int* fd : {&in[0], &in[1], &out[0], &out[1], &err[0], &err[1]}) CloseFd(fd);
  };
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
    int e = errno;
    close_all();
    if (!script.empty()) RemoveScript(script);
    return Status::Error(std::string("local: cannot create pipes: ") + std::strerror(e));
  }

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err[1], STDERR_FILENO);

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults, empty;
  sigemptyset(&defaults);
  for (int sig = 1; sig < SIGRTMIN; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) sigaddset(&defaults, sig);
  }
  sigemptyset(&empty);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK |
                                      POSIX_SPAWN_SETPGROUP);

  std::string arg0 = "sh", arg1 = "-c";
  char* argv[] = {arg0.data(), arg1.data(), const_cast<char*>(command_line.c_str()), nullptr};
  if (!script.empty()) {
    argv[1] = script.data();
    argv[2] = nullptr;
  }
  pid_t pid = -1;
  int rc = posix_spawn(&pid, "/bin/sh", &actions, &attr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  CloseFd(&in[0]);
  CloseFd(&out[1]);
  CloseFd(&err[1]);
  if (rc != 0) {
    close_all();
    if (!script.empty()) RemoveScript(script);
    return Status::Error(std::string("local: cannot start /bin/sh: ") + std::strerror(rc));
  }
  if (!SetNonBlocking(in[1]) || !SetNonBlocking(out[0]) || !SetNonBlocking(err[0])) {
    // Practically impossible; the child runs on with closed pipes and is
    // reaped from the loop.
    int e = errno;
    close_all();
    ReapLater(loop_, pid, kFirstReapDelay);
    return Status::Error(std::string("local: cannot set up pipes: ") + std::strerror(e));
  }
  spdlog::debug("Local process: started. [pid: {}, bytes: {}, script: {}, command: {}]", pid,
                command_line.size(), script, command_line);
  return std::unique_ptr<Command>(
      std::make_unique<LocalCommand>(loop_, pid, in[1], out[0], err[0], std::move(callbacks)));
}

}  // namespace barge::ssh
