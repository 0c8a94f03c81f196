#include "runner/ui/auth.h"

#include <gtest/gtest.h>

namespace barge::runner::ui {
namespace {

TEST(UiAuth, TokensAre64HexDigitsAndNeverRepeat) {
  const std::string a = Auth::NewToken(), b = Auth::NewToken();
  EXPECT_EQ(a.size(), 64u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(a, b);
}

TEST(UiAuth, TheHostHeaderMustNameTheListenAddressOrLocalhostOnLoopback) {
  Auth v4("t", "127.0.0.1", 8765);
  EXPECT_TRUE(v4.HostAllowed("127.0.0.1:8765"));
  EXPECT_TRUE(v4.HostAllowed("LOCALHOST:8765"));
  EXPECT_FALSE(v4.HostAllowed("127.0.0.1:8766"));
  EXPECT_FALSE(v4.HostAllowed("127.0.0.1"));
  EXPECT_FALSE(v4.HostAllowed("evil.example:8765"));  // a DNS-rebinding page
  EXPECT_FALSE(v4.HostAllowed(""));
  Auth v6("t", "::1", 9000);
  EXPECT_TRUE(v6.HostAllowed("[::1]:9000"));
  EXPECT_FALSE(v6.HostAllowed("::1:9000"));
  Auth lan("t", "10.0.0.5", 80);
  EXPECT_TRUE(lan.HostAllowed("10.0.0.5:80"));
  EXPECT_FALSE(lan.HostAllowed("localhost:80"));  // not loopback: only its own address
}

TEST(UiAuth, TheCookieIsHttpOnlyStrictAndNamedAfterThePort) {
  Auth auth("s3cret", "127.0.0.1", 8765);
  EXPECT_EQ(auth.SetCookieValue(), "barge_ui_8765=s3cret; Path=/; HttpOnly; SameSite=Strict");
  EXPECT_EQ(auth.CookieIn("a=1; barge_ui_8765=s3cret; b=2"), "s3cret");
  EXPECT_EQ(auth.CookieIn("barge_ui_8766=s3cret"), std::nullopt);
  EXPECT_EQ(auth.CookieIn(""), std::nullopt);
  EXPECT_TRUE(auth.TokenMatches("s3cret"));
  EXPECT_FALSE(auth.TokenMatches("s3cre"));
  EXPECT_FALSE(auth.TokenMatches("s3cretx"));
  EXPECT_FALSE(auth.TokenMatches(""));
}

TEST(UiAuth, ACsrfTokenIsValidOnlyForTheJobWhosePageGotIt) {
  Auth auth("t", "127.0.0.1", 1);
  const std::string csrf = auth.NewCsrf("job1");
  EXPECT_TRUE(auth.CsrfValid("job1", csrf));
  EXPECT_FALSE(auth.CsrfValid("job2", csrf));
  EXPECT_FALSE(auth.CsrfValid("job1", ""));
  EXPECT_FALSE(auth.CsrfValid("job1", "t"));  // the access token is not a CSRF token
  // Only the newest kMaxCsrf stay valid.
  for (size_t i = 0; i < Auth::kMaxCsrf; ++i) (void)auth.NewCsrf("other");
  EXPECT_FALSE(auth.CsrfValid("job1", csrf));
}

}  // namespace
}  // namespace barge::runner::ui
