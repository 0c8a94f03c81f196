// Checks on a job file's raw text, made around the YAML parser: before it
// (size, NUL bytes, UTF-8, nesting depth, which a hostile file could use
// against the parser) and after it (what yaml-cpp 0.7 silently accepts or
// explains badly: unterminated quotes, tabs used for indentation).
//
// Lines and columns are counted from 1; columns count bytes.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace barge::runner {

// Files larger than this are refused before anything parses them. A job
// file for 1000 hosts is well under 200 KiB.
inline constexpr size_t kMaxJobFileBytes = 1024 * 1024;

// Deeper nesting is refused before the parser sees it; a job file needs 6.
inline constexpr int kMaxNestingDepth = 64;

struct TextProblem {
  int line = 0;
  int column = 0;
  std::string message;
};

// NUL bytes, invalid UTF-8 and excessive nesting. Reports at most the first
// problem of each kind: a binary file would otherwise give thousands. The
// size limit is the caller's to check (it decides what it reads).
std::vector<TextProblem> CheckRawText(std::string_view text);

// The offset of the first byte that does not begin a well-formed UTF-8
// sequence (overlong forms, surrogates and code points above U+10FFFF are
// ill-formed), or npos when `text` is all UTF-8.
size_t FindInvalidUtf8(std::string_view text);

// An estimate of YAML nesting (block indentation levels, compact "- "
// entries and flow brackets, ignoring quoted scalars, comments and block
// scalar contents): the first place it exceeds `max_depth`, or nullopt.
// Iterative, so any input is safe to scan.
//
// It cannot be exact, nor a guaranteed upper bound of yaml-cpp's depth: what
// it skips as scalar text (block scalars, whose extent depends on
// indentation indicators and on the parent's indentation as yaml-cpp 0.7
// computes it, including at document level; multi-line plain scalars; tags
// and anchors that run into a flow indicator) is decided line by line,
// without yaml-cpp's token-level context, and where yaml-cpp reads structure
// in text the scan took for a scalar, the scan undercounts. The parser
// therefore also counts depth on yaml-cpp's own events and refuses past
// kMaxNestingDepth exactly (job_file.cc, DocumentProbe); this scan answers
// first for ordinary deep text, before yaml-cpp reads it.
std::optional<TextProblem> FindDeepNesting(std::string_view text, int max_depth);

// "nested deeper than N levels; barge refuses to parse it"
std::string NestedTooDeepMessage(int max_depth);

// Where a quoted scalar opens that is never closed, as the scan above sees
// quotes (only where a scalar can start, so "don't" in a plain scalar is no
// quote), or nullopt. Used to explain a parse error; when yaml-cpp accepts
// the text, QuotedScalarIsClosed on its nodes is exact.
std::optional<TextProblem> FindUnclosedQuote(std::string_view text);

// "unterminated quoted string: the \" opened here is never closed"
std::string UnclosedQuoteMessage(char quote);

// The outermost '[' or '{' (opening a flow collection, as the scan sees
// them) that is still open at the end of `text`, or nullopt. Used to
// explain a parse error: yaml-cpp reports where it gave up, not where the
// bracket opened.
std::optional<TextProblem> FindUnclosedFlow(std::string_view text);

// "the '[' opened here is never closed with ']'"
std::string UnclosedFlowMessage(char open);

// True if `text` holds nothing but spaces, tabs and line breaks.
bool IsBlank(std::string_view text);

// The column of the first tab in the indentation (the leading blanks) of
// `line`, or 0 when there is none or no such line.
int TabIndentColumn(std::string_view text, int line);

// True if the quoted scalar whose opening quote (' or ") is at byte `open` is
// closed before the end of `text`. yaml-cpp 0.7 accepts an unterminated
// quote and swallows the rest of the file into it.
bool QuotedScalarIsClosed(std::string_view text, size_t open);

}  // namespace barge::runner
