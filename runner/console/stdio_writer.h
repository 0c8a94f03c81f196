// StdioWriter: barge's own stdout and stderr, written so that a reader that
// stalls never stalls the event loop (and with it the job's timing).
//
// A stream that is a terminal is written at once, as before: a person reads
// it and the status line (progress.h) is drawn on it. Any other stream (a
// pipe, a file, a socket: CI log collectors, `barge run | tee`) gets a
// queue: bytes are written from the event loop only when poll(2) says the
// fd can take them, at most PIPE_BUF bytes per write on a pipe or socket
// (so a write never blocks, without setting O_NONBLOCK on a file
// description other processes share). stdout and stderr that are the same
// open file (`2>&1`) share one queue, so their order is kept.
//
// Memory is bounded: once a queue holds `bound` bytes the writer is behind().
// Writers of job lines (LogSink) then stop queueing, remember where they
// stopped in their kept log files, and register a Backlog; when the queues
// fall under bound / 2 the writer asks each backlog, oldest first, to queue
// more from its files. So the terminal falls behind and catches up from the
// kept files instead of dropping lines or growing without end.
//
// A reader that has gone (EPIPE) drops that stream's output from then on.
// Single-threaded: used from the event loop's thread only.
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/enum_names.h"
#include "base/fd_reactor.h"

namespace barge::runner {

enum class Stream { kStdout, kStderr };
// As a kept log file's second field spells them (log_sink.h).
inline constexpr auto kStreamNames =
    std::to_array<EnumName<Stream>>({{Stream::kStdout, "stdout"}, {Stream::kStderr, "stderr"}});
static_assert(ListsEveryValueInOrder(kStreamNames));

class StdioWriter {
 public:
  static constexpr size_t kDefaultBound = 4 << 20;

  // Writes to `out_fd` and `err_fd` (not owned), driven by `loop` (not
  // owned; must outlive this).
  StdioWriter(FdReactor* loop, int out_fd = 1, int err_fd = 2, size_t bound = kDefaultBound);
  // Drain()s, then stops watching the fds.
  ~StdioWriter();
  StdioWriter(const StdioWriter&) = delete;
  StdioWriter& operator=(const StdioWriter&) = delete;

  // Queues `bytes` for `stream` (or writes them at once, on a terminal).
  // Never blocks on a queued stream; queues past the bound when asked to
  // (barge's own messages are few and must not be lost).
  void Write(Stream stream, std::string_view bytes);

  // True while job lines must not be queued: a queue holds `bound` bytes or
  // more, or a backlog still has lines to give.
  bool behind() const;
  // True while a queue holds `bound` bytes or more: a backlog's Refill stops.
  bool full() const;
  // Whether `stream` is written at once (a terminal) rather than queued.
  bool direct(Stream stream) const;
  // Bytes waiting in `stream`'s queue.
  size_t queued(Stream stream) const;

  // A source of lines that went unqueued while behind. Refill queues lines
  // (with Write) until full() or it has none left, and returns whether it
  // still has lines (false also when it cannot read them: Drain relies on
  // progress). Flush makes its files readable (called at the start and end
  // of every loop pass). Both run on the loop's thread.
  class Backlog {
   public:
    virtual ~Backlog() = default;
    virtual bool Refill(StdioWriter& writer) = 0;
    virtual void Flush() = 0;
  };
  // `b` (not owned) until Remove, which it calls before it goes; backlogs
  // refill in the order they were added. A backlog calls Pending when it has
  // lines to give.
  void Add(Backlog* b);
  void Remove(Backlog* b);
  void Pending(Backlog* b);

  // Writes every queued byte and every backlog's lines, blocking: for the end
  // of the process (or of the last backlog). A reader that still stalls then
  // holds barge's exit, as a blocking write would have; the job is over.
  void Drain();

  // A FILE* whose bytes go through Write(kStderr), unbuffered: for writers
  // that take a FILE* (Progress, messages). Owned by this writer.
  std::FILE* err_file();

 private:
  struct Queue {
    int fd = -1;
    bool direct = false;     // a terminal: written at once
    bool pipe_like = true;   // a pipe or socket: PIPE_BUF per write
    bool closed = false;     // EPIPE or another hard error: dropped
    bool watched = false;
    std::string bytes;
    size_t head = 0;         // bytes[head..] are still to write
    size_t size() const { return bytes.size() - head; }
  };
  Queue& QueueOf(Stream stream);
  const Queue& QueueOf(Stream stream) const;
  // Writes what `q`'s fd takes now without blocking; true if it wrote all.
  bool WriteSome(Queue& q);
  void WriteAll(Queue& q);  // blocking
  void Watch(Queue& q);
  void Refill();

  FdReactor* loop_;
  size_t bound_;
  Queue out_;
  Queue err_;
  bool shared_ = false;  // err goes to out_'s queue
  std::vector<Backlog*> backlogs_;  // in the order added
  std::set<Backlog*> pending_;
  FdReactor::HookId hook_ = 0;
  std::FILE* err_file_ = nullptr;
};

}  // namespace barge::runner
