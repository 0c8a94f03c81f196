#include "ssh/quote.h"

#include <sys/stat.h>

#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/ssh_test_util.h"
#include "tests/test_seed.h"

namespace barge::ssh {
namespace {

using testing::Exists;
using testing::RunProgram;
using testing::TempDir;

// What `shell -c "printf %s QUOTED"` prints for `word`, run in `cwd`.
std::string EchoThroughShell(const std::string& shell, const std::string& word,
                             const std::string& cwd = "") {
  int code = -1;
  std::string out = RunProgram({shell, "-c", "printf %s " + ShellQuote(word)}, cwd, &code);
  EXPECT_EQ(code, 0) << "shell " << shell << " failed for " << ShellQuote(word);
  return out;
}

// Random bytes 1..255: anything but NUL, valid UTF-8 or not.
std::string RandomBytes(std::mt19937& rng, size_t max_size) {
  std::uniform_int_distribution<size_t> size(0, max_size);
  std::uniform_int_distribution<int> byte(1, 255);
  std::string s(size(rng), ' ');
  for (char& c : s) c = static_cast<char>(byte(rng));
  return s;
}

void AppendUtf8(std::string* out, char32_t cp) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// Random valid UTF-8 without NUL, rich in shell metacharacters.
std::string RandomUtf8(std::mt19937& rng, size_t max_bytes) {
  static const std::string kNasty = "'\"`$(){}[]<>|&;\\*?~#!%=\n\t\r ";
  std::uniform_int_distribution<size_t> size(0, max_bytes);
  std::uniform_int_distribution<int> kind(0, 9);
  size_t target = size(rng);
  std::string s;
  while (s.size() < target) {
    switch (kind(rng)) {
      case 0:
      case 1:
      case 2:
        s.push_back(kNasty[std::uniform_int_distribution<size_t>(0, kNasty.size() - 1)(rng)]);
        break;
      case 3:
      case 4:
        AppendUtf8(&s, std::uniform_int_distribution<char32_t>(1, 0x7F)(rng));
        break;
      case 5:
        AppendUtf8(&s, std::uniform_int_distribution<char32_t>(0x80, 0x7FF)(rng));
        break;
      case 6:
      case 7: {
        char32_t cp = std::uniform_int_distribution<char32_t>(0x800, 0xFFFF)(rng);
        if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0x20AC;  // no surrogates
        AppendUtf8(&s, cp);
        break;
      }
      default:
        AppendUtf8(&s, std::uniform_int_distribution<char32_t>(0x10000, 0x10FFFF)(rng));
    }
  }
  return s;
}

TEST(ShellQuote, LeavesSafeWordsAsTheyAre) {
  EXPECT_EQ(ShellQuote("abc"), "abc");
  EXPECT_EQ(ShellQuote("/usr/bin/docker"), "/usr/bin/docker");
  EXPECT_EQ(ShellQuote("--shm-size=1g"), "--shm-size=1g");
  EXPECT_EQ(ShellQuote("user@host:1,2%+"), "user@host:1,2%+");
}

TEST(ShellQuote, QuotesTheEmptyStringAsAnEmptyWord) { EXPECT_EQ(ShellQuote(""), "''"); }

TEST(ShellQuote, WrapsEverythingElseInSingleQuotes) {
  EXPECT_EQ(ShellQuote("a b"), "'a b'");
  EXPECT_EQ(ShellQuote("a\tb"), "'a\tb'");
  EXPECT_EQ(ShellQuote("$(rm -rf /)"), "'$(rm -rf /)'");
  EXPECT_EQ(ShellQuote("`id`"), "'`id`'");
  EXPECT_EQ(ShellQuote("a;b"), "'a;b'");
  EXPECT_EQ(ShellQuote("a && b"), "'a && b'");
  EXPECT_EQ(ShellQuote("line1\nline2"), "'line1\nline2'");
  EXPECT_EQ(ShellQuote("*.txt"), "'*.txt'");
  EXPECT_EQ(ShellQuote("~"), "'~'");
  EXPECT_EQ(ShellQuote("~root/x"), "'~root/x'");
  EXPECT_EQ(ShellQuote("\"double\""), "'\"double\"'");
  EXPECT_EQ(ShellQuote("back\\slash"), "'back\\slash'");
  EXPECT_EQ(ShellQuote("héllo wörld ✓"), "'héllo wörld ✓'");
}

TEST(ShellQuote, WritesASingleQuoteAsCloseEscapeReopen) {
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(ShellQuote("'"), "''\\'''");
  EXPECT_EQ(ShellQuote("''"), "''\\'''\\'''");
}

TEST(ShellJoin, JoinsQuotedWordsWithSingleSpaces) {
  EXPECT_EQ(ShellJoin({}), "");
  EXPECT_EQ(ShellJoin({"docker", "run", "-e", "A=b c", ""}), "docker run -e 'A=b c' ''");
  EXPECT_EQ(ShellJoin({"echo", "a=b"}), "echo a=b");
}

TEST(ShellJoin, QuotesACommandWordTheShellWouldReadAsSyntax) {
  EXPECT_EQ(ShellJoin({"A=b", "c"}), "'A=b' c");
  EXPECT_EQ(ShellJoin({"if", "x"}), "'if' x");
  EXPECT_EQ(ShellJoin({"x", "if"}), "x if");
}

TEST(ShellJoin, RunsTheFirstWordAsACommandEvenWhenItLooksLikeAnAssignment) {
  TempDir dir;
  int code = -1;
  // A program literally named "A=b" (a script in the temp dir).
  std::string script = dir.File("A=b");
  testing::WriteFile(script, "#!/bin/sh\nprintf ran\n");
  ASSERT_EQ(chmod(script.c_str(), 0755), 0);
  std::string out = RunProgram({"/bin/sh", "-c", "PATH=.:$PATH; " + ShellJoin({"A=b"})},
                               dir.path(), &code);
  EXPECT_EQ(code, 0);
  EXPECT_EQ(out, "ran");
}

TEST(ShellQuote, EveryTrickyWordArrivesByteExactThroughShAndBash) {
  const std::vector<std::string> words = {
      "",
      "plain",
      "two words",
      "it's",
      "'",
      "''''",
      "\"",
      "$HOME",
      "${HOME}",
      "$(touch MARKER)",
      "`touch MARKER`",
      "a;b",
      "a && b || c",
      "a | b",
      "line1\nline2\n",
      "\n",
      "tab\there",
      "*",
      "?",
      "[a-z]",
      "~",
      "~/x",
      "#comment",
      "!bang",
      "back\\slash\\",
      "\\'",
      "héllo wörld ✓ 日本語 🚀",
      "\x7f\x80\xff",
      "-n",
      "-e \\n",
      "%s %d",
  };
  for (const char* shell : {"/bin/sh", "/bin/bash"}) {
    for (const std::string& word : words) {
      EXPECT_EQ(EchoThroughShell(shell, word), word) << shell << ": " << ShellQuote(word);
    }
  }
}

TEST(ShellQuote, RandomBytesAndRandomUtf8ArriveByteExactThroughSh) {
  std::mt19937 rng(barge::testing::TestSeed(20240611));
  for (int i = 0; i < 300; ++i) {
    std::string word = i % 2 == 0 ? RandomBytes(rng, 4096) : RandomUtf8(rng, 4096);
    std::string got = EchoThroughShell("/bin/sh", word);
    ASSERT_EQ(got, word) << "case " << i << ", " << word.size() << " bytes";
  }
}

TEST(ShellQuote, APlantedCommandNeverRuns) {
  TempDir dir;
  const std::vector<std::string> payloads = {
      "$(touch MARKER)",
      "`touch MARKER`",
      "; touch MARKER",
      "&& touch MARKER",
      "| touch MARKER",
      "\ntouch MARKER\n",
      "'; touch MARKER; '",
      "'$(touch MARKER)'",
      "\"; touch MARKER; \"",
      "\\'; touch MARKER #",
      "x' && touch MARKER && echo '",
      "$(touch${IFS}MARKER)",
  };
  std::mt19937 rng(barge::testing::TestSeed(7));
  for (const std::string& payload : payloads) {
    for (int i = 0; i < 10; ++i) {
      // Alone, and buried in random text on either side.
      std::string word = i == 0 ? payload : RandomUtf8(rng, 64) + payload + RandomUtf8(rng, 64);
      int code = -1;
      std::string out = RunProgram(
          {"/bin/sh", "-c", ShellJoin({"printf", "%s", word})}, dir.path(), &code);
      EXPECT_EQ(code, 0);
      EXPECT_EQ(out, word);
      ASSERT_FALSE(Exists(dir.File("MARKER"))) << "payload ran: " << ShellQuote(word);
    }
  }
  // The check itself works: an unquoted payload does create the marker.
  int code = -1;
  RunProgram({"/bin/sh", "-c", "printf %s $(touch MARKER)"}, dir.path(), &code);
  EXPECT_TRUE(Exists(dir.File("MARKER")));
}

}  // namespace
}  // namespace barge::ssh
