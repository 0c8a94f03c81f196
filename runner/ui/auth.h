// The dashboard's access checks. Loopback is open to every local user of a
// shared machine and to DNS-rebinding pages, and a browser sends a host's
// cookies to every port of that host (cookies are not kept apart by port:
// another user's listener on 127.0.0.1, at a port a tab of the browser
// still loads, would receive them). So:
//  - every request must name the listen address in its Host header (a
//    rebinding page's requests carry the attacker's host name);
//  - the dashboard is served under its root, a secret random path new at
//    each start ("/s/" and 32 hex digits), and nowhere else (401 outside
//    it). Its cookie's Path is the root: a browser sends the cookie, to
//    whatever port, only with requests for paths under the root, and only
//    this dashboard's pages and printed URL name it, so another port's
//    listener never gets it unless it already knows the root;
//  - the cookie (HttpOnly, SameSite=Strict) holds a session secret of this
//    start, never the token: a cookie carrying the token authenticates
//    nothing;
//  - the token logs in once, from the URL `barge ui` prints
//    (ROOT/?token=TOKEN): the first request with it gets the cookie and a
//    page that moves on to the same address without the token. Any later
//    request with it gets 401, unless it carries the cookie already (the
//    same browser, opening the printed URL again): that one is only moved
//    on to the address without the token.
// The stop action is a POST that must also carry a CSRF token handed out
// with the page it came from (NewCsrf), bound to that job.
//
// Thread-safety: every method may be called from any server thread.
#pragma once

#include <atomic>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "base/status.h"

namespace barge::runner::ui {

// What the dashboard's access rests on; each is a secret.
struct AuthSecrets {
  std::string token;    // logs in once: in the URL `barge ui` prints
  std::string root;     // "/s/" and hex digits: the path everything is served under
  std::string session;  // the cookie's value, handed out for the token
  // A random root and session, and `token` ("" for a random one too).
  // Fails when there is no randomness.
  [[nodiscard]] static Result<AuthSecrets> New(std::string token);
};

class Auth {
 public:
  // `listen_host` as the server binds it (127.0.0.1, ::1, localhost, or
  // another address), `port` the bound port.
  Auth(AuthSecrets secrets, std::string listen_host, int port);

  // 32 random bytes as 64 hex digits (getrandom, else /dev/urandom); ""
  // when neither gives randomness.
  static std::string NewToken();

  static constexpr std::string_view kCookieName = "barge_ui";

  const std::string& token() const { return secrets_.token; }
  const std::string& root() const { return secrets_.root; }
  // The Set-Cookie value that hands the session to the browser:
  // "barge_ui=SESSION; Path=ROOT; HttpOnly; SameSite=Strict".
  std::string SetCookieValue() const;

  // Whether `host_header` (the Host header as sent) names the listen
  // address: "HOST:PORT" with HOST the listen host (an IPv6 one in
  // brackets), or "localhost" when listening on loopback. Case-insensitive.
  bool HostAllowed(std::string_view host_header) const;
  // Whether `candidate` is the token (compared in constant time).
  bool TokenMatches(std::string_view candidate) const;
  // Whether a cookie named kCookieName in `cookie_header` holds the session
  // (any of them: a page of another port may set cookies of that name
  // too, and the order a browser sends them in is not the scope's).
  bool SessionIn(std::string_view cookie_header) const;
  // Whether `path` (no query) is the root or under it.
  bool UnderRoot(std::string_view path) const;

  enum class Verdict {
    kRefuse,     // answer `status` and `message`
    kServe,      // the cookie carries the session; no token in the URL
    kDropToken,  // the cookie carries the session: move on to the URL without the token
    kLogIn,      // the unused token, no session: RedeemToken, then hand out the cookie
  };
  struct Decision {
    Verdict verdict = Verdict::kRefuse;
    int status = 0;  // kRefuse only: 403 for the Host, 401 for the rest
    std::string message;
  };
  // The one decision on a request, from its Host header, its path (without
  // the query; as sent or decoded), its `token` query parameter (nullopt
  // when it has none) and its Cookie header. Both the front gate (gate.h,
  // on a request's head) and the server (on every request of a connection)
  // ask this; neither uses the token up by asking.
  Decision Decide(std::string_view host_header, std::string_view path,
                  const std::optional<std::string>& token_param,
                  std::string_view cookie_header) const;
  // Uses the token up: true for the first caller only, who hands out the
  // cookie; false for every later one.
  bool RedeemToken();

  // A new CSRF token for a page of job `job_id`. The newest kMaxCsrf stay
  // valid.
  std::string NewCsrf(const std::string& job_id);
  // Whether `csrf` was handed out for a page of `job_id` and is still valid.
  bool CsrfValid(const std::string& job_id, std::string_view csrf) const;

  static constexpr size_t kMaxCsrf = 4096;

 private:
  const AuthSecrets secrets_;
  const std::string listen_host_;
  const int port_;
  std::atomic<bool> token_used_{false};
  mutable std::mutex mu_;
  std::deque<std::pair<std::string, std::string>> csrf_;  // (token, job id), oldest first
};

// Whether `host` is a loopback address or "localhost".
bool IsLoopback(std::string_view host);

}  // namespace barge::runner::ui
