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

// One pass of a small YAML lexer: enough structure to bound nesting and to
// see quotes, never enough to parse. Fed a text's lines in order
// (ScanLine), it stops at the first excess depth; Finish then says what is
// still open at the end. One scanner per text.
class YamlScan {
 public:
  explicit YamlScan(int max_depth) : max_depth_(max_depth) {}

  // Scans the next line (without its line break). False once nesting has
  // passed the limit: too_deep() says where, and no further line is to be
  // scanned.
  bool ScanLine(std::string_view line);
  const std::optional<TextProblem>& too_deep() const { return too_deep_; }
  // After the last line: the quote and the flow collection still open.
  ScanResult Finish() const;

 private:
  static constexpr int kNone = -2;
  // What follows a place where a node may begin.
  enum class Step {
    kScanOn,     // scanning goes on at i_
    kEndOfLine,  // the rest of the line is a block scalar's header
    kStop,       // nesting passed the limit
    kScalar,     // line_[i_] is a plain scalar's text
  };

  bool InBlockScalar(std::string_view line, size_t indent, bool blank);
  bool StartBlockLine(size_t indent);
  bool ScanRestOfLine();
  void SkipQuotedChar();
  bool ScanFlowChar(char c);
  Step ScanNodeStart(char c, bool blank_after);
  Step ScanIndicator(char c);
  void StartBlockScalar();
  void OpenQuote(char c);
  bool PassedLimit(size_t at);

  const int max_depth_;
  std::optional<TextProblem> too_deep_;
  int line_no_ = 0;
  int quote_line_ = 0;
  int quote_column_ = 0;
  std::optional<TextProblem> outer_flow_;  // the outermost open [ or {
  std::vector<int> indents_;               // columns (0-based) of the open block levels
  int flow_ = 0;                           // open [ and { brackets
  char quote_ = 0;                         // ' or " while inside a quoted scalar
  bool flow_token_start_ = true;
  // While in a block scalar: its owner's column, and the indentation of its
  // content once its first non-blank line gives it. A line indented less,
  // or a document marker, ends it.
  int block_parent_ = kNone;
  int block_indent_ = kNone;
  // The column of what owns the next node: the key, "- ", "? " or ": "
  // before it on this line; at the start of a line, the block level the
  // line is nested in (or starts, when at a level's own column); on a line
  // that continues a flow collection or quoted scalar, where that began.
  int owner_col_ = -1;
  // While a plain scalar in block context may go on on the next line: the
  // column that line must be indented past (the block level the scalar is
  // in), as yaml-cpp has it. Such a line is more of the scalar's text,
  // where a quote, bracket or "- " is no node.
  int plain_parent_ = kNone;
  // The line being scanned, the place in it, and whether a node may begin
  // there (block context).
  std::string_view line_;
  size_t i_ = 0;
  bool node_start_ = true;
};

bool YamlScan::ScanLine(std::string_view line) {
  ++line_no_;
  size_t indent = 0;
  while (indent < line.size() && line[indent] == ' ') ++indent;
  size_t first = indent;
  while (first < line.size() && IsBlankChar(line[first])) ++first;
  const bool blank = first == line.size();
  if (InBlockScalar(line, indent, blank)) return true;
  line_ = line;
  i_ = 0;
  node_start_ = true;
  if (quote_ == 0 && flow_ == 0) {
    if (blank) return true;
    if (line[first] == '#') {
      plain_parent_ = kNone;
      return true;
    }
    if (!StartBlockLine(indent)) return false;
  }
  return ScanRestOfLine();
}

// True while `line` is the content of the block scalar being skipped; at
// the first line that is not, the scalar ends.
bool YamlScan::InBlockScalar(std::string_view line, size_t indent, bool blank) {
  if (block_parent_ == kNone) return false;
  if (!IsDocumentMarker(line)) {
    if (blank) return true;
    // Content at column 0 (a document-level block scalar) is not
    // trusted to be text: yaml-cpp does not always read it so, and
    // scanning it as structure only overestimates the depth.
    if (block_indent_ == kNone && static_cast<int>(indent) > std::max(block_parent_, 0)) {
      block_indent_ = static_cast<int>(indent);
    }
    if (block_indent_ != kNone && static_cast<int>(indent) >= block_indent_) return true;
  }
  block_parent_ = kNone;
  block_indent_ = kNone;
  return false;
}

