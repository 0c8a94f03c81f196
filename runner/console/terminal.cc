// RawTerminal and SizeOf: termios and TIOCGWINSZ.
#include "runner/console/terminal.h"

#include <sys/ioctl.h>
#include <unistd.h>

namespace barge::runner {

RawTerminal::RawTerminal(int fd) : fd_(fd) {
  termios t;
  if (!isatty(fd) || tcgetattr(fd, &t) != 0) return;
  saved_ = t;
  cfmakeraw(&t);
  tcsetattr(fd, TCSADRAIN, &t);
}

RawTerminal::~RawTerminal() {
  if (saved_) tcsetattr(fd_, TCSADRAIN, &*saved_);
}

TerminalSize SizeOf(int fd) {
  winsize w{};
  TerminalSize s;
  if (ioctl(fd, TIOCGWINSZ, &w) == 0 && w.ws_col > 0 && w.ws_row > 0) {
    s.cols = w.ws_col;
    s.rows = w.ws_row;
  }
  return s;
}

}  // namespace barge::runner
