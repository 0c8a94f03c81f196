#include "runner/jobfile/units.h"

#include <cstdint>
#include <string>

namespace barge::runner {
namespace {

bool IsAsciiDigit(char c) { return c >= '0' && c <= '9'; }
char Lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

// Consumes digits ["." digits] at `*pos`; false if there is no digit first or
// nothing after the dot.
bool ConsumeNumber(std::string_view s, size_t* pos) {
  size_t i = *pos;
  if (i >= s.size() || !IsAsciiDigit(s[i])) return false;
  while (i < s.size() && IsAsciiDigit(s[i])) ++i;
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (i >= s.size() || !IsAsciiDigit(s[i])) return false;
    while (i < s.size() && IsAsciiDigit(s[i])) ++i;
  }
  *pos = i;
  return true;
}

}  // namespace

bool IsSize(std::string_view s) {
  // Docker's grammar has no length limit; ours keeps messages short and
  // rules out absurd values that would overflow Docker's own parser.
  if (s.size() > 32) return false;
  size_t i = 0;
  if (!ConsumeNumber(s, &i)) return false;
  if (i < s.size() && s[i] == ' ') ++i;
  if (i < s.size()) {
    char unit = Lower(s[i]);
    if (unit == 'b') {
      ++i;
    } else if (unit == 'k' || unit == 'm' || unit == 'g' || unit == 't' || unit == 'p') {
      ++i;
      if (i < s.size() && Lower(s[i]) == 'i') {
        ++i;
        if (i >= s.size() || Lower(s[i]) != 'b') return false;  // "1gi": no
      }
      if (i < s.size() && Lower(s[i]) == 'b') ++i;
    } else {
      return false;
    }
  }
  // "1 " (a space with no unit) is not a size.
  return i == s.size() && s.back() != ' ';
}

std::string InvalidSizeMessage(std::string_view text) {
  return "invalid size '" + std::string(text) + "' (expected e.g. 512m, 2g)";
}

Result<std::chrono::milliseconds> ParseDuration(std::string_view s) {
  const std::string shown = "'" + std::string(s) + "'";
  const std::string kExpected = " (expected e.g. 500ms, 10s, 5m, 1h30m, 1d)";
  if (s.empty()) return Status::Error("invalid duration ''" + kExpected);
  bool all_digits = true;
  for (char c : s) all_digits = all_digits && IsAsciiDigit(c);
  if (all_digits) {
    return Status::Error("invalid duration " + shown +
                         ": a unit is required (ms, s, m, h or d, e.g. " + std::string(s) + "s)");
  }
  // Each unit at most once keeps the sum far from overflow: every part is
  // below 10^9 units, and 5 * 10^9 days in ms fits easily in int64.
  struct Unit {
    std::string_view name;
    int64_t ms;
    bool seen;
  };
  Unit units[] = {{"ms", 1, false},
                  {"s", 1000, false},
                  {"m", 60'000, false},
                  {"h", 3'600'000, false},
                  {"d", 86'400'000, false}};
  int64_t total = 0;
  size_t i = 0;
  while (i < s.size()) {
    size_t start = i;
    if (!ConsumeNumber(s, &i)) return Status::Error("invalid duration " + shown + kExpected);
    std::string_view number = s.substr(start, i - start);
    size_t unit_start = i;
    while (i < s.size() && ((s[i] >= 'a' && s[i] <= 'z'))) ++i;
    std::string_view unit_name = s.substr(unit_start, i - unit_start);
    Unit* unit = nullptr;
    for (Unit& u : units) {
      if (u.name == unit_name) unit = &u;
    }
    if (unit == nullptr) return Status::Error("invalid duration " + shown + kExpected);
    if (unit->seen) {
      return Status::Error("invalid duration " + shown + ": unit '" + std::string(unit_name) +
                           "' given twice");
    }
    unit->seen = true;
    size_t dot = number.find('.');
    std::string_view whole = number.substr(0, dot);
    std::string_view frac = dot == std::string_view::npos ? "" : number.substr(dot + 1);
    // Leading zeros do not count towards the limit.
    while (whole.size() > 1 && whole.front() == '0') whole.remove_prefix(1);
    if (whole.size() > 9) return Status::Error("invalid duration " + shown + ": too long");
    int64_t value = 0;
    for (char c : whole) value = value * 10 + (c - '0');
    total += value * unit->ms;
    // The fraction, digit by digit: each digit is worth a tenth of the one
    // before; what falls below a millisecond is dropped.
    int64_t digit_ms = unit->ms;
    for (char c : frac) {
      total += (c - '0') * digit_ms / 10;
      digit_ms /= 10;
      if (digit_ms == 0) break;
    }
  }
  return std::chrono::milliseconds(total);
}

}  // namespace barge::runner
