#include "runner/console/color.h"

#include <unistd.h>

#include <cstdlib>

namespace barge::runner {
namespace {
ColorMode g_mode = ColorMode::kAuto;
}  // namespace

void SetColorMode(ColorMode mode) { g_mode = mode; }
ColorMode GetColorMode() { return g_mode; }

bool UseColor(int fd) {
  switch (g_mode) {
    case ColorMode::kAlways:
      return true;
    case ColorMode::kNever:
      return false;
    case ColorMode::kAuto:
      break;
  }
  const char* no_color = std::getenv("NO_COLOR");
  if (no_color != nullptr && no_color[0] != '\0') return false;
  return isatty(fd) == 1;
}

}  // namespace barge::runner
