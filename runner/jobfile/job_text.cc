#include "runner/jobfile/job_text.h"

#include <algorithm>
#include <cstring>
#include <cstdint>
#include <cstdio>
#include <limits>

namespace barge::runner {
namespace {

// 1-based line and column of byte `offset`.
void LineColumnOf(std::string_view text, size_t offset, int* line, int* column) {
  int l = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++l;
      line_start = i + 1;
    }
  }
  *line = l;
  *column = static_cast<int>(offset - line_start) + 1;
}

bool IsBlankChar(char c) { return c == ' ' || c == '\t'; }

// "---" or "..." at the start of a line, alone or followed by a blank.
bool IsDocumentMarker(std::string_view line) {
  std::string_view start = line.substr(0, 3);
  return (start == "---" || start == "...") && (line.size() == 3 || IsBlankChar(line[3]));
}

// Splits `text` into lines without their "\n" (and "\r" before it).
std::vector<std::string_view> Lines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = text.substr(pos, eol - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    if (eol == text.size()) break;
    pos = eol + 1;
  }
  return lines;
}

}  // namespace

size_t FindInvalidUtf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return i;
    }
    if (i + len > n) return i;
    for (size_t k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    const uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += len;
  }
  return std::string_view::npos;
}

std::vector<TextProblem> CheckRawText(std::string_view text) {
  std::vector<TextProblem> problems;
  if (size_t nul = text.find('\0'); nul != std::string_view::npos) {
    TextProblem p;
    LineColumnOf(text, nul, &p.line, &p.column);
    p.message = "NUL byte in the file; a job file must be UTF-8 text";
    problems.push_back(p);
  }
  if (size_t bad = FindInvalidUtf8(text); bad != std::string_view::npos) {
    TextProblem p;
    LineColumnOf(text, bad, &p.line, &p.column);
    char byte[8];
    std::snprintf(byte, sizeof byte, "0x%02X", static_cast<unsigned char>(text[bad]));
    p.message = std::string("invalid UTF-8 (byte ") + byte + "); save the file as UTF-8";
    problems.push_back(p);
  }
  if (auto deep = FindDeepNesting(text, kMaxNestingDepth)) problems.push_back(*deep);
  return problems;
}

