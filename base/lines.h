// The lines of a text (a host's reply, a command's output).
#pragma once

#include <string_view>
#include <vector>

namespace barge {

// `text` split at each '\n', a '\r' before it dropped; a final '\n' makes no
// empty last line. The views point into `text`.
inline std::vector<std::string_view> SplitLines(std::string_view text) {
  std::vector<std::string_view> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(pos, nl - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    out.push_back(line);
    pos = nl + 1;
  }
  return out;
}

}  // namespace barge
