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

// Programs whose first operand is a script file they run.
bool IsInterpreter(std::string_view program) {
  const std::string_view name = Basename(program);
  static constexpr std::array<std::string_view, 8> kInterpreters = {"python", "perl", "ruby",  "node",
                                                                    "php",    "lua",  "Rscript", "tclsh"};
  for (std::string_view i : kInterpreters) {
    if (name.starts_with(i)) return true;  // python3, python3.11, perl5.36...
  }
  return IsShell(name);
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

// An option after which programs read their next argument as code: a
// cluster of short options holding c (sh -c, python -c, bash -lc), e or E
// (perl -e, ruby -e, node -e, sed -e), or S (env -S), and the long ones that
// mean the same. Not tied to any program: a wrapper barge does not know
// (sudo, nohup, stdbuf, tini --, mpirun ...) changes nothing.
bool ReadsCode(std::string_view option) {
  static constexpr std::array<std::string_view, 12> kLong = {
      "--command", "--eval",      "--exec",      "--execute", "--expression", "--split-string",
      "--rcfile",  "--init-file", "--eval-string", "--code",  "--script",     "--file"};
  if (option.starts_with("--")) {
    const std::string_view name = option.substr(0, option.find('='));
    return std::find(kLong.begin(), kLong.end(), name) != kLong.end();
  }
  if (option.size() < 2 || option[0] != '-') return false;
  return option.find_first_of("ceES", 1) != std::string_view::npos;
}

// The first code-reading option among the options just before argv[i]
// (walking back over options and `--` to the nearest operand), or "".
std::string CodeOptionBefore(const std::vector<std::string>& argv, size_t i) {
  for (size_t j = i; j-- > 1;) {
    if (!IsOption(argv[j])) break;
    if (ReadsCode(argv[j])) return argv[j];
  }
  return "";
}

// The operand a word stops at when walking back from argv[i] over options.
size_t OperandBefore(const std::vector<std::string>& argv, size_t i) {
  size_t j = i;
  while (j-- > 1 && IsOption(argv[j])) {
  }
  return j;
}

bool IsWholePlaceholder(const std::string& word) {
  return word.starts_with("{array.") && word.ends_with("}") && word.find('{', 1) == std::string::npos &&
         word.find('}') == word.size() - 1;
}

// --NAME=VALUE with the placeholder in VALUE only: an option's value, which
// the program's option parser reads as data.
bool IsOptionValue(const std::string& word) {
  if (!word.starts_with("--")) return false;
  const size_t eq = word.find('=');
  if (eq == std::string::npos || eq == 2) return false;
  for (size_t k = 2; k < eq; ++k) {
    const char c = word[k];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_')) {
      return false;
    }
  }
  return !ReadsCode(word);
}

// Why argv[i], which holds a placeholder, is read as code or picks what
// runs; "" when it is data.
std::string WhyCode(const std::vector<std::string>& argv, size_t i) {
  if (i == 0) return "is the program itself";
  if (std::optional<size_t> script = ShellScriptArgument(argv); script && *script == i) {
    return "is inside text a shell runs as code";
  }
  if (std::string option = CodeOptionBefore(argv, i); !option.empty()) {
    return "is an argument that the option " + option + " before it reads as code";
  }
  if (IsWholePlaceholder(argv[i])) {
    const size_t operand = OperandBefore(argv, i);
    if (operand == SkipPrefixes(argv) && IsInterpreter(argv[operand])) {
      return "is the script file " + std::string(Basename(argv[operand])) + " runs";
    }
    return "";
  }
  if (IsOptionValue(argv[i])) return "";
  return "is inside an argument (only a whole argument, or an option's value as --NAME={array.X}, is data "
         "whatever the program)";
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
  for (size_t i = 0; i < command.size(); ++i) {
    const std::string& text = command[i];
    const size_t open = text.find("{array.");
    if (open == std::string::npos) continue;
    std::string why;
    if (string_form) {
      if (i + 1 != command.size()) continue;  // sh, -c: barge's own words
      why = "is inside text a shell runs as code";
    } else {
      why = WhyCode(command, i);
    }
    if (why.empty()) continue;
    const size_t close = text.find('}', open);
    const std::string placeholder =
        text.substr(open, close == std::string::npos ? std::string::npos : close - open + 1);
    std::string column = placeholder.size() > 8 ? placeholder.substr(7, placeholder.size() - 8) : "COLUMN";
    return placeholder + " " + why +
           ", where a row's value (quotes, $(...), ;) would run: use the variable barge sets in the container, "
           "\"$" + column + "\", or pass the value as a whole argument of an exec-form command (command: [prog, \"" +
           placeholder + "\"], or after the script of [sh, -c, SCRIPT, sh, \"" + placeholder + "\"])";
  }
  return "";
}

}  // namespace barge::runner
