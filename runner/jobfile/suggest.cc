#include "runner/jobfile/suggest.h"

#include <algorithm>
#include <vector>

namespace barge::runner {
namespace {

std::string ToLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

}  // namespace

size_t EditDistance(std::string_view a, std::string_view b) {
  // Three rolling rows: the transposition step looks two rows back.
  const size_t n = b.size();
  std::vector<size_t> two_back(n + 1), prev(n + 1), cur(n + 1);
  for (size_t j = 0; j <= n; ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= n; ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        cur[j] = std::min(cur[j], two_back[j - 2] + 1);
      }
    }
    std::swap(two_back, prev);
    std::swap(prev, cur);
  }
  return prev[n];
}

std::optional<std::string> ClosestMatch(std::string_view word,
                                        std::span<const std::string_view> candidates) {
  const std::string lower = ToLower(word);
  const size_t limit = std::max<size_t>(1, std::min<size_t>(3, word.size() / 3));
  std::optional<std::string> best;
  size_t best_distance = limit + 1;
  for (std::string_view candidate : candidates) {
    if (candidate == word) return std::nullopt;
    // Distance 0 here means the same letters in another case ("Name"):
    // the best suggestion there can be.
    size_t d = EditDistance(lower, ToLower(candidate));
    if (d < best_distance) {
      best_distance = d;
      best = std::string(candidate);
    }
  }
  return best;
}

}  // namespace barge::runner
