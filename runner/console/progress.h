// Progress of a phase that runs on many hosts at once ("preflight",
// "pushing barge/torch:local", "starting workers"), printed the way ninja
// prints a build: counts in brackets, one line per event.
//
// On a terminal, one status line is overprinted in place and elided in the
// middle to the terminal's width:
//   \r[0/16] preflight\e[K                    Begin
//   \r[3/16] preflight: h3 ok\e[K             Done (ok)
//   \r\e[K[4/16] preflight: h7 FAILED: why\n  Done (failed): a permanent line
//   \r[4/16] preflight\e[K                      (never elided), then the status
//   \r\e[K[16/16] preflight: done in 1.2 s (15 ok, 1 failed)\n     End
// The status line has no newline, so whoever else writes to the terminal
// must go through Print(), or call Clear() before and Redraw() after.
//
// Anywhere else (a pipe, a file, CI) there are no escape sequences and no
// carriage returns, and only lines worth keeping in a log of 100 hosts:
//   [0/100] preflight                                    Begin
//   [7/100] preflight: h7 FAILED: why                    every failure
//   [40/100] preflight                                   the count, when a host
//                                                        finishes 5 s or more after
//                                                        the previous line
//   [100/100] preflight: done in 9.1 s (99 ok, 1 failed) End
// Successful hosts get no line of their own (unlike ninja): a summary line
// and the failures are what a reader of a CI log needs.
//
// Phase names, host names and details are shown with control characters
// (newlines included) replaced by spaces and trailing spaces dropped, so one
// event is one line.
// Columns are counted in UTF-8 code points (no wide characters).
//
// Not thread-safe: used from the event loop's thread only. Flushes `out`
// after every write, so it interleaves correctly with other FILE*s that are
// flushed too.
#pragma once

#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>

namespace barge::runner {

// `text` if it has at most `width` code points; otherwise its start and end
// around "...", `width` code points in all. Below a width of 4 it is cut at
// the end instead. Never splits a UTF-8 sequence.
std::string ElideMiddle(std::string_view text, int width);

class Progress {
 public:
  using Clock = std::chrono::steady_clock;

  // Writes to `out` (not owned; must outlive this). `terminal` selects the
  // overprinting mode (the caller decides, e.g. isatty(fileno(stderr))).
  // `width` > 0 fixes the terminal width; 0 asks the terminal of `out` before
  // every draw (TIOCGWINSZ), 80 if it cannot say.
  Progress(std::FILE* out, bool terminal, std::function<Clock::time_point()> now = Clock::now,
           int width = 0);
  // Ends an unfinished phase as End() does.
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Starts a phase over `total` hosts; ends the current one first, if any.
  void Begin(std::string_view phase, int total);
  // One host finished. `detail` says why it failed (or, when ok, anything
  // worth a glance, e.g. "4 GPUs"); may be empty. Ignored outside a phase.
  void Done(std::string_view host, bool ok, std::string_view detail = {});
  // Ends the phase with a summary line. If fewer than `total` hosts were
  // done, the summary says "stopped after" and how many did not finish.
  // No-op outside a phase.
  void End();

  // Writes `line` and a newline (`line` is written as is and should not end
  // in one) without garbling the status line: clears it, writes, redraws it.
  void Print(std::string_view line);
  // For output that does not go through `out` (the job's log lines on
  // stdout): Clear() removes the status line, Redraw() puts it back. Both
  // do nothing when not on a terminal or outside a phase.
  void Clear();
  void Redraw();

 private:
  std::string CountPrefix() const;  // "[3/16] preflight"
  void ShowStatus(const std::string& text);
  void WritePermanent(const std::string& line);  // clears the status line first
  void Write(const std::string& bytes);          // and flushes
  int Width() const;

  std::FILE* out_;
  bool terminal_;
  std::function<Clock::time_point()> now_;
  int width_;

  bool active_ = false;
  std::string phase_;
  int total_ = 0;
  int ok_ = 0;
  int failed_ = 0;
  Clock::time_point started_;
  Clock::time_point last_plain_line_;  // not on a terminal: when a line was last printed
  std::string status_;                 // on a terminal: the text of the status line
  bool status_shown_ = false;          // on a terminal: the status line is on screen
};

}  // namespace barge::runner
