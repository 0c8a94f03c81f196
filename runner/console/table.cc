#include "runner/console/table.h"

#include <algorithm>

namespace barge::runner {

std::string FormatTable(const std::vector<std::vector<std::string>>& rows, std::string_view gap) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(widths[c] - row[c].size(), ' ') + std::string(gap);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

void PrintTable(std::FILE* out, const std::vector<std::vector<std::string>>& rows) {
  const std::string text = FormatTable(rows);
  std::fwrite(text.data(), 1, text.size(), out);
}

}  // namespace barge::runner
