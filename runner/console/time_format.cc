#include "runner/console/time_format.h"

#include <cstdio>
#include <ctime>
#include <iterator>
#include <utility>

namespace barge::runner {

using std::chrono::milliseconds;

namespace {

// Whole seconds since the epoch and the milliseconds past them (0-999).
std::pair<std::time_t, int> SplitSeconds(TimePoint t) {
  const int64_t ms = t.time_since_epoch().count();
  const int64_t secs = ms >= 0 ? ms / 1000 : (ms - 999) / 1000;
  return {static_cast<std::time_t>(secs), static_cast<int>(ms - secs * 1000)};
}

// ".007"
std::string Millis(int ms) {
  std::string digits = std::to_string(ms);
  return "." + std::string(digits.size() < 3 ? 3 - digits.size() : 0, '0') + digits;
}

}  // namespace

std::string FormatUtc(std::time_t secs, const char* format) {
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  size_t n = std::strftime(buf, sizeof buf, format, &tm);
  return std::string(buf, n);
}

std::string IsoUtc(TimePoint t) {
  auto [secs, ms] = SplitSeconds(t);
  return FormatUtc(secs, "%Y-%m-%dT%H:%M:%S") + Millis(ms) + "Z";
}

std::string LocalTime(TimePoint t, bool with_ms) {
  auto [secs, ms] = SplitSeconds(t);
  std::tm tm{};
  localtime_r(&secs, &tm);
  char buf[64];
  size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return std::string(buf, n) + (with_ms ? Millis(ms) : "");
}

std::string FormatDuration(milliseconds d) {
  int64_t s = d.count() > 0 ? d.count() / 1000 : 0;
  char buf[32];
  if (s < 60) {
    std::snprintf(buf, sizeof buf, "%llds", static_cast<long long>(s));
  } else if (s < 3600) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  } else if (s < 86400) {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", static_cast<long long>(s / 3600),
                  static_cast<long long>(s % 3600 / 60));
  } else {
    std::snprintf(buf, sizeof buf, "%lldd%02lldh", static_cast<long long>(s / 86400),
                  static_cast<long long>(s % 86400 / 3600));
  }
  return buf;
}

std::string FormatBytes(uint64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " B";
  static const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes) / 1024;
  size_t unit = 0;
  while (v >= 1024 && unit + 1 < std::size(kUnits)) {
    v /= 1024;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, kUnits[unit]);
  return buf;
}

std::string FormatHours(double hours, bool unknown) {
  char text[32];
  if (hours <= 0) {
    std::snprintf(text, sizeof text, "0");
  } else if (hours >= 1) {
    std::snprintf(text, sizeof text, "%.2f", hours);
  } else {
    std::snprintf(text, sizeof text, "%.2g", hours);
  }
  return std::string(text) + (unknown ? "*" : "");
}

}  // namespace barge::runner
