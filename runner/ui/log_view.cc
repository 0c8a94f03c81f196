#include "runner/ui/log_view.h"

#include <cstdlib>
#include <deque>

namespace barge::runner::ui {

namespace {

ViewLine ToView(const NodeLog& log, const LogLine& line) {
  return ViewLine{log.rank(), log.role(), log.host(), line.is_stderr, line.text};
}

}  // namespace

Result<LogPage> ReadLogPage(const JobRecord& job, const std::vector<NodeRecord>& nodes,
                            std::optional<int> node, std::optional<size_t> first, size_t count) {
  NodeLogs logs;
  AddNewNodeLogs(job, nodes, node, &logs);
  LogPage page;
  std::deque<ViewLine> kept;
  const Status s = MergeAvailable(logs, IsFinal(job.status), [&](const NodeLog& log,
                                                                  const LogLine& line) {
    const size_t index = page.total++;
    if (first) {
      if (index >= *first && index < *first + count) kept.push_back(ToView(log, line));
      return;
    }
    kept.push_back(ToView(log, line));
    if (kept.size() > count) kept.pop_front();
  });
  if (!s.ok()) return s;
  page.first = first ? std::min(*first, page.total) : page.total - kept.size();
  page.lines.assign(std::make_move_iterator(kept.begin()), std::make_move_iterator(kept.end()));
  return page;
}

LogTail::LogTail(std::optional<int> node, std::map<int, uint64_t> start_offsets)
    : node_(node), start_offsets_(std::move(start_offsets)) {}

Result<std::vector<ViewLine>> LogTail::Poll(const JobRecord& job,
                                            const std::vector<NodeRecord>& nodes,
                                            bool writer_done, size_t keep_last) {
  AddNewNodeLogs(job, nodes, node_, &logs_, start_offsets_);
  const uint64_t before = BytesRead(logs_);
  std::deque<ViewLine> lines;
  const Status s = MergeAvailable(logs_, writer_done, [&](const NodeLog& log, const LogLine& line) {
    lines.push_back(ToView(log, line));
    if (lines.size() > keep_last) lines.pop_front();
  });
  if (!s.ok()) return s;
  grew_ = BytesRead(logs_) != before;
  return std::vector<ViewLine>(std::make_move_iterator(lines.begin()),
                               std::make_move_iterator(lines.end()));
}

std::string LogTail::Cursor() const {
  std::map<int, uint64_t> at = start_offsets_;
  for (const auto& [rank, log] : logs_) at[rank] = log->offset();
  std::string out;
  for (const auto& [rank, offset] : at) {
    out += (out.empty() ? "" : ",") + std::to_string(rank) + ":" + std::to_string(offset);
  }
  return out;
}

std::optional<std::map<int, uint64_t>> LogTail::ParseCursor(const std::string& text) {
  std::map<int, uint64_t> at;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    const std::string part = text.substr(pos, end - pos);
    const size_t colon = part.find(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == part.size()) return std::nullopt;
    for (size_t i = 0; i < part.size(); ++i) {
      if (i != colon && (part[i] < '0' || part[i] > '9')) return std::nullopt;
    }
    if (colon > 6 || part.size() - colon - 1 > 18) return std::nullopt;
    at[std::atoi(part.substr(0, colon).c_str())] =
        std::strtoull(part.substr(colon + 1).c_str(), nullptr, 10);
    pos = end + 1;
  }
  return at;
}

}  // namespace barge::runner::ui
