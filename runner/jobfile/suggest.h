// "Did you mean ...?" for misspelled keys and values.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace barge::runner {

// The optimal-string-alignment distance between `a` and `b`: the number of
// single-byte insertions, deletions, substitutions and swaps of two adjacent
// bytes that turn one into the other ("shm_sise" -> "shm_size" is 1,
// "imgae" -> "image" is 1).
size_t EditDistance(std::string_view a, std::string_view b);

// The candidate that `word` most likely misspells, or nullopt when none is
// close: compared without regard to ASCII case, a candidate qualifies when
// its distance is at most max(1, min(3, word.size() / 3)). On a tie the
// earlier candidate wins. An exact match is not a suggestion (nullopt).
std::optional<std::string> ClosestMatch(std::string_view word,
                                        std::span<const std::string_view> candidates);

}  // namespace barge::runner
