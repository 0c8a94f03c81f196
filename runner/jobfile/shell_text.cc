#include "runner/jobfile/shell_text.h"

#include <algorithm>
#include <array>
#include <string_view>

namespace barge::runner {

namespace {

std::string_view Basename(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

bool IsShell(std::string_view program) {
  static constexpr std::array<std::string_view, 6> kShells = {"sh", "bash", "dash", "zsh", "ksh", "ash"};
  return std::find(kShells.begin(), kShells.end(), Basename(program)) != kShells.end();
}

bool IsOption(const std::string& word) { return word.size() > 1 && word[0] == '-'; }

// The index of the program argv runs once the prefixes are skipped.
size_t SkipPrefixes(const std::vector<std::string>& argv) {
  size_t i = 0;
  while (i < argv.size()) {
    const std::string_view word = Basename(argv[i]);
    if (word == "env") {
      ++i;
      while (i < argv.size() && (IsOption(argv[i]) || argv[i].find('=') != std::string::npos)) ++i;
    } else if (word == "exec") {
      ++i;
    } else if (word == "nice") {
      ++i;
      while (i < argv.size() && IsOption(argv[i])) {
        // -n N, or -nN / --adjustment=N
        if (argv[i] == "-n" || argv[i] == "--adjustment") ++i;
        ++i;
      }
    } else if (word == "timeout") {
      ++i;
      while (i < argv.size() && IsOption(argv[i])) {
        if (argv[i] == "-s" || argv[i] == "-k" || argv[i] == "--signal" || argv[i] == "--kill-after") ++i;
        ++i;
      }
      if (i < argv.size()) ++i;  // the duration
    } else {
      break;
    }
  }
  return i;
}

}  // namespace

std::optional<size_t> ShellScriptArgument(const std::vector<std::string>& argv) {
  size_t i = SkipPrefixes(argv);
  if (i >= argv.size()) return std::nullopt;
  if (Basename(argv[i]) == "busybox") ++i;
  if (i >= argv.size() || !IsShell(argv[i])) return std::nullopt;
  for (size_t j = i + 1; j < argv.size(); ++j) {
    // -o NAME / +o NAME (set an option by name) take the next word.
    if (argv[j] == "-o" || argv[j] == "+o" || argv[j] == "-O" || argv[j] == "+O") {
      ++j;
      continue;
    }
    if (argv[j].size() > 1 && argv[j][0] == '+') continue;  // +e, +x: options turned off
    if (!IsOption(argv[j])) return std::nullopt;  // a script file: its arguments are data
    if (argv[j].rfind("--", 0) != 0 && argv[j].find('c') != std::string::npos) {
      return j + 1 < argv.size() ? std::optional<size_t>(j + 1) : std::nullopt;
    }
  }
  return std::nullopt;
}

std::string ArrayPlaceholderInShell(const std::vector<std::string>& command, bool string_form) {
  std::optional<size_t> script;
  if (string_form) {
    script = command.size() - 1;
  } else {
    script = ShellScriptArgument(command);
  }
  if (!script) return "";
  const std::string& text = command[*script];
  const size_t open = text.find("{array.");
  if (open == std::string::npos) return "";
  const size_t close = text.find('}', open);
  const std::string placeholder = text.substr(open, close == std::string::npos ? std::string::npos : close - open + 1);
  std::string column = placeholder.size() > 8 ? placeholder.substr(7, placeholder.size() - 8) : "COLUMN";
  return placeholder + " is inside text a shell runs as code, where a row's value (quotes, $(...), ;) would run: "
         "use the variable barge sets in the container, \"$" + column +
         "\", or pass the value as a whole argument of an exec-form command (command: [prog, \"" + placeholder +
         "\"], or after the script of [sh, -c, SCRIPT, sh, \"" + placeholder + "\"])";
}

}  // namespace barge::runner
