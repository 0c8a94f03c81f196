// How barge's own failures end a command: "barge: MESSAGE" on stderr and
// exit code kExitBargeFailure (exit_codes.h).
#pragma once

#include <cstdio>
#include <string>

#include "runner/console/exit_codes.h"

namespace barge::runner {

// Prints "barge: MESSAGE" on `err` and returns kExitBargeFailure.
inline int SayFailure(std::FILE* err, const std::string& message) {
  std::fprintf(err, "barge: %s\n", message.c_str());
  return kExitBargeFailure;
}

}  // namespace barge::runner
