// The checks the fuzz targets of host-facing parsers share: a failed check
// aborts with what failed and (a bounded part of) the value that did it, so
// that libFuzzer keeps the input and a replay shows why.
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace barge::fuzz {

// Aborts with "TARGET: WHAT: DETAIL" (DETAIL cut at 200 bytes).
[[noreturn]] inline void Fail(const char* target, const char* what, std::string_view detail = {}) {
  std::fprintf(stderr, "%s: %s: %.*s\n", target, what,
               static_cast<int>(std::min<size_t>(detail.size(), 200)), detail.data());
  std::abort();
}

// Whether `text` holds a byte below 0x20 or DEL (what a terminal could take
// for a command when the text is printed).
inline bool HasControlByte(std::string_view text) {
  return std::any_of(text.begin(), text.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7f;
  });
}

// An error message as a user reads it: not empty, at most `max_bytes`, no
// control byte (what a host sent is quoted, not passed through).
inline void CheckMessage(const char* target, std::string_view message, size_t max_bytes) {
  if (message.empty()) Fail(target, "an empty error message");
  if (message.size() > max_bytes) Fail(target, "a long error message", message);
  if (HasControlByte(message)) Fail(target, "a control byte in an error message", message);
}

}  // namespace barge::fuzz
