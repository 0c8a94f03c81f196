#include "container/timestamp.h"

#include <cstdio>
#include <limits>

namespace barge::container {
namespace {

constexpr int64_t kNanosPerSecond = 1'000'000'000;

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
// days_from_civil); valid for any year an int can hold.
int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

// The inverse of DaysFromCivil.
void CivilFromDays(int64_t z, int64_t* y, unsigned* m, unsigned* d) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const unsigned doe = static_cast<unsigned>(z - era * 146097);
  const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const unsigned mp = (5 * doy + 2) / 153;
  *d = doy - (153 * mp + 2) / 5 + 1;
  *m = mp < 10 ? mp + 3 : mp - 9;
  *y = static_cast<int64_t>(yoe) + era * 400 + (*m <= 2);
}

bool IsLeap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

unsigned DaysInMonth(int64_t y, unsigned m) {
  static constexpr unsigned kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && IsLeap(y) ? 29 : kDays[m - 1];
}

// Reads exactly `n` decimal digits at `*pos`, advancing it.
bool ReadDigits(std::string_view s, size_t* pos, int n, int* out) {
  if (*pos + n > s.size()) return false;
  int v = 0;
  for (int i = 0; i < n; ++i) {
    const char c = s[*pos + i];
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *pos += n;
  *out = v;
  return true;
}

bool ReadChar(std::string_view s, size_t* pos, char want) {
  if (*pos >= s.size() || s[*pos] != want) return false;
  ++*pos;
  return true;
}

bool ReadCharEither(std::string_view s, size_t* pos, char upper, char lower) {
  return ReadChar(s, pos, upper) || ReadChar(s, pos, lower);
}

Status Invalid(std::string_view text, std::string_view why) {
  return Status::Error("invalid timestamp \"" + std::string(text) + "\": " + std::string(why));
}

}  // namespace

Result<int64_t> ParseTimestamp(std::string_view text) {
  size_t pos = 0;
  int year, month, day, hour, minute, second;
  if (!ReadDigits(text, &pos, 4, &year) || !ReadChar(text, &pos, '-') ||
      !ReadDigits(text, &pos, 2, &month) || !ReadChar(text, &pos, '-') ||
      !ReadDigits(text, &pos, 2, &day) || !ReadCharEither(text, &pos, 'T', 't') ||
      !ReadDigits(text, &pos, 2, &hour) || !ReadChar(text, &pos, ':') ||
      !ReadDigits(text, &pos, 2, &minute) || !ReadChar(text, &pos, ':') ||
      !ReadDigits(text, &pos, 2, &second)) {
    return Invalid(text, "expected YYYY-MM-DDTHH:MM:SS");
  }
  int64_t fraction_ns = 0;
  if (ReadChar(text, &pos, '.')) {
    int digits = 0;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      if (++digits > 9) return Invalid(text, "more than 9 fraction digits");
      fraction_ns = fraction_ns * 10 + (text[pos] - '0');
      ++pos;
    }
    if (digits == 0) return Invalid(text, "no digits after the decimal point");
    for (int i = digits; i < 9; ++i) fraction_ns *= 10;
  }
  int offset_seconds = 0;
  if (!ReadCharEither(text, &pos, 'Z', 'z')) {
    if (pos >= text.size() || (text[pos] != '+' && text[pos] != '-')) {
      return Invalid(text, "expected Z or a +HH:MM/-HH:MM offset after the time");
    }
    const int sign = text[pos] == '-' ? -1 : 1;
    ++pos;
    int off_h, off_m;
    if (!ReadDigits(text, &pos, 2, &off_h) || !ReadChar(text, &pos, ':') ||
        !ReadDigits(text, &pos, 2, &off_m)) {
      return Invalid(text, "expected Z or a +HH:MM/-HH:MM offset after the time");
    }
    if (off_h > 23 || off_m > 59) return Invalid(text, "offset out of range");
    offset_seconds = sign * (off_h * 3600 + off_m * 60);
  }
  if (pos != text.size()) return Invalid(text, "unexpected text after the time zone");
  if (month < 1 || month > 12) return Invalid(text, "month out of range");
  if (day < 1 || static_cast<unsigned>(day) > DaysInMonth(year, month)) {
    return Invalid(text, "day out of range");
  }
  if (hour > 23 || minute > 59 || second > 59) return Invalid(text, "time of day out of range");

  // Local time minus the offset is UTC. 128-bit arithmetic, so that the
  // range check below is exact at both ends of int64.
  const __int128 seconds = static_cast<__int128>(DaysFromCivil(year, month, day)) * 86400 +
                           hour * 3600 + minute * 60 + second - offset_seconds;
  const __int128 ns = seconds * kNanosPerSecond + fraction_ns;
  if (ns > std::numeric_limits<int64_t>::max() || ns < std::numeric_limits<int64_t>::min()) {
    return Invalid(text, "outside the range of int64 nanoseconds (years 1677 to 2262)");
  }
  return static_cast<int64_t>(ns);
}

std::string FormatTimestamp(int64_t ns) {
  // Floor division, so that times before 1970 get a non-negative fraction.
  int64_t seconds = ns / kNanosPerSecond;
  int64_t fraction = ns % kNanosPerSecond;
  if (fraction < 0) {
    fraction += kNanosPerSecond;
    --seconds;
  }
  int64_t days = seconds / 86400;
  int64_t second_of_day = seconds % 86400;
  if (second_of_day < 0) {
    second_of_day += 86400;
    --days;
  }
  int64_t year;
  unsigned month, day;
  CivilFromDays(days, &year, &month, &day);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04lld-%02u-%02uT%02d:%02d:%02d.%09lldZ",
                static_cast<long long>(year), month, day,
                static_cast<int>(second_of_day / 3600),
                static_cast<int>(second_of_day / 60 % 60),
                static_cast<int>(second_of_day % 60), static_cast<long long>(fraction));
  return buf;
}

}  // namespace barge::container
