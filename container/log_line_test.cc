#include "container/log_line.h"
#include "tests/test_seed.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <utility>
#include <vector>

namespace barge::container {
namespace {

// Lines as emitted, with "+" in front of continuation pieces.
using Lines = std::vector<std::string>;

struct Collector {
  Lines lines;
  LineSplitter splitter;
  explicit Collector(size_t max = LineSplitter::kMaxLineBytes)
      : splitter([this](std::string_view line, bool continuation) {
          lines.push_back((continuation ? "+" : "") + std::string(line));
        }, max) {}
};

Lines SplitWhole(std::string_view stream, size_t max = LineSplitter::kMaxLineBytes) {
  Collector c(max);
  c.splitter.Feed(stream);
  c.splitter.Flush();
  return c.lines;
}

Lines SplitByteByByte(std::string_view stream, size_t max = LineSplitter::kMaxLineBytes) {
  Collector c(max);
  for (char ch : stream) c.splitter.Feed(std::string_view(&ch, 1));
  c.splitter.Flush();
  return c.lines;
}

TEST(LineSplitter, EmitsCompleteLinesWithoutTheirNewline) {
  EXPECT_EQ(SplitWhole("out\nerr\n"), (Lines{"out", "err"}));
}

TEST(LineSplitter, HoldsAPartialLineUntilItsNewlineArrives) {
  Collector c;
  c.splitter.Feed("hel");
  EXPECT_TRUE(c.lines.empty());
  EXPECT_EQ(c.splitter.pending_bytes(), 3u);
  c.splitter.Feed("lo\nwor");
  EXPECT_EQ(c.lines, (Lines{"hello"}));
  c.splitter.Feed("ld\n");
  EXPECT_EQ(c.lines, (Lines{"hello", "world"}));
  EXPECT_EQ(c.splitter.pending_bytes(), 0u);
}

TEST(LineSplitter, FlushEmitsAFinalLineWithoutNewlineAndNothingElse) {
  EXPECT_EQ(SplitWhole("a\nno newline"), (Lines{"a", "no newline"}));
  EXPECT_EQ(SplitWhole("a\n"), (Lines{"a"}));
  EXPECT_EQ(SplitWhole(""), Lines{});
  Collector c;
  c.splitter.Feed("x");
  c.splitter.Flush();
  c.splitter.Flush();  // a second Flush adds nothing
  EXPECT_EQ(c.lines, (Lines{"x"}));
  c.splitter.Feed("next stream\n");  // usable again after Flush
  EXPECT_EQ(c.lines, (Lines{"x", "next stream"}));
}

TEST(LineSplitter, DiscardDropsTheUnfinishedLineAndAnOverlongLinesRestStartsAfresh) {
  Collector c;
  c.splitter.Feed("whole\nbroken of");
  c.splitter.Discard();
  EXPECT_EQ(c.splitter.pending_bytes(), 0u);
  c.splitter.Flush();  // nothing left to emit
  c.splitter.Feed("next\n");
  EXPECT_EQ(c.lines, (Lines{"whole", "next"}));
  Collector capped(4);
  capped.splitter.Feed("abcdefg");  // "abcd" out, "efg" held as a continuation
  capped.splitter.Discard();
  capped.splitter.Feed("xy\n");
  EXPECT_EQ(capped.lines, (Lines{"abcd", "xy"}));  // not "+xy"
}

TEST(LineSplitter, EmptyLinesAreKept) {
  EXPECT_EQ(SplitWhole("\n\na\n\n"), (Lines{"", "", "a", ""}));
}

TEST(LineSplitter, CarriageReturnsStayInTheLine) {
  EXPECT_EQ(SplitWhole("crlf\r\n\r\nbare\rcr\n"), (Lines{"crlf\r", "\r", "bare\rcr"}));
  EXPECT_EQ(SplitByteByByte("crlf\r\n\r\nbare\rcr\n"), (Lines{"crlf\r", "\r", "bare\rcr"}));
}

TEST(LineSplitter, BinaryBytesPassThroughUnchanged) {
  constexpr char kBytes[] = "a\0b\xff\xfe\n\x1b[31mred\x1b[0m\n";
  const std::string stream(kBytes, sizeof kBytes - 1);
  EXPECT_EQ(SplitWhole(stream), (Lines{std::string("a\0b\xff\xfe", 5), "\x1b[31mred\x1b[0m"}));
}

TEST(LineSplitter, ALineLongerThanTheCapIsEmittedInCappedPieces) {
  EXPECT_EQ(SplitWhole("abcdefghij\nxy\n", 4), (Lines{"abcd", "+efgh", "+ij", "xy"}));
  // Exactly the cap: one piece, and no empty piece after it.
  EXPECT_EQ(SplitWhole("abcd\nefgh", 4), (Lines{"abcd", "efgh"}));
  // Exactly twice the cap.
  EXPECT_EQ(SplitWhole("abcdefgh\n", 4), (Lines{"abcd", "+efgh"}));
  EXPECT_EQ(SplitWhole("abcdefgh", 4), (Lines{"abcd", "+efgh"}));
  EXPECT_EQ(SplitWhole("abcdefghi", 4), (Lines{"abcd", "+efgh", "+i"}));
}

TEST(LineSplitter, TheDefaultCapIsOneMebibyteAndBoundsWhatIsHeld) {
  const size_t mib = size_t{1} << 20;
  std::string stream(mib, 'a');
  stream += "\n";
  stream += std::string(2 * mib + 10, 'b');
  stream += "\nshort\n";
  Collector c;
  // Feed in 64 KiB chunks, as a channel would deliver it.
  for (size_t pos = 0; pos < stream.size(); pos += 65536) {
    c.splitter.Feed(std::string_view(stream).substr(pos, 65536));
    EXPECT_LE(c.splitter.pending_bytes(), mib);
  }
  c.splitter.Flush();
  ASSERT_EQ(c.lines.size(), 5u);
  EXPECT_EQ(c.lines[0], std::string(mib, 'a'));
  EXPECT_EQ(c.lines[1], std::string(mib, 'b'));
  EXPECT_EQ(c.lines[2], "+" + std::string(mib, 'b'));
  EXPECT_EQ(c.lines[3], "+" + std::string(10, 'b'));
  EXPECT_EQ(c.lines[4], "short");
}

TEST(LineSplitter, ChunkBoundariesNeverChangeTheLines) {
  // A stream with empty lines, CRLF, long lines around a small cap, and no
  // final newline; fed whole, byte by byte, at every single split point,
  // and in random chunks, it must give the same lines every time.
  const std::string stream =
      "first\n\n\r\nabcdefghijklmnopq\nabcdefgh\nabcdefg\nabcdefghi\n\n0123456789abcdef"
      "0123456789abcdef\nx\r\nlast without newline";
  const uint64_t seed = barge::testing::TestSeed(42);
  for (size_t cap : {size_t{1}, size_t{7}, size_t{8}, size_t{9}, LineSplitter::kMaxLineBytes}) {
    const Lines whole = SplitWhole(stream, cap);
    ASSERT_FALSE(whole.empty());
    EXPECT_EQ(SplitByteByByte(stream, cap), whole) << "cap " << cap;
    for (size_t cut = 0; cut <= stream.size(); ++cut) {
      Collector c(cap);
      c.splitter.Feed(std::string_view(stream).substr(0, cut));
      c.splitter.Feed(std::string_view(stream).substr(cut));
      c.splitter.Flush();
      ASSERT_EQ(c.lines, whole) << "cap " << cap << ", cut at " << cut;
    }
    std::mt19937 rng(seed);
    for (int round = 0; round < 200; ++round) {
      Collector c(cap);
      size_t pos = 0;
      while (pos < stream.size()) {
        const size_t n = std::uniform_int_distribution<size_t>(0, 12)(rng);
        c.splitter.Feed(std::string_view(stream).substr(pos, n));
        pos += n;
      }
      c.splitter.Flush();
      ASSERT_EQ(c.lines, whole) << "cap " << cap << ", round " << round;
    }
  }
  EXPECT_EQ(SplitWhole(stream, 8),
            (Lines{"first", "", "\r", "abcdefgh", "+ijklmnop", "+q", "abcdefgh", "abcdefg",
                   "abcdefgh", "+i", "", "01234567", "+89abcdef", "+01234567", "+89abcdef", "x\r",
                   "last wit", "+hout new", "+line"}));
}

// The real output of `docker logs --timestamps` for
//   sh -c 'echo a; echo; printf "no newline"; printf "\r\ncr\r\n"; echo b'
// captured from Docker 20.10 on the development machine.
constexpr std::string_view kDockerLogs =
    "2026-11-22T04:39:02.789384060Z a\n"
    "2026-11-22T04:39:02.789416658Z \n"
    "2026-11-22T04:39:02.789419563Z no newline\r\n"
    "2026-11-22T04:39:02.789422076Z cr\r\n"
    "2026-11-22T04:39:02.789424430Z b\n";

TEST(ParseTimestampedLine, SplitsDockersStampFromTheContainersText) {
  Lines lines = SplitWhole(kDockerLogs);
  ASSERT_EQ(lines.size(), 5u);
  std::vector<std::pair<int64_t, std::string>> parsed;
  for (const std::string& line : lines) {
    Result<TimestampedLine> r = ParseTimestampedLine(line);
    ASSERT_TRUE(r.ok()) << r.status().message();
    parsed.emplace_back(r->ns, std::string(r->text));
  }
  EXPECT_EQ(parsed[0], std::make_pair(int64_t{1795322342789384060}, std::string("a")));
  EXPECT_EQ(parsed[1].second, "");  // an empty line is "<stamp> "
  EXPECT_EQ(parsed[2].second, "no newline\r");
  EXPECT_EQ(parsed[3].second, "cr\r");
  EXPECT_EQ(parsed[4].second, "b");
  for (size_t i = 1; i < parsed.size(); ++i) {
    EXPECT_LT(parsed[i - 1].first, parsed[i].first) << "line " << i;
  }
}

TEST(ParseTimestampedLine, KeepsTheStampAsWrittenAndSpacesInTheText) {
  Result<TimestampedLine> r = ParseTimestampedLine("2026-11-22T04:37:38.5Z  two  spaces ");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->timestamp, "2026-11-22T04:37:38.5Z");
  EXPECT_EQ(r->ns, 1795322258500000000);
  EXPECT_EQ(r->text, " two  spaces ");
}

TEST(ParseTimestampedLine, AcceptsEveryFractionLengthAndOffsets) {
  const char* const lines[] = {
      "2026-11-22T04:37:38Z x",           "2026-11-22T04:37:38.1Z x",
      "2026-11-22T04:37:38.12Z x",        "2026-11-22T04:37:38.123Z x",
      "2026-11-22T04:37:38.1234Z x",      "2026-11-22T04:37:38.12345Z x",
      "2026-11-22T04:37:38.123456Z x",    "2026-11-22T04:37:38.1234567Z x",
      "2026-11-22T04:37:38.12345678Z x",  "2026-11-22T04:37:38.123456789Z x",
      "2026-11-22T04:37:38.123456789+00:00 x",
  };
  int64_t previous = -1;
  for (const char* line : lines) {
    Result<TimestampedLine> r = ParseTimestampedLine(line);
    ASSERT_TRUE(r.ok()) << line << ": " << r.status().message();
    EXPECT_EQ(r->text, "x");
    EXPECT_GE(r->ns, previous) << line;  // the list is in time order
    previous = r->ns;
  }
}

TEST(ParseTimestampedLine, ALoneStampIsALineWithNoText) {
  Result<TimestampedLine> r = ParseTimestampedLine("2026-11-22T04:37:38Z");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->text, "");
  EXPECT_EQ(r->ns, 1795322258000000000);
}

