#include "runner/logs/kept_lines.h"

#include <fstream>
#include <functional>

#include "container/timestamp.h"

namespace barge::runner {

KeptLines CountKeptLines(const std::string& path, std::optional<int64_t> from_ns) {
  KeptLines kept;
  std::ifstream in(path, std::ios::binary);
  if (!in) return kept;
  kept.found = true;
  std::string line;
  while (std::getline(in, line)) {
    const size_t a = line.find(' ');
    if (a == std::string::npos || a == 0) continue;
    const size_t b = line.find(' ', a + 1);
    const std::string_view stream = std::string_view(line).substr(a + 1, b == std::string::npos ? std::string::npos : b - a - 1);
    const size_t s = stream == "stdout" ? 0 : stream == "stderr" ? 1 : 2;
    if (s == 2) continue;
    Result<int64_t> ns = container::ParseTimestamp(std::string_view(line).substr(0, a));
    if (!ns.ok()) continue;
    if (from_ns && *ns < *from_ns) continue;
    ++kept.lines[s];
    const std::string_view text = b == std::string::npos ? std::string_view() : std::string_view(line).substr(b + 1);
    kept.last_hash[s] = std::hash<std::string_view>{}(text);
  }
  return kept;
}

}  // namespace barge::runner
