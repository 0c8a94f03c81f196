#include "runner/logs/log_sink.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>

#include "runner/console/color.h"
#include "runner/logs/log_files.h"

namespace barge::runner {

struct LogSink::File {
  Node node;
  std::string path;
  FILE* f = nullptr;
  std::string prefix;
  std::deque<std::string> tail;
  int64_t written = 0;                 // the file's size, buffered bytes included
  std::optional<int64_t> behind_from;  // the first line not echoed yet
  ~File() {
    if (f) fclose(f);
  }
};

namespace {
const char* kColours[] = {"\033[36m", "\033[33m", "\033[32m", "\033[35m", "\033[34m", "\033[96m", "\033[93m", "\033[92m"};
constexpr size_t kTailLines = 50;
}  // namespace

Result<std::unique_ptr<LogSink>> LogSink::Open(const std::string& run_dir,
                                               const std::vector<Node>& nodes,
                                               bool echo_to_terminal, StdioWriter* writer) {
  std::unique_ptr<LogSink> sink(new LogSink());
  sink->echo_ = echo_to_terminal;
  sink->writer_ = writer;
  sink->stdout_tty_ = UseColor(STDOUT_FILENO);
  sink->stderr_tty_ = UseColor(STDERR_FILENO);
  for (const Node& n : nodes) {
    auto file = std::make_unique<File>();
    file->node = n;
    file->path = run_dir + "/" + std::to_string(n.rank) + "-" + n.host + ".log";
    // Read back too: a writer that fell behind catches up from the file.
    int fd = open(file->path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) return Status::Error("cannot open " + file->path + ": " + std::strerror(errno));
    struct stat st;
    file->written = fstat(fd, &st) == 0 ? st.st_size : 0;  // an earlier attempt's lines
    file->f = fdopen(fd, "a");
    if (writer) setvbuf(file->f, nullptr, _IOFBF, 64 << 10);
    file->prefix = "[" + std::to_string(n.rank) + " " + n.role + " " + n.host + "]";
    if (static_cast<size_t>(n.rank) >= sink->files_.size()) sink->files_.resize(n.rank + 1);
    sink->files_[n.rank] = std::move(file);
  }
  if (writer) writer->Add(sink.get());
  return sink;
}

LogSink::~LogSink() {
  if (!writer_) return;
  bool behind = false;
  for (const auto& f : files_) behind = behind || (f && f->behind_from);
  if (behind) writer_->Drain();
  writer_->Remove(this);
  Flush();
}

std::string LogSink::Echoed(const File& file, Stream stream, std::string_view text) const {
  const bool tty = stream == Stream::kStdout ? stdout_tty_ : stderr_tty_;
  std::string line;
  line.reserve(file.prefix.size() + text.size() + 16);
  if (tty) line.append(kColours[file.node.rank % 8]);
  line.append(file.prefix);
  if (tty) line.append("\033[0m");
  line.push_back(' ');
  line.append(text);
  line.push_back('\n');
  return line;
}

void LogSink::Line(int rank, Stream stream, std::string_view timestamp, std::string_view text) {
  if (rank < 0 || static_cast<size_t>(rank) >= files_.size() || !files_[rank]) return;
  File& file = *files_[rank];
  const std::string_view name = NameOf(kStreamNames, stream);
  const int64_t at = file.written;
  fwrite(timestamp.data(), 1, timestamp.size(), file.f);
  fputc(' ', file.f);
  fwrite(name.data(), 1, name.size(), file.f);
  fputc(' ', file.f);
  fwrite(text.data(), 1, text.size(), file.f);
  fputc('\n', file.f);
  file.written += static_cast<int64_t>(timestamp.size() + name.size() + text.size() + 3);
  if (!writer_) fflush(file.f);
  file.tail.emplace_back(text);
  if (file.tail.size() > kTailLines) file.tail.pop_front();
  if (!echo_) return;
  if (writer_) {
    // Behind: the line is echoed later, from the file.
    if (file.behind_from) return;
    if (writer_->behind()) {
      file.behind_from = at;
      writer_->Pending(this);
      return;
    }
  }
  // Only a line written at once onto the terminal crosses the status line.
  const bool guard = !writer_ || writer_->direct(stream);
  if (guard && before_echo_) before_echo_();
  const std::string line = Echoed(file, stream, text);
  if (writer_) {
    writer_->Write(stream, line);
  } else {
    FILE* out = stream == Stream::kStdout ? stdout : stderr;
    fwrite(line.data(), 1, line.size(), out);
    fflush(out);
  }
  if (guard && after_echo_) after_echo_();
}

void LogSink::Flush() {
  for (const auto& f : files_) {
    if (f) fflush(f->f);
  }
}

bool LogSink::Refill(StdioWriter& writer) {
  bool more = false;
  std::string buf;
  for (const auto& f : files_) {
    if (!f || !f->behind_from) continue;
    File& file = *f;
    fflush(file.f);
    while (*file.behind_from < file.written && !writer.full()) {
      const size_t want = static_cast<size_t>(std::min<int64_t>(file.written - *file.behind_from, 64 << 10));
      buf.resize(want);
      const ssize_t n = pread(fileno(file.f), buf.data(), want, *file.behind_from);
      if (n <= 0) {  // unreadable: what it holds cannot be echoed; stop trying
        file.behind_from = file.written;
        break;
      }
      std::string_view chunk(buf.data(), static_cast<size_t>(n));
      size_t used = 0;
      for (size_t eol; (eol = chunk.find('\n', used)) != std::string_view::npos && !writer.full(); used = eol + 1) {
        LogLine line = ParseLogLine(chunk.substr(used, eol - used), kNoStamp);
        const Stream stream = line.is_stderr ? Stream::kStderr : Stream::kStdout;
        const bool guard = writer.direct(stream);
        if (guard && before_echo_) before_echo_();
        writer.Write(stream, Echoed(file, stream, line.text));
        if (guard && after_echo_) after_echo_();
      }
      // A line longer than the chunk: echoed as it is, in pieces.
      if (used == 0 && static_cast<size_t>(n) == want && chunk.find('\n') == std::string_view::npos) {
        writer.Write(Stream::kStdout, chunk);
        used = chunk.size();
      }
      *file.behind_from += static_cast<int64_t>(used);
    }
    if (*file.behind_from >= file.written) {
      file.behind_from.reset();
    } else {
      more = true;
    }
  }
  return more;
}

std::string LogSink::path(int rank) const {
  if (rank < 0 || static_cast<size_t>(rank) >= files_.size() || !files_[rank]) return "";
  return files_[rank]->path;
}

std::vector<std::string> LogSink::Tail(int rank, size_t n) const {
  std::vector<std::string> out;
  if (rank < 0 || static_cast<size_t>(rank) >= files_.size() || !files_[rank]) return out;
  const auto& tail = files_[rank]->tail;
  size_t start = tail.size() > n ? tail.size() - n : 0;
  for (size_t i = start; i < tail.size(); ++i) out.push_back(tail[i]);
  return out;
}

}  // namespace barge::runner