TEST(ParseTimestampedLine, ALineWithoutAValidStampIsAnError) {
  for (std::string_view bad : {"", " ", "hello world", "2026-11-22 04:37:38Z text",
                               "2026-11-22T04:37:38.1234567890Z text", "2026-13-22T04:37:38Z x",
                               " 2026-11-22T04:37:38Z x"}) {
    Result<TimestampedLine> r = ParseTimestampedLine(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("does not start with a Docker timestamp"),
              std::string::npos);
  }
}

TEST(ParseTimestampedLine, TheErrorQuotesOnlyTheStartOfTheLineWithControlBytesEscaped) {
  std::string line = "\x1b[2J" + std::string(100000, 'z');
  Result<TimestampedLine> r = ParseTimestampedLine(line);
  ASSERT_FALSE(r.ok());
  EXPECT_LT(r.status().message().size(), 200u);
  EXPECT_NE(r.status().message().find("\\x1b[2J"), std::string::npos) << r.status().message();
  EXPECT_EQ(r.status().message().find('\x1b'), std::string::npos);
  EXPECT_NE(r.status().message().find("..."), std::string::npos);
}

TEST(ParseTimestampedLine, AContinuationPieceOfALongLineHasNoStamp) {
  Collector c(60);
  c.splitter.Feed("2026-11-22T04:37:38.123456789Z " + std::string(50, 'x') + "\n");
  ASSERT_EQ(c.lines.size(), 2u);
  EXPECT_TRUE(ParseTimestampedLine(c.lines[0]).ok());
  ASSERT_EQ(c.lines[1].front(), '+');  // the collector's continuation mark
  EXPECT_FALSE(ParseTimestampedLine(c.lines[1].substr(1)).ok());
}

}  // namespace
}  // namespace barge::container
