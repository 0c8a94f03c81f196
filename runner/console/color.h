// Whether barge's output is coloured: `--color=auto|always|never` and the
// NO_COLOR convention (https://no-color.org), decided in one place.
#pragma once

#include <array>
#include <string>

#include "base/enum_names.h"

namespace barge::runner {

enum class ColorMode { kAuto, kAlways, kNever };
// As --color takes them.
inline constexpr auto kColorModeNames = std::to_array<EnumName<ColorMode>>(
    {{ColorMode::kAuto, "auto"}, {ColorMode::kAlways, "always"}, {ColorMode::kNever, "never"}});
static_assert(ListsEveryValueInOrder(kColorModeNames));

// "auto always never": the names, for completion scripts.
inline std::string ColorModeWords() {
  std::string out;
  for (const auto& [mode, name] : kColorModeNames) out += (out.empty() ? "" : " ") + std::string(name);
  return out;
}

// Process-wide; main() sets it once, before any output.
void SetColorMode(ColorMode mode);
ColorMode GetColorMode();

// Whether what is written to `fd` gets colour: kAlways yes, kNever no,
// kAuto when NO_COLOR is unset or empty and `fd` is a terminal.
bool UseColor(int fd);

}  // namespace barge::runner
