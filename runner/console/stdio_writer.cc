// StdioWriter: queued, never-blocking writes of barge's stdout and stderr.
#include "runner/console/stdio_writer.h"

#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>

namespace barge::runner {

namespace {

// Whether `fd` can take a write now (a pipe: at least PIPE_BUF bytes).
bool Writable(int fd, int timeout_ms) {
  pollfd p{fd, POLLOUT, 0};
  int r;
  do {
    r = poll(&p, 1, timeout_ms);
  } while (r < 0 && errno == EINTR);
  return r > 0;
}

bool SameFile(int a, int b) {
  struct stat sa, sb;
  if (fstat(a, &sa) != 0 || fstat(b, &sb) != 0) return false;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

}  // namespace

StdioWriter::StdioWriter(FdReactor* loop, int out_fd, int err_fd, size_t bound)
    : loop_(loop), bound_(bound) {
  for (Queue* q : {&out_, &err_}) {
    q->fd = q == &out_ ? out_fd : err_fd;
    q->direct = isatty(q->fd) != 0;
    struct stat st;
    q->pipe_like = !(fstat(q->fd, &st) == 0 && S_ISREG(st.st_mode));
  }
  shared_ = !out_.direct && !err_.direct && SameFile(out_fd, err_fd);
  // Files of the backlogs are made readable once per loop pass, not per line.
  hook_ = loop_->AddPollHook([this] {
    for (Backlog* b : backlogs_) b->Flush();
  });
}

StdioWriter::~StdioWriter() {
  Drain();
  for (Queue* q : {&out_, &err_}) {
    if (q->watched) loop_->UnwatchFd(q->fd);
  }
  loop_->RemovePollHook(hook_);
  if (err_file_) std::fclose(err_file_);
}

StdioWriter::Queue& StdioWriter::QueueOf(Stream stream) {
  return stream == Stream::kStdout || shared_ ? out_ : err_;
}
const StdioWriter::Queue& StdioWriter::QueueOf(Stream stream) const {
  return stream == Stream::kStdout || shared_ ? out_ : err_;
}

bool StdioWriter::direct(Stream stream) const { return QueueOf(stream).direct; }
size_t StdioWriter::queued(Stream stream) const { return QueueOf(stream).size(); }

bool StdioWriter::full() const { return out_.size() >= bound_ || err_.size() >= bound_; }
bool StdioWriter::behind() const { return full() || !pending_.empty(); }

void StdioWriter::Write(Stream stream, std::string_view bytes) {
  Queue& q = QueueOf(stream);
  if (q.closed || bytes.empty()) return;
  if (q.direct) {
    q.bytes.append(bytes);
    WriteAll(q);
    return;
  }
  const bool was_empty = q.size() == 0;
  q.bytes.append(bytes);
  // The usual case, a reader that keeps up: out at once, as a blocking
  // write would have been.
  if (was_empty) WriteSome(q);
  if (q.size() > 0) Watch(q);
}

bool StdioWriter::WriteSome(Queue& q) {
  // A pipe that polls writable takes PIPE_BUF bytes without blocking; a
  // regular file takes anything.
  const size_t chunk = q.pipe_like ? PIPE_BUF : (1 << 20);
  // A pass writes at most 256 KiB, so that one fast reader does not hold
  // the loop.
  for (size_t done = 0; q.size() > 0 && done < (256 << 10);) {
    if (q.pipe_like && !Writable(q.fd, 0)) break;
    const size_t n = std::min(chunk, q.size());
    const ssize_t w = ::write(q.fd, q.bytes.data() + q.head, n);
    if (w < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      q.closed = true;  // EPIPE: nobody reads any more
      q.bytes.clear();
      q.head = 0;
      break;
    }
    q.head += static_cast<size_t>(w);
    done += static_cast<size_t>(w);
  }
  if (q.head > 0 && (q.head == q.bytes.size() || q.head > (1 << 20))) {
    q.bytes.erase(0, q.head);
    q.head = 0;
  }
  return q.size() == 0;
}

void StdioWriter::WriteAll(Queue& q) {
  while (q.size() > 0 && !q.closed) {
    if (q.pipe_like) Writable(q.fd, -1);
    WriteSome(q);
  }
}

void StdioWriter::Watch(Queue& q) {
  if (q.watched || q.closed) return;
  q.watched = true;
  Queue* queue = &q;
  loop_->WatchFd(q.fd, POLLOUT, [this, queue](short revents) {
    if (revents & (POLLERR | POLLNVAL)) {
      queue->closed = true;
      queue->bytes.clear();
      queue->head = 0;
    } else {
      WriteSome(*queue);
    }
    if (queue->size() == 0) {
      queue->watched = false;
      loop_->UnwatchFd(queue->fd);
    }
    Refill();
  });
}

void StdioWriter::Refill() {
  // Under half the bound: the oldest pending backlog first.
  for (size_t i = 0; i < backlogs_.size(); ++i) {
    if (out_.size() >= bound_ / 2 || err_.size() >= bound_ / 2) return;
    Backlog* b = backlogs_[i];
    if (pending_.erase(b) == 0) continue;
    if (b->Refill(*this)) {
      pending_.insert(b);
      return;
    }
  }
}

void StdioWriter::Add(Backlog* b) { backlogs_.push_back(b); }

void StdioWriter::Remove(Backlog* b) {
  backlogs_.erase(std::remove(backlogs_.begin(), backlogs_.end(), b), backlogs_.end());
  pending_.erase(b);
}

void StdioWriter::Pending(Backlog* b) {
  pending_.insert(b);
  // A queue that is not empty refills after its next write; an empty one
  // has no next write.
  if (out_.size() == 0 && err_.size() == 0) Refill();
}

void StdioWriter::Drain() {
  for (;;) {
    for (Backlog* b : backlogs_) b->Flush();
    WriteAll(out_);
    WriteAll(err_);
    if (pending_.empty()) break;
    Refill();
  }
}

std::FILE* StdioWriter::err_file() {
  if (err_file_) return err_file_;
  cookie_io_functions_t io{};
  io.write = [](void* cookie, const char* buf, size_t size) -> ssize_t {
    static_cast<StdioWriter*>(cookie)->Write(Stream::kStderr, std::string_view(buf, size));
    return static_cast<ssize_t>(size);
  };
  err_file_ = fopencookie(this, "w", io);
  if (err_file_) setvbuf(err_file_, nullptr, _IONBF, 0);
  return err_file_;
}

}  // namespace barge::runner
