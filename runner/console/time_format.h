// How barge writes times, durations and sizes: the one place each format
// is made (tables print local time, JSON and host-side stamps UTC).
#pragma once

#include <chrono>
#include <cstdint>
#include <ctime>
#include <string>

#include "base/time_point.h"

namespace barge::runner {

// `secs` (since the epoch) in UTC, through strftime's `format`
// ("%Y-%m-%dT%H:%M:%SZ", "%H:%M:%SZ"): the one UTC formatter.
std::string FormatUtc(std::time_t secs, const char* format);
std::string IsoUtc(TimePoint t);                          // 2024-05-01T12:34:56.789Z
std::string LocalTime(TimePoint t, bool milliseconds);    // 2024-05-01 12:34:56[.789]
std::string FormatDuration(std::chrono::milliseconds d);  // 45s, 3m12s, 1h02m, 2d03h
std::string FormatBytes(uint64_t bytes);                  // 512 B, 12.3 KiB, 4.0 MiB
// Host-hours or GPU-hours: two decimals from 1 on ("12.50"), two
// significant digits below ("0.25", "0.0011"), "0" for none; with a "*"
// when `unknown` (GPUs of an unknown count left out).
std::string FormatHours(double hours, bool unknown = false);

}  // namespace barge::runner
