#include "runner/jobfile/job_text.h"

#include <gtest/gtest.h>

#include <string>

namespace barge::runner {
namespace {

TEST(Utf8, AcceptsWellFormedTextAndFindsTheFirstBadByte) {
  EXPECT_EQ(FindInvalidUtf8("plain ascii"), std::string_view::npos);
  EXPECT_EQ(FindInvalidUtf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x9A\xA2"), std::string_view::npos);
  EXPECT_EQ(FindInvalidUtf8("ab\xE9z"), 2u);           // Latin-1 e-acute
  EXPECT_EQ(FindInvalidUtf8("\xC0\xAF"), 0u);          // overlong '/'
  EXPECT_EQ(FindInvalidUtf8("x\xED\xA0\x80"), 1u);     // a UTF-16 surrogate
  EXPECT_EQ(FindInvalidUtf8("\xF4\x90\x80\x80"), 0u);  // above U+10FFFF
  EXPECT_EQ(FindInvalidUtf8("ok\xE2\x82"), 2u);        // cut short
  EXPECT_EQ(FindInvalidUtf8("\x80"), 0u);              // a lone continuation byte
}

TEST(RawText, ReportsNulAndBadUtf8WithLineAndColumnOnceEach) {
  std::string text = std::string("name: a\nimage: b\x00\x00\nx: \xFF\xFF\n", 24);
  std::vector<TextProblem> problems = CheckRawText(text);
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_EQ(problems[0].line, 2);
  EXPECT_EQ(problems[0].column, 9);
  EXPECT_EQ(problems[0].message, "NUL byte in the file; a job file must be UTF-8 text");
  EXPECT_EQ(problems[1].line, 3);
  EXPECT_EQ(problems[1].column, 4);
  EXPECT_EQ(problems[1].message, "invalid UTF-8 (byte 0xFF); save the file as UTF-8");
}

std::string NestedFlow(int depth) {
  return "x: " + std::string(depth, '[') + std::string(depth, ']') + "\n";
}

std::string NestedMaps(int depth) {
  std::string text;
  for (int i = 0; i < depth; ++i) text += std::string(2 * i, ' ') + "k" + std::to_string(i) + ":\n";
  return text + std::string(2 * depth, ' ') + "leaf: 1\n";
}

TEST(Nesting, CountsFlowBracketsBlockIndentationAndCompactEntries) {
  // The root mapping is one level; each bracket one more.
  EXPECT_EQ(FindDeepNesting(NestedFlow(63), 64), std::nullopt);
  std::optional<TextProblem> flow = FindDeepNesting(NestedFlow(64), 64);
  ASSERT_TRUE(flow.has_value());
  EXPECT_EQ(flow->line, 1);
  EXPECT_EQ(flow->column, 67);
  EXPECT_EQ(flow->message, "nested deeper than 64 levels; barge refuses to parse it");

  EXPECT_EQ(FindDeepNesting(NestedMaps(63), 64), std::nullopt);
  std::optional<TextProblem> block = FindDeepNesting(NestedMaps(64), 64);
  ASSERT_TRUE(block.has_value());
  EXPECT_EQ(block->line, 65);

  std::string dashes;
  for (int i = 0; i < 70; ++i) dashes += "- ";
  EXPECT_TRUE(FindDeepNesting(dashes + "x\n", 64).has_value());
  EXPECT_EQ(FindDeepNesting("- - - x\n", 64), std::nullopt);
}

TEST(Nesting, IgnoresBracketsInQuotesCommentsPlainScalarsAndBlockScalars) {
  std::string brackets(100, '[');
  std::string text = "a: \"" + brackets +
                     "\"\n"
                     "b: '" +
                     brackets +
                     "'\n"
                     "# " +
                     brackets +
                     "\n"
                     "c: echo " +
                     brackets +
                     "\n"
                     "d: |\n  " +
                     brackets + "\n  more " + brackets +
                     "\n"
                     "e: [\"" +
                     brackets + "\", '" + brackets +
                     "']\n"
                     "f: \"multi\n  line " +
                     brackets +
                     "\"\n"
                     "g: 1\n";
  EXPECT_EQ(FindDeepNesting(text, 64), std::nullopt);
}

TEST(Nesting, ARealisticJobIsFarBelowTheLimit) {
  const char* job =
      "name: ddp\n"
      "hosts:\n"
      "  - address: 10.0.0.1\n"
      "    container:\n"
      "      env: {A: [1, {b: 2}]}\n"
      "roles:\n"
      "  head:\n"
      "    ready: {tcp_port: 29500}\n";
  // root, hosts list, host, container, env, [..], {b: 2}: 7 levels.
  EXPECT_EQ(FindDeepNesting(job, 7), std::nullopt);
  EXPECT_TRUE(FindDeepNesting(job, 6).has_value());
}

TEST(Blank, OnlyWhitespaceIsBlank) {
  EXPECT_TRUE(IsBlank(""));
  EXPECT_TRUE(IsBlank(" \n\t\r\n"));
  EXPECT_FALSE(IsBlank("# comment\n"));
}

TEST(Tabs, FindsATabInALinesIndentationOnly) {
  std::string text = "a:\n\tb: 1\n  c: \t2\n  \td: 3\n";
  EXPECT_EQ(TabIndentColumn(text, 1), 0);
  EXPECT_EQ(TabIndentColumn(text, 2), 1);
  EXPECT_EQ(TabIndentColumn(text, 3), 0);
  EXPECT_EQ(TabIndentColumn(text, 4), 3);
  EXPECT_EQ(TabIndentColumn(text, 99), 0);
}

TEST(Quotes, FindsTheClosingQuoteHonouringEscapes) {
  EXPECT_TRUE(QuotedScalarIsClosed("a: \"x\"", 3));
  EXPECT_TRUE(QuotedScalarIsClosed("a: \"x\\\"y\"", 3));  // "x\"y"
  EXPECT_FALSE(QuotedScalarIsClosed("a: \"x\\\"", 3));    // "x\"   (escaped, never closed)
  EXPECT_TRUE(QuotedScalarIsClosed("a: 'it''s'", 3));
  EXPECT_FALSE(QuotedScalarIsClosed("a: 'it''s", 3));
  EXPECT_FALSE(QuotedScalarIsClosed("a: \"open\nb: 2\n", 3));
  EXPECT_TRUE(QuotedScalarIsClosed("a: \"two\nlines\"\n", 3));
}

TEST(Quotes, FindsAQuoteThatOpensAndNeverClosesButNotApostrophesInPlainText) {
  std::optional<TextProblem> open = FindUnclosedQuote("a: don't\nb: ['x', 'it''s]\n");
  ASSERT_TRUE(open.has_value());
  EXPECT_EQ(open->line, 2);
  EXPECT_EQ(open->column, 10);
  EXPECT_EQ(open->message, "unterminated quoted string: the ' opened here is never closed");
  EXPECT_EQ(FindUnclosedQuote("a: don't\nb: [don't, \"x\"]\nc: 'it''s'\n# 'x\n"), std::nullopt);
  EXPECT_EQ(FindUnclosedQuote("a: \"x\\\"\n")->line, 1);
}

TEST(Flow, FindsTheOutermostBracketLeftOpen) {
  std::optional<TextProblem> open = FindUnclosedFlow("a: [1, {b: 2}\nc: [3]\n");
  ASSERT_TRUE(open.has_value());
  EXPECT_EQ(open->line, 1);
  EXPECT_EQ(open->column, 4);
  EXPECT_EQ(open->message, "the '[' opened here is never closed with ']'");
  EXPECT_EQ(FindUnclosedFlow("a: {b: 1\n")->message,
            "the '{' opened here is never closed with '}'");
  EXPECT_EQ(FindUnclosedFlow("a: [1, [2]]\nb: echo [x\nc: \"[\"\n"), std::nullopt);
}

}  // namespace
}  // namespace barge::runner
