// How barge's own failures end a command: "barge: MESSAGE" on stderr and
// exit code 125 (a job's own code is passed through otherwise).
#pragma once

#include <cstdio>
#include <string>

namespace barge::runner {

// barge's exit code for its own failures (bad input, a host refused, ...).
inline constexpr int kExitBargeFailure = 125;

// Prints "barge: MESSAGE" on `err` and returns kExitBargeFailure.
inline int SayFailure(std::FILE* err, const std::string& message) {
  std::fprintf(err, "barge: %s\n", message.c_str());
  return kExitBargeFailure;
}

}  // namespace barge::runner
