// The local terminal for `barge exec -it`: raw mode while a remote shell
// owns it, and its size.
#pragma once

#include <termios.h>

#include <optional>

namespace barge::runner {

// Puts terminal `fd` in raw mode (no echo, no line editing, no signals from
// ^C/^Z: those bytes go to the remote pty) and restores the previous mode
// when destroyed. Does nothing when `fd` is not a terminal.
class RawTerminal {
 public:
  explicit RawTerminal(int fd);
  ~RawTerminal();
  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;

 private:
  int fd_;
  std::optional<termios> saved_;
};

struct TerminalSize {
  int cols = 80;
  int rows = 24;
};
// The size of terminal `fd` (80x24 when it cannot say).
TerminalSize SizeOf(int fd);

}  // namespace barge::runner
