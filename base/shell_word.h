// ShellWord: a string as one word for a POSIX shell, left bare when it is
// plainly safe, for command lines shown to users ("run as: barge run ...").
#pragma once

#include <string>
#include <string_view>

namespace barge {

// `s` unchanged when it is non-empty and only letters, digits and
// _-./=:,+@%; otherwise in single quotes (a ' inside as '\'').
inline std::string ShellWord(const std::string& s) {
  bool plain = !s.empty();
  for (char c : s) {
    plain = plain && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      std::string_view("_-./=:,+@%").find(c) != std::string_view::npos);
  }
  if (plain) return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace barge
