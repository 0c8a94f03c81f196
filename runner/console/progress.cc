#include "runner/console/progress.h"

#include <sys/ioctl.h>

#include <cstdio>
#include <string>

namespace barge::runner {
namespace {

constexpr char kClearToEndOfLine[] = "\x1b[K";
// Not on a terminal: the longest silence before a count line, while hosts
// keep finishing.
constexpr auto kPlainCountInterval = std::chrono::seconds(5);

bool IsContinuationByte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

size_t CodePoints(std::string_view text) {
  size_t n = 0;
  for (char c : text) n += !IsContinuationByte(c);
  return n;
}

// Byte length of the first `n` code points of `text`.
size_t PrefixBytes(std::string_view text, size_t n) {
  size_t i = 0;
  for (; i < text.size(); ++i) {
    if (!IsContinuationByte(text[i]) && n-- == 0) break;
  }
  return i;
}

// Control characters become spaces; trailing spaces go.
std::string OneLine(std::string_view text) {
  std::string line(text);
  for (char& c : line) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  }
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line;
}

std::string Seconds(Progress::Clock::duration d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", std::chrono::duration<double>(d).count());
  return buf;
}

}  // namespace

std::string ElideMiddle(std::string_view text, int width) {
  size_t length = CodePoints(text);
  if (width < 0) width = 0;
  if (length <= static_cast<size_t>(width)) return std::string(text);
  if (width < 4) return std::string(text.substr(0, PrefixBytes(text, width)));
  size_t kept = width - 3;
  size_t tail = kept / 2;
  size_t head = kept - tail;
  return std::string(text.substr(0, PrefixBytes(text, head))) + "..." +
         std::string(text.substr(PrefixBytes(text, length - tail)));
}

Progress::Progress(std::FILE* out, bool terminal, std::function<Clock::time_point()> now, int width)
    : out_(out), terminal_(terminal), now_(std::move(now)), width_(width) {}

Progress::~Progress() { End(); }

void Progress::Begin(std::string_view phase, int total) {
  End();
  active_ = true;
  phase_ = OneLine(phase);
  total_ = total;
  ok_ = 0;
  failed_ = 0;
  started_ = now_();
  last_plain_line_ = started_;
  if (terminal_) {
    ShowStatus(CountPrefix());
  } else {
    Write(CountPrefix() + "\n");
  }
}

void Progress::Done(std::string_view host, bool ok, std::string_view detail) {
  if (!active_) return;
  ++(ok ? ok_ : failed_);
  std::string text = CountPrefix() + ": " + OneLine(host) + (ok ? " ok" : " FAILED");
  std::string why = OneLine(detail);
  if (!why.empty()) text += ": " + why;

  if (terminal_) {
    if (ok) {
      ShowStatus(text);
    } else {
      WritePermanent(text);
      ShowStatus(CountPrefix());
    }
    return;
  }
  Clock::time_point now = now_();
  if (!ok) {
    Write(text + "\n");
    last_plain_line_ = now;
  } else if (ok_ + failed_ < total_ && now - last_plain_line_ >= kPlainCountInterval) {
    Write(CountPrefix() + "\n");
    last_plain_line_ = now;
  }
}

void Progress::End() {
  if (!active_) return;
  int done = ok_ + failed_;
  std::string summary = CountPrefix() + ": " + (done >= total_ ? "done in " : "stopped after ") +
                        Seconds(now_() - started_) + " s (" + std::to_string(ok_) + " ok";
  if (failed_ > 0) summary += ", " + std::to_string(failed_) + " failed";
  if (done < total_) summary += ", " + std::to_string(total_ - done) + " not finished";
  summary += ")";
  WritePermanent(summary);
  active_ = false;
  status_.clear();
}

void Progress::Print(std::string_view line) {
  Clear();
  Write(std::string(line) + "\n");
  Redraw();
}

void Progress::Clear() {
  if (!status_shown_) return;
  Write(std::string("\r") + kClearToEndOfLine);
  status_shown_ = false;
}

void Progress::Redraw() {
  if (terminal_ && active_ && !status_shown_) ShowStatus(status_);
}

std::string Progress::CountPrefix() const {
  return "[" + std::to_string(ok_ + failed_) + "/" + std::to_string(total_) + "] " + phase_;
}

void Progress::ShowStatus(const std::string& text) {
  status_ = text;
  Write("\r" + ElideMiddle(text, Width()) + kClearToEndOfLine);
  status_shown_ = true;
}

void Progress::WritePermanent(const std::string& line) {
  Clear();
  Write(line + "\n");
}

void Progress::Write(const std::string& bytes) {
  std::fwrite(bytes.data(), 1, bytes.size(), out_);
  std::fflush(out_);
}

int Progress::Width() const {
  if (width_ > 0) return width_;
  struct winsize size {};
  int fd = fileno(out_);
  if (fd >= 0 && ioctl(fd, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  return 80;
}

}  // namespace barge::runner
