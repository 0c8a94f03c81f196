// A `sleep` child of the test, as another user when asked: the process a
// recorded pid may name after a crash or a reboot (see the store's
// ControllerAlive and `barge down`).
#pragma once

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <optional>
#include <string>

namespace barge::testing {

// `sleep SECONDS`, as `uid` when given, killed and reaped by the destructor.
// pid() is -1 when it could not be started (or could not become `uid`).
class Sleeper {
 public:
  explicit Sleeper(std::optional<uid_t> uid = std::nullopt, int seconds = 30) {
    int exec_done[2];
    if (pipe2(exec_done, O_CLOEXEC) != 0) return;
    const std::string how_long = std::to_string(seconds);
    pid_ = fork();
    if (pid_ == 0) {
      close(exec_done[0]);
      if (!uid || (setgroups(0, nullptr) == 0 && setresgid(*uid, *uid, *uid) == 0 &&
                   setresuid(*uid, *uid, *uid) == 0)) {
        execlp("sleep", "sleep", how_long.c_str(), static_cast<char*>(nullptr));
      }
      (void)!write(exec_done[1], "n", 1);
      _exit(127);
    }
    close(exec_done[1]);
    char failed;
    // EOF once exec closed the pipe: the child is `sleep` as `uid` by then.
    if (pid_ > 0 && read(exec_done[0], &failed, 1) != 0) {
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
    close(exec_done[0]);
  }
  ~Sleeper() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  Sleeper(const Sleeper&) = delete;
  Sleeper& operator=(const Sleeper&) = delete;

  int pid() const { return pid_; }
  // Not signalled to death: it has not exited (it is our child, so it
  // would be a zombie if it had).
  bool Running() const { return waitpid(pid_, nullptr, WNOHANG) == 0; }

 private:
  pid_t pid_ = -1;
};

}  // namespace barge::testing
