// BytePipe: a stream of bytes handed from the event loop's thread (a host
// command's stdout) to one worker thread (an upload), with a bound the
// producer keeps by pausing its source (Command::PauseOutput) while Full().
//
// The producer pushes without blocking and closes with how the stream
// ended; the consumer reads in order, blocking, and may abandon the rest
// (the producer then drops its source). Memory: what is queued, at most
// the high mark plus the producer's last push.
//
// Threading: Push, Close, Full, Abandoned and Consumed from the producer's
// thread; Read and Abandon from the consumer's; any of them at once.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace barge::runner::internal {

class BytePipe {
 public:
  explicit BytePipe(size_t high_mark) : high_mark_(high_mark) {}
  BytePipe(const BytePipe&) = delete;
  BytePipe& operator=(const BytePipe&) = delete;

  // Producer. After Close or once abandoned, Push drops the bytes.
  void Push(std::string_view data);
  // How the stream ended: ok, or why it broke off (the consumer's Read
  // returns it after the bytes pushed before).
  void Close(Status end);
  // True while at least the high mark is queued: pause the source.
  bool Full() const;
  // True once the consumer wants no more (drop the source).
  bool Abandoned() const;
  // True once the consumer has read the end or abandoned the stream.
  bool Consumed() const;

  // Consumer. Moves the queued bytes (at least one) into *out, waiting for
  // them; at the end returns false with *end set (its Close status), or
  // when `*cancel` turns true (checked every 100 ms) with an error.
  bool Read(std::string* out, Status* end, const std::atomic<bool>* cancel = nullptr);
  void Abandon();

 private:
  const size_t high_mark_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> chunks_;
  size_t queued_ = 0;
  std::optional<Status> end_;
  bool abandoned_ = false;
  bool consumed_ = false;
};

}  // namespace barge::runner::internal
