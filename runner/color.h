// Whether barge's output is coloured: `--color=auto|always|never` and the
// NO_COLOR convention (https://no-color.org), decided in one place.
#pragma once

namespace barge::runner {

enum class ColorMode { kAuto, kAlways, kNever };

// Process-wide; main() sets it once, before any output.
void SetColorMode(ColorMode mode);
ColorMode GetColorMode();

// Whether what is written to `fd` gets colour: kAlways yes, kNever no,
// kAuto when NO_COLOR is unset or empty and `fd` is a terminal.
bool UseColor(int fd);

}  // namespace barge::runner
