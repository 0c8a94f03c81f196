#include "runner/log_sink.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>

#include "runner/color.h"

namespace barge::runner {

struct LogSink::File {
  Node node;
  std::string path;
  FILE* f = nullptr;
  std::string prefix;
  std::deque<std::string> tail;
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
                                               bool echo_to_terminal) {
  std::unique_ptr<LogSink> sink(new LogSink());
  sink->echo_ = echo_to_terminal;
  sink->stdout_tty_ = UseColor(STDOUT_FILENO);
  sink->stderr_tty_ = UseColor(STDERR_FILENO);
  for (const Node& n : nodes) {
    auto file = std::make_unique<File>();
    file->node = n;
    file->path = run_dir + "/" + std::to_string(n.rank) + "-" + n.host + ".log";
    int fd = open(file->path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) return Status::Error("cannot open " + file->path + ": " + std::strerror(errno));
    file->f = fdopen(fd, "a");
    file->prefix = "[" + std::to_string(n.rank) + " " + n.role + " " + n.host + "]";
    if (static_cast<size_t>(n.rank) >= sink->files_.size()) sink->files_.resize(n.rank + 1);
    sink->files_[n.rank] = std::move(file);
  }
  return sink;
}

LogSink::~LogSink() = default;

void LogSink::Line(int rank, Stream stream, std::string_view timestamp, std::string_view text) {
  if (rank < 0 || static_cast<size_t>(rank) >= files_.size() || !files_[rank]) return;
  File& file = *files_[rank];
  const char* name = NameOf(kStreamNames, stream).data();
  fprintf(file.f, "%.*s %s %.*s\n", static_cast<int>(timestamp.size()), timestamp.data(), name,
          static_cast<int>(text.size()), text.data());
  fflush(file.f);
  file.tail.emplace_back(text);
  if (file.tail.size() > kTailLines) file.tail.pop_front();
  if (!echo_) return;
  if (before_echo_) before_echo_();
  FILE* out = stream == Stream::kStdout ? stdout : stderr;
  bool tty = stream == Stream::kStdout ? stdout_tty_ : stderr_tty_;
  if (tty) {
    fprintf(out, "%s%s\033[0m %.*s\n", kColours[rank % 8], file.prefix.c_str(),
            static_cast<int>(text.size()), text.data());
  } else {
    fprintf(out, "%s %.*s\n", file.prefix.c_str(), static_cast<int>(text.size()), text.data());
  }
  fflush(out);
  if (after_echo_) after_echo_();
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