// A line in block context, neither blank nor a comment: a document marker,
// more of a plain scalar, or a node at its indentation (which closes the
// deeper block levels, or opens one). False when nesting passed the limit.
bool YamlScan::StartBlockLine(size_t indent) {
  if (IsDocumentMarker(line_)) {
    indents_.clear();
    owner_col_ = -1;
    plain_parent_ = kNone;
    i_ = 3;
  } else if (plain_parent_ != kNone && static_cast<int>(indent) > plain_parent_) {
    node_start_ = false;
    i_ = indent;
  } else {
    plain_parent_ = kNone;
    while (!indents_.empty() && indents_.back() > static_cast<int>(indent)) indents_.pop_back();
    owner_col_ = indents_.empty() ? -1 : indents_.back();
    if (indents_.empty() || indents_.back() < static_cast<int>(indent)) {
      indents_.push_back(static_cast<int>(indent));
    }
    if (PassedLimit(indent)) return false;
    i_ = indent;
  }
  return true;
}

// The line from i_ to its end (or its comment). False when nesting passed
// the limit.
bool YamlScan::ScanRestOfLine() {
  while (i_ < line_.size()) {
    const char c = line_[i_];
    const bool blank_after = i_ + 1 >= line_.size() || IsBlankChar(line_[i_ + 1]);
    if (quote_ != 0) {
      SkipQuotedChar();
      continue;
    }
    const bool comment = c == '#' && (i_ == 0 || IsBlankChar(line_[i_ - 1]));
    if (comment) {
      plain_parent_ = kNone;
      break;
    }
    if (flow_ > 0) {
      if (!ScanFlowChar(c)) return false;
      continue;
    }
    if (IsBlankChar(c)) {
      ++i_;
      continue;
    }
    if (node_start_) {
      const Step step = ScanNodeStart(c, blank_after);
      if (step == Step::kStop) return false;
      if (step == Step::kEndOfLine) break;
      if (step == Step::kScanOn) continue;
    }
    // Inside a plain scalar, or after a node: ": " ends a key.
    if (c == ':' && blank_after) {
      node_start_ = true;
      plain_parent_ = kNone;
    }
    ++i_;
  }
  return true;
}

// Inside a quoted scalar: steps over one character (or escape), closing the
// quote at its end.
void YamlScan::SkipQuotedChar() {
  const char c = line_[i_];
  if (quote_ == '"') {
    if (c == '\\') {
      i_ += 2;
      return;
    }
    if (c == '"') quote_ = 0;
    ++i_;
    return;
  }
  if (c == '\'' && i_ + 1 < line_.size() && line_[i_ + 1] == '\'') {
    i_ += 2;
    return;
  }
  if (c == '\'') quote_ = 0;
  ++i_;
}

// Inside a flow collection: brackets open and close levels, a quote opens
// where a token starts. False when nesting passed the limit.
bool YamlScan::ScanFlowChar(char c) {
  if ((c == '"' || c == '\'') && flow_token_start_) {
    OpenQuote(c);
  } else if (c == '[' || c == '{') {
    ++flow_;
    flow_token_start_ = true;
    if (PassedLimit(i_)) return false;
  } else if (c == ']' || c == '}') {
    --flow_;
    flow_token_start_ = false;
    if (flow_ == 0) node_start_ = false;
  } else if (c == ',' || c == ':') {
    flow_token_start_ = true;
  } else if (!IsBlankChar(c)) {
    flow_token_start_ = false;
  }
  ++i_;
  return true;
}