namespace {

struct ScanResult {
  std::optional<TextProblem> too_deep;        // where nesting first passed the limit
  std::optional<TextProblem> unclosed_quote;  // a quote still open at the end
  std::optional<TextProblem> unclosed_flow;   // the outermost [ or { still open at the end
};

// One pass of a small YAML lexer: enough structure to bound nesting and
// to see quotes, never enough to parse. Stops at the first excess depth.
ScanResult ScanYaml(std::string_view text, int max_depth) {
  constexpr int kNone = -2;
  ScanResult result;
  int quote_line = 0;
  int quote_column = 0;
  std::optional<TextProblem> outer_flow;  // the outermost open [ or {
  std::vector<int> indents;               // columns (0-based) of the open block levels
  int flow = 0;                           // open [ and { brackets
  char quote = 0;                         // ' or " while inside a quoted scalar
  bool flow_token_start = true;
  // While in a block scalar: its owner's column, and the indentation of its
  // content once its first non-blank line gives it. A line indented less,
  // or a document marker, ends it.
  int block_parent = kNone;
  int block_indent = kNone;
  // The column of what owns the next node: the key, "- ", "? " or ": "
  // before it on this line; at the start of a line, the block level the
  // line is nested in (or starts, when at a level's own column); on a line
  // that continues a flow collection or quoted scalar, where that began.
  int owner_col = -1;
  // While a plain scalar in block context may go on on the next line: the
  // column that line must be indented past (the block level the scalar is
  // in), as yaml-cpp has it. Such a line is more of the scalar's text,
  // where a quote, bracket or "- " is no node.
  int plain_parent = kNone;
  int line_no = 0;
  for (std::string_view line : Lines(text)) {
    ++line_no;
    size_t indent = 0;
    while (indent < line.size() && line[indent] == ' ') ++indent;
    size_t first = indent;
    while (first < line.size() && IsBlankChar(line[first])) ++first;
    const bool blank = first == line.size();
    if (block_parent != kNone) {
      if (!IsDocumentMarker(line)) {
        if (blank) continue;
        // Content at column 0 (a document-level block scalar) is not
        // trusted to be text: yaml-cpp does not always read it so, and
        // scanning it as structure only overestimates the depth.
        if (block_indent == kNone && static_cast<int>(indent) > std::max(block_parent, 0)) {
          block_indent = static_cast<int>(indent);
        }
        if (block_indent != kNone && static_cast<int>(indent) >= block_indent) continue;
      }
      block_parent = kNone;
      block_indent = kNone;
    }
    size_t i = 0;
    bool node_start = true;  // block context: a node may begin at `i`
    auto too_deep = [&](size_t at) -> std::optional<TextProblem> {
      if (static_cast<int>(indents.size()) + flow <= max_depth) return std::nullopt;
      return TextProblem{line_no, static_cast<int>(at) + 1, NestedTooDeepMessage(max_depth)};
    };
    if (quote == 0 && flow == 0) {
      if (blank) continue;
      if (line[first] == '#') {
        plain_parent = kNone;
        continue;
      }
      if (IsDocumentMarker(line)) {
        indents.clear();
        owner_col = -1;
        plain_parent = kNone;
        i = 3;
      } else if (plain_parent != kNone && static_cast<int>(indent) > plain_parent) {
        node_start = false;
        i = indent;
      } else {
        plain_parent = kNone;
        while (!indents.empty() && indents.back() > static_cast<int>(indent)) indents.pop_back();
        owner_col = indents.empty() ? -1 : indents.back();
        if (indents.empty() || indents.back() < static_cast<int>(indent)) {
          indents.push_back(static_cast<int>(indent));
        }
        if ((result.too_deep = too_deep(indent))) return result;
        i = indent;
      }
    }
    while (i < line.size()) {
      const char c = line[i];
      const bool blank_after = i + 1 >= line.size() || IsBlankChar(line[i + 1]);
      if (quote == '"') {
        if (c == '\\') {
          i += 2;
          continue;
        }
        if (c == '"') quote = 0;
        ++i;
        continue;
      }
      if (quote == '\'') {
        if (c == '\'' && i + 1 < line.size() && line[i + 1] == '\'') {
          i += 2;
          continue;
        }
        if (c == '\'') quote = 0;
        ++i;
        continue;
      }
      const bool comment = c == '#' && (i == 0 || IsBlankChar(line[i - 1]));
      if (comment) {
        plain_parent = kNone;
        break;
      }
      if (flow > 0) {
        if ((c == '"' || c == '\'') && flow_token_start) {
          quote = c;
          quote_line = line_no;
          quote_column = static_cast<int>(i) + 1;
        } else if (c == '[' || c == '{') {
          ++flow;
          flow_token_start = true;
          if ((result.too_deep = too_deep(i))) return result;
        } else if (c == ']' || c == '}') {
          --flow;
          flow_token_start = false;
          if (flow == 0) node_start = false;
        } else if (c == ',' || c == ':') {
          flow_token_start = true;
        } else if (!IsBlankChar(c)) {
          flow_token_start = false;
        }
        ++i;
        continue;
      }
      if (IsBlankChar(c)) {
        ++i;
        continue;
      }
      if (node_start) {
        plain_parent = kNone;
        if ((c == '-' || c == '?' || c == ':') && blank_after) {
          // A sequence entry (or complex key/value): its content is one
          // level deeper, at the column of the next token.
          size_t j = i + 1;
          while (j < line.size() && IsBlankChar(line[j])) ++j;
          owner_col = static_cast<int>(i);
          if (c != ':' && j < line.size() && line[j] != '#' &&
              (indents.empty() || indents.back() < static_cast<int>(j))) {
            indents.push_back(static_cast<int>(j));
            if ((result.too_deep = too_deep(j))) return result;
          }
          i = j;
          continue;
        }
        if (c == '[' || c == '{') {
          owner_col = static_cast<int>(i);
          flow = 1;
          outer_flow = TextProblem{line_no, static_cast<int>(i) + 1, UnclosedFlowMessage(c)};
          flow_token_start = true;
          if ((result.too_deep = too_deep(i))) return result;
          ++i;
          continue;
        }
        if (c == '|' || c == '>') {
          block_parent = owner_col;
          // An explicit indentation indicator (`|2`, `>-4`) fixes the
          // content's indentation: a line indented less ends the scalar.
          // Taken from column 0 at least, which can only overestimate.
          for (size_t j = i + 1; j < i + 3 && j < line.size(); ++j) {
            if (line[j] >= '1' && line[j] <= '9') {
              block_indent = std::max(block_parent, 0) + (line[j] - '0');
            }
          }
          break;
        }
        if (c == '&' || c == '!') {  // anchor or tag: the node follows
          // It ends at a blank or, as yaml-cpp reads it, at a flow
          // indicator (which then opens the node: `!t{...`).
          ++i;
          while (i < line.size() && !IsBlankChar(line[i]) && std::strchr("[]{},", line[i]) == nullptr) ++i;
          continue;
        }
        if (c != '"' && c != '\'') plain_parent = owner_col;
        owner_col = static_cast<int>(i);
        node_start = false;
        if (c == '"' || c == '\'') {
          quote = c;
          quote_line = line_no;
          quote_column = static_cast<int>(i) + 1;
          ++i;
          continue;
        }
      }
      // Inside a plain scalar, or after a node: ": " ends a key.
      if (c == ':' && blank_after) {
        node_start = true;
        plain_parent = kNone;
      }
      ++i;
    }
  }
  if (quote != 0) {
    result.unclosed_quote = TextProblem{quote_line, quote_column, UnclosedQuoteMessage(quote)};
  }
  if (flow > 0) result.unclosed_flow = outer_flow;
  return result;
}

}  // namespace

