#include "ssh/quote.h"

namespace barge::ssh {
namespace {

bool IsSafe(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
         c == '_' || c == '@' || c == '%' || c == '+' || c == '=' || c == ':' || c == ',' ||
         c == '.' || c == '/' || c == '-';
}

bool IsAllSafe(std::string_view word) {
  if (word.empty()) return false;
  for (char c : word) {
    if (!IsSafe(c)) return false;
  }
  return true;
}

// Words a POSIX shell (or bash) reads as syntax when they are unquoted in
// command position.
bool IsReservedWord(std::string_view word) {
  static constexpr std::string_view kReserved[] = {
      "case", "coproc", "do", "done", "elif", "else", "esac", "fi", "for", "function",
      "if", "in", "select", "then", "time", "until", "while"};
  for (std::string_view r : kReserved) {
    if (word == r) return true;
  }
  return false;
}

std::string SingleQuote(std::string_view word) {
  // Inside single quotes every byte is literal except ' itself, which ends
  // the quoted part: write it as '\'' (close, escaped quote, reopen).
  std::string out;
  out.reserve(word.size() + 2);
  out.push_back('\'');
  for (char c : word) {
    if (c == '\'') {
      out.append("'\\''");
    } else {
      out.push_back(c);
    }
  }
  out.push_back('\'');
  return out;
}

}  // namespace

std::string ShellQuote(std::string_view word) {
  if (IsAllSafe(word)) return std::string(word);
  return SingleQuote(word);
}

std::string ShellJoin(const std::vector<std::string>& argv) {
  std::string out;
  for (size_t i = 0; i < argv.size(); ++i) {
    if (i > 0) out.push_back(' ');
    const std::string& arg = argv[i];
    // In command position `A=B` would be an assignment and `if` syntax.
    bool command_word = i == 0;
    if (command_word && (arg.find('=') != std::string::npos || IsReservedWord(arg))) {
      out.append(SingleQuote(arg));
    } else {
      out.append(ShellQuote(arg));
    }
  }
  return out;
}

}  // namespace barge::ssh
