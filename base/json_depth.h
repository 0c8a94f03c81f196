// How deeply a JSON text nests, read before it is parsed: a parser builds
// one value per level, so a body of a few MiB of "[[[[..." from a broken or
// hostile engine, sshd or login host would cost gigabytes once parsed (and
// code that walks the value recursively, a deep stack).
#pragma once

#include <string_view>

namespace barge {

// The largest nesting any JSON barge reads from a host has (docker inspect,
// dcgmi, listings) is under 16; this leaves room and bounds the cost.
inline constexpr int kMaxJsonNesting = 128;

// True when no point of `text` lies inside more than `max_depth` arrays and
// objects, counting only brackets and braces outside strings (a backslash
// in a string escapes the next byte). Says nothing of validity: the parser
// judges that.
inline bool JsonNestingWithin(std::string_view text, int max_depth = kMaxJsonNesting) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return false;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return true;
}

}  // namespace barge