std::string NestedTooDeepMessage(int max_depth) {
  return "nested deeper than " + std::to_string(max_depth) + " levels; barge refuses to parse it";
}

std::string UnclosedQuoteMessage(char quote) {
  return std::string("unterminated quoted string: the ") + quote + " opened here is never closed";
}

std::optional<TextProblem> FindDeepNesting(std::string_view text, int max_depth) {
  return ScanYaml(text, max_depth).too_deep;
}

std::optional<TextProblem> FindUnclosedQuote(std::string_view text) {
  return ScanYaml(text, std::numeric_limits<int>::max()).unclosed_quote;
}

std::string UnclosedFlowMessage(char open) {
  return std::string("the '") + open + "' opened here is never closed with '" +
         (open == '[' ? ']' : '}') + "'";
}

std::optional<TextProblem> FindUnclosedFlow(std::string_view text) {
  return ScanYaml(text, std::numeric_limits<int>::max()).unclosed_flow;
}

bool IsBlank(std::string_view text) {
  for (char c : text) {
    if (c != ' ' && c != '\t' && c != '\r' && c != '\n') return false;
  }
  return true;
}

int TabIndentColumn(std::string_view text, int line) {
  std::vector<std::string_view> lines = Lines(text);
  if (line < 1 || line > static_cast<int>(lines.size())) return 0;
  std::string_view l = lines[line - 1];
  for (size_t i = 0; i < l.size() && IsBlankChar(l[i]); ++i) {
    if (l[i] == '\t') return static_cast<int>(i) + 1;
  }
  return 0;
}

bool QuotedScalarIsClosed(std::string_view text, size_t open) {
  if (open >= text.size()) return false;
  const char quote = text[open];
  for (size_t i = open + 1; i < text.size(); ++i) {
    if (quote == '"' && text[i] == '\\') {
      ++i;
    } else if (text[i] == quote) {
      if (quote == '\'' && i + 1 < text.size() && text[i + 1] == '\'') {
        ++i;  // '' is an escaped quote
      } else {
        return true;
      }
    }
  }
  return false;
}

}  // namespace barge::runner
