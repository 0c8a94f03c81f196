// Sizes and durations as a job file writes them.
//
// Sizes are checked, never converted: barge hands them to Docker exactly as
// written (`shm_size: 2g` becomes `--shm-size 2g`). Durations are converted,
// because barge itself waits on them.
#pragma once

#include <chrono>
#include <string_view>

#include "base/status.h"

namespace barge::runner {

// True if `text` is a size that Docker's --shm-size / --memory accept:
//   NUMBER [" "] [UNIT]   NUMBER = digits ["." digits]
//   UNIT = b | k | m | g | t | p, optionally followed by "i" (not after b)
//          and then "b"; any case.
// So "1024", "512m", "2g", "2GB", "1.5g", "4KiB" are sizes; "16 gigs", "-1g",
// "1bb" and "" are not. This is the subset of Docker's own grammar
// (go-units `RAMInBytes`) that has one obvious meaning.
[[nodiscard]] bool IsSize(std::string_view text);

// The message for a value that is not a size, naming the value.
// "invalid size '16 gigs' (expected e.g. 512m, 2g)"
std::string InvalidSizeMessage(std::string_view text);

// Parses a duration: one or more NUMBER UNIT parts, each unit at most once,
// NUMBER = digits ["." digits], UNIT = ms | s | m | h | d. "10s", "500ms",
// "1h30m", "1.5h", "1d". A bare number is an error (the unit is required).
// Fractions below a millisecond are truncated. On failure the Status names
// the value and the accepted units.
[[nodiscard]] Result<std::chrono::milliseconds> ParseDuration(std::string_view text);

}  // namespace barge::runner
