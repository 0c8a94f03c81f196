// Docker's timestamps as exact integers.
//
// Docker writes RFC 3339 times in two spellings: `docker logs --timestamps`
// uses a fixed 9-digit fraction ("2026-11-22T04:39:02.789384060Z"), while
// `docker inspect` uses Go's RFC3339Nano, which drops trailing zeros from the
// fraction ("...38.41756031Z", "...38.5Z", or no fraction at all) and may
// carry a numeric offset ("+00:00"). Both parse to the same int64 count of
// nanoseconds since the Unix epoch, so times can be ordered and compared for
// equality exactly, whatever their spelling.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace barge::container {

// Docker's "never" (Go's zero time), e.g. State.StartedAt of a container that
// was created but never started. It is outside the int64-nanosecond range.
inline constexpr std::string_view kDockerZeroTime = "0001-01-01T00:00:00Z";

// Parses `YYYY-MM-DDTHH:MM:SS[.F{1,9}](Z|+HH:MM|-HH:MM)` (the whole input,
// nothing before or after) to nanoseconds since 1970-01-01T00:00:00Z.
// 'T' and 'Z' may be lower case, as RFC 3339 allows. Fails, with the input in
// the message, on any other shape, on an out-of-range field (month 13, Feb 30,
// second 60: Go never writes leap seconds), on more than 9 fraction digits,
// and on times that int64 nanoseconds cannot hold (before 1677-09-21 or after
// 2262-04-11, which includes kDockerZeroTime).
[[nodiscard]] Result<int64_t> ParseTimestamp(std::string_view text);

// RFC 3339 in UTC with exactly 9 fraction digits, e.g.
// "2026-11-22T04:39:02.789384060Z": the spelling `docker logs --timestamps`
// uses, and one that `docker logs --since` accepts (inclusively: a line
// stamped exactly `ns` is included). Every int64 value is representable.
// ParseTimestamp(FormatTimestamp(ns)) == ns for every ns.
std::string FormatTimestamp(int64_t ns);

}  // namespace barge::container
