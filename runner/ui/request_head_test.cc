#include "runner/ui/request_head.h"

#include <gtest/gtest.h>

namespace barge::runner::ui {
namespace {

using State = HeadParse::State;

TEST(RequestHead, ACompleteHeadGivesItsLineFieldsAndLengthAndLeavesTheBodyOut) {
  const std::string bytes =
      "POST /jobs/a/stop?x=1 HTTP/1.1\r\nHost: 127.0.0.1:80\r\ncookie:  a=b; c=d \r\n"
      "Content-Length: 3\r\n\r\nabc";
  HeadParse p = ParseRequestHead(bytes);
  ASSERT_EQ(p.state, State::kComplete) << p.why;
  EXPECT_EQ(p.head.method, "POST");
  EXPECT_EQ(p.head.target, "/jobs/a/stop?x=1");
  EXPECT_EQ(p.head.version, "HTTP/1.1");
  EXPECT_EQ(p.head.Field("HOST"), "127.0.0.1:80");
  EXPECT_EQ(p.head.Field("Cookie"), "a=b; c=d");
  EXPECT_EQ(p.head.Field("Missing"), "");
  EXPECT_EQ(p.head.length, bytes.size() - 3);
}

TEST(RequestHead, BareLineFeedsAreAccepted) {
  HeadParse p = ParseRequestHead("GET / HTTP/1.0\nHost: h\n\n");
  ASSERT_EQ(p.state, State::kComplete) << p.why;
  EXPECT_EQ(p.head.Field("host"), "h");
}

TEST(RequestHead, APartialHeadIsIncompleteAtEveryByte) {
  const std::string bytes = "GET /?token=abc HTTP/1.1\r\nHost: h\r\nCookie: x\r\n\r\n";
  for (size_t n = 0; n + 1 < bytes.size(); ++n) {
    EXPECT_EQ(ParseRequestHead(bytes.substr(0, n)).state, State::kIncomplete) << n;
  }
  EXPECT_EQ(ParseRequestHead(bytes).state, State::kComplete);
}

TEST(RequestHead, MalformedHeadsAreBadWithAReason) {
  for (const char* bytes : {"\x01\x02 nonsense\r\n\r\n", "GET /\r\n\r\n", "GET / HTTP/2\r\n\r\n",
                            "GE(T / HTTP/1.1\r\n\r\n", "GET /a b HTTP/1.1\r\n\r\n",
                            "GET / HTTP/1.1\r\n folded: x\r\n\r\n", "GET / HTTP/1.1\r\nnocolon\r\n\r\n",
                            "GET / HTTP/1.1\r\nBad Name: x\r\n\r\n",
                            "GET / HTTP/1.1\r\nX: a\x01b\r\n\r\n", "\r\nGET / HTTP/1.1\r\n\r\n"}) {
    HeadParse p = ParseRequestHead(bytes);
    EXPECT_EQ(p.state, State::kBad) << bytes;
    EXPECT_FALSE(p.why.empty()) << bytes;
  }
  // Bad from its first byte, before any line ends.
  EXPECT_EQ(ParseRequestHead("\x16\x03\x01").state, State::kBad);
}

TEST(RequestHead, QueryParamsAreFormDecodedAndTheFirstOfANameWins) {
  HeadParse p = ParseRequestHead(
      "GET /p?a=1&token=%74ok+1&token=second&empty=&flag HTTP/1.1\r\n\r\n");
  ASSERT_EQ(p.state, State::kComplete) << p.why;
  EXPECT_EQ(p.head.QueryParam("token"), "tok 1");
  EXPECT_EQ(p.head.QueryParam("a"), "1");
  EXPECT_EQ(p.head.QueryParam("empty"), "");
  EXPECT_EQ(p.head.QueryParam("flag"), "");
  EXPECT_EQ(p.head.QueryParam("none"), std::nullopt);
  HeadParse bad_escape = ParseRequestHead("GET /?token=%zz%4 HTTP/1.1\r\n\r\n");
  ASSERT_EQ(bad_escape.state, State::kComplete);
  EXPECT_EQ(bad_escape.head.QueryParam("token"), "%zz%4");
  EXPECT_EQ(ParseRequestHead("GET /x HTTP/1.1\r\n\r\n").head.QueryParam("token"), std::nullopt);
}

TEST(RequestHead, ThePathIsTheTargetUpToItsQueryAsSent) {
  EXPECT_EQ(ParseRequestHead("GET /s/a%62/x?token=1 HTTP/1.1\r\n\r\n").head.Path(), "/s/a%62/x");
  EXPECT_EQ(ParseRequestHead("GET /s/ab#frag HTTP/1.1\r\n\r\n").head.Path(), "/s/ab");
  EXPECT_EQ(ParseRequestHead("GET /s/ab/ HTTP/1.1\r\n\r\n").head.Path(), "/s/ab/");
}

}  // namespace
}  // namespace barge::runner::ui