// Where a node may begin (block context, `c` not blank): an indicator, a
// flow collection, a block scalar, an anchor or tag, or a scalar.
YamlScan::Step YamlScan::ScanNodeStart(char c, bool blank_after) {
  plain_parent_ = kNone;
  if ((c == '-' || c == '?' || c == ':') && blank_after) return ScanIndicator(c);
  if (c == '[' || c == '{') {
    owner_col_ = static_cast<int>(i_);
    flow_ = 1;
    outer_flow_ = TextProblem{line_no_, static_cast<int>(i_) + 1, UnclosedFlowMessage(c)};
    flow_token_start_ = true;
    if (PassedLimit(i_)) return Step::kStop;
    ++i_;
    return Step::kScanOn;
  }
  if (c == '|' || c == '>') {
    StartBlockScalar();
    return Step::kEndOfLine;
  }
  if (c == '&' || c == '!') {  // anchor or tag: the node follows
    // It ends at a blank or, as yaml-cpp reads it, at a flow
    // indicator (which then opens the node: `!t{...`).
    ++i_;
    while (i_ < line_.size() && !IsBlankChar(line_[i_]) && std::strchr("[]{},", line_[i_]) == nullptr) ++i_;
    return Step::kScanOn;
  }
  if (c != '"' && c != '\'') plain_parent_ = owner_col_;
  owner_col_ = static_cast<int>(i_);
  node_start_ = false;
  if (c == '"' || c == '\'') {
    OpenQuote(c);
    ++i_;
    return Step::kScanOn;
  }
  return Step::kScalar;
}

// A sequence entry (or complex key/value), `c` followed by a blank: its
// content is one level deeper, at the column of the next token.
YamlScan::Step YamlScan::ScanIndicator(char c) {
  size_t j = i_ + 1;
  while (j < line_.size() && IsBlankChar(line_[j])) ++j;
  owner_col_ = static_cast<int>(i_);
  if (c != ':' && j < line_.size() && line_[j] != '#' &&
      (indents_.empty() || indents_.back() < static_cast<int>(j))) {
    indents_.push_back(static_cast<int>(j));
    if (PassedLimit(j)) return Step::kStop;
  }
  i_ = j;
  return Step::kScanOn;
}

// A block scalar's header at i_ ('|' or '>'): the lines after it are its
// content (InBlockScalar).
void YamlScan::StartBlockScalar() {
  block_parent_ = owner_col_;
  // An explicit indentation indicator (`|2`, `>-4`) fixes the
  // content's indentation: a line indented less ends the scalar.
  // Taken from column 0 at least, which can only overestimate.
  for (size_t j = i_ + 1; j < i_ + 3 && j < line_.size(); ++j) {
    if (line_[j] >= '1' && line_[j] <= '9') {
      block_indent_ = std::max(block_parent_, 0) + (line_[j] - '0');
    }
  }
}

void YamlScan::OpenQuote(char c) {
  quote_ = c;
  quote_line_ = line_no_;
  quote_column_ = static_cast<int>(i_) + 1;
}

// True, noting where (column `at` of this line), when the open block levels
// and brackets are more than the limit.
bool YamlScan::PassedLimit(size_t at) {
  if (static_cast<int>(indents_.size()) + flow_ <= max_depth_) return false;
  too_deep_ = TextProblem{line_no_, static_cast<int>(at) + 1, NestedTooDeepMessage(max_depth_)};
  return true;
}

ScanResult YamlScan::Finish() const {
  ScanResult result;
  if (quote_ != 0) {
    result.unclosed_quote = TextProblem{quote_line_, quote_column_, UnclosedQuoteMessage(quote_)};
  }
  if (flow_ > 0) result.unclosed_flow = outer_flow_;
  return result;
}

// The scan of `text`: stops at the first excess depth (only too_deep set).
ScanResult ScanYaml(std::string_view text, int max_depth) {
  YamlScan scan(max_depth);
  for (std::string_view line : Lines(text)) {
    if (!scan.ScanLine(line)) return ScanResult{scan.too_deep(), std::nullopt, std::nullopt};
  }
  return scan.Finish();
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
