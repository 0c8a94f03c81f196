#include "runner/ui/auth.h"

#include <gtest/gtest.h>

namespace barge::runner::ui {
namespace {

const std::string kRoot = "/s/0123456789abcdef0123456789abcdef";

AuthSecrets Secrets() { return AuthSecrets{"tok-abc", kRoot, "sess-xyz"}; }

TEST(UiAuth, TokensAre64HexDigitsAndNeverRepeat) {
  const std::string a = Auth::NewToken(), b = Auth::NewToken();
  EXPECT_EQ(a.size(), 64u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(a, b);
}

TEST(UiAuth, TheHostHeaderMustNameTheListenAddressOrLocalhostOnLoopback) {
  Auth v4(Secrets(), "127.0.0.1", 8765);
  EXPECT_TRUE(v4.HostAllowed("127.0.0.1:8765"));
  EXPECT_TRUE(v4.HostAllowed("LOCALHOST:8765"));
  EXPECT_FALSE(v4.HostAllowed("127.0.0.1:8766"));
  EXPECT_FALSE(v4.HostAllowed("127.0.0.1"));
  EXPECT_FALSE(v4.HostAllowed("evil.example:8765"));  // a DNS-rebinding page
  EXPECT_FALSE(v4.HostAllowed(""));
  Auth v6(Secrets(), "::1", 9000);
  EXPECT_TRUE(v6.HostAllowed("[::1]:9000"));
  EXPECT_FALSE(v6.HostAllowed("::1:9000"));
  Auth lan(Secrets(), "10.0.0.5", 80);
  EXPECT_TRUE(lan.HostAllowed("10.0.0.5:80"));
  EXPECT_FALSE(lan.HostAllowed("localhost:80"));  // not loopback: only its own address
}

TEST(UiAuth, EachStartHasARandomRootOf32HexDigitsAndASessionThatIsNotTheToken) {
  Result<AuthSecrets> a = AuthSecrets::New(""), b = AuthSecrets::New("my-token");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->token.size(), 64u);
  EXPECT_EQ(b->token, "my-token");
  for (const AuthSecrets* s : {&*a, &*b}) {
    EXPECT_EQ(s->root.size(), 3u + 32u);
    EXPECT_EQ(s->root.substr(0, 3), "/s/");
    EXPECT_EQ(s->root.find_first_not_of("0123456789abcdef", 3), std::string::npos) << s->root;
    EXPECT_EQ(s->session.size(), 64u);
    EXPECT_NE(s->session, s->token);
  }
  EXPECT_NE(a->root, b->root);
  EXPECT_NE(a->session, b->session);
}

TEST(UiAuth, TheCookieHoldsTheSessionUnderTheRootOnlyHttpOnlyAndStrict) {
  Auth auth(Secrets(), "127.0.0.1", 8765);
  EXPECT_EQ(auth.SetCookieValue(), "barge_ui=sess-xyz; Path=" + kRoot + "; HttpOnly; SameSite=Strict");
  EXPECT_TRUE(auth.SessionIn("a=1; barge_ui=sess-xyz; b=2"));
  EXPECT_TRUE(auth.SessionIn("barge_ui=tossed; barge_ui=sess-xyz"));  // another port's cookie first
  EXPECT_FALSE(auth.SessionIn("barge_ui=tok-abc"));  // the token is not the session
  EXPECT_FALSE(auth.SessionIn("barge_ui_8765=sess-xyz"));
  EXPECT_FALSE(auth.SessionIn("barge_ui=sess-xy"));
  EXPECT_FALSE(auth.SessionIn("barge_ui=sess-xyzz"));
  EXPECT_FALSE(auth.SessionIn(""));
  EXPECT_TRUE(auth.TokenMatches("tok-abc"));
  EXPECT_FALSE(auth.TokenMatches("tok-ab"));
  EXPECT_FALSE(auth.TokenMatches("tok-abcd"));
  EXPECT_FALSE(auth.TokenMatches(""));
}

TEST(UiAuth, OnlyTheRootAndThePathsUnderItAreServed) {
  Auth auth(Secrets(), "127.0.0.1", 8765);
  EXPECT_TRUE(auth.UnderRoot(kRoot));
  EXPECT_TRUE(auth.UnderRoot(kRoot + "/"));
  EXPECT_TRUE(auth.UnderRoot(kRoot + "/jobs/x"));
  EXPECT_FALSE(auth.UnderRoot(kRoot + "x"));
  EXPECT_FALSE(auth.UnderRoot(kRoot.substr(0, kRoot.size() - 1)));
  EXPECT_FALSE(auth.UnderRoot("/"));
  EXPECT_FALSE(auth.UnderRoot("/s/"));
  EXPECT_FALSE(auth.UnderRoot("/x" + kRoot));
  EXPECT_FALSE(auth.UnderRoot(""));
}

TEST(UiAuth, TheTokenLogsInOnceUnderTheRootAndThenOnlyTheSessionCookieLetsIn) {
  using V = Auth::Verdict;
  Auth auth(Secrets(), "127.0.0.1", 8765);
  const std::string host = "127.0.0.1:8765", under = kRoot + "/jobs/x", cookie = "barge_ui=sess-xyz";
  const std::optional<std::string> token = "tok-abc", none;
  EXPECT_EQ(auth.Decide(host, under, token, "").verdict, V::kLogIn);
  EXPECT_EQ(auth.Decide(host, under, token, "").verdict, V::kLogIn);  // asking uses nothing up
  EXPECT_EQ(auth.Decide(host, under, std::string("tok-abd"), "").status, 401);
  EXPECT_EQ(auth.Decide(host, under, none, "").status, 401);
  EXPECT_EQ(auth.Decide(host, "/", token, "").status, 401);  // outside the root: nothing
  EXPECT_EQ(auth.Decide(host, "/", none, cookie).status, 401);
  EXPECT_EQ(auth.Decide(host, under, none, cookie).verdict, V::kServe);
  EXPECT_EQ(auth.Decide(host, under, token, cookie).verdict, V::kDropToken);
  EXPECT_EQ(auth.Decide("evil.example:8765", under, none, cookie).status, 403);
  EXPECT_EQ(auth.Decide("evil.example:8765", under, token, "").status, 403);
  // Outside the root, the answers under it: a guessed root is not told apart.
  EXPECT_EQ(auth.Decide(host, "/s/00000000000000000000000000000000/", none, "").message,
            auth.Decide(host, under, none, "").message);
  EXPECT_EQ(auth.Decide(host, "/s/00000000000000000000000000000000/", std::string("x"), "").message,
            auth.Decide(host, under, std::string("x"), "").message);

  EXPECT_TRUE(auth.RedeemToken());
  EXPECT_FALSE(auth.RedeemToken());
  const Auth::Decision used = auth.Decide(host, under, token, "");
  EXPECT_EQ(used.verdict, V::kRefuse);
  EXPECT_EQ(used.status, 401);
  EXPECT_NE(used.message.find("logs in once"), std::string::npos) << used.message;
  EXPECT_EQ(auth.Decide(host, under, token, cookie).verdict, V::kDropToken);  // the browser that used it
  EXPECT_EQ(auth.Decide(host, under, none, cookie).verdict, V::kServe);
}

TEST(UiAuth, ACsrfTokenIsValidOnlyForTheJobWhosePageGotIt) {
  Auth auth(Secrets(), "127.0.0.1", 1);
  const std::string csrf = auth.NewCsrf("job1");
  EXPECT_TRUE(auth.CsrfValid("job1", csrf));
  EXPECT_FALSE(auth.CsrfValid("job2", csrf));
  EXPECT_FALSE(auth.CsrfValid("job1", ""));
  EXPECT_FALSE(auth.CsrfValid("job1", "tok-abc"));  // the access token is not a CSRF token
  // Only the newest kMaxCsrf stay valid.
  for (size_t i = 0; i < Auth::kMaxCsrf; ++i) (void)auth.NewCsrf("other");
  EXPECT_FALSE(auth.CsrfValid("job1", csrf));
}

}  // namespace
}  // namespace barge::runner::ui
