// The dashboard's access checks. Loopback is open to every local user of a
// shared machine and to DNS-rebinding pages, so every request must:
//  - name the listen address in its Host header (a rebinding page's
//    requests carry the attacker's host name), and
//  - carry the token: `?token=` once (the server answers with an HttpOnly,
//    SameSite=Strict cookie and a redirect that drops it from the URL), the
//    cookie after that.
// The stop action is a POST that must also carry a CSRF token handed out
// with the page it came from (NewCsrf), bound to that job.
//
// Thread-safety: every method may be called from any server thread.
#pragma once

#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace barge::runner::ui {

class Auth {
 public:
  // `listen_host` as the server binds it (127.0.0.1, ::1, localhost, or
  // another address), `port` the bound port.
  Auth(std::string token, std::string listen_host, int port);

  // 32 random bytes as 64 hex digits (getrandom, else /dev/urandom); ""
  // when neither gives randomness.
  static std::string NewToken();

  const std::string& token() const { return token_; }
  // "barge_ui_PORT": cookies are not kept apart by port, names are.
  std::string CookieName() const;
  // The Set-Cookie value that hands the token to the browser.
  std::string SetCookieValue() const;

  // Whether `host_header` (the Host header as sent) names the listen
  // address: "HOST:PORT" with HOST the listen host (an IPv6 one in
  // brackets), or "localhost" when listening on loopback. Case-insensitive.
  bool HostAllowed(std::string_view host_header) const;
  // Whether `candidate` is the token (compared in constant time).
  bool TokenMatches(std::string_view candidate) const;
  // The value of this server's cookie in a Cookie header, if any.
  std::optional<std::string> CookieIn(std::string_view cookie_header) const;

  // Why a request may not go on, as the status and the message to answer.
  struct Refusal {
    int status;
    std::string message;
  };
  // The one decision on a request, from its Host header, its `token` query
  // parameter (nullopt when it has none) and its Cookie header: nullopt when
  // it may go on (the Host names this server and the token or the cookie
  // carries the token); else 403 for the Host, 401 for the token. Both the
  // front gate (gate.h, on a request's head) and the server (on every
  // request of a connection) ask this.
  std::optional<Refusal> Refuse(std::string_view host_header,
                                const std::optional<std::string>& token_param,
                                std::string_view cookie_header) const;

  // A new CSRF token for a page of job `job_id`. The newest kMaxCsrf stay
  // valid.
  std::string NewCsrf(const std::string& job_id);
  // Whether `csrf` was handed out for a page of `job_id` and is still valid.
  bool CsrfValid(const std::string& job_id, std::string_view csrf) const;

  static constexpr size_t kMaxCsrf = 4096;

 private:
  const std::string token_;
  const std::string listen_host_;
  const int port_;
  mutable std::mutex mu_;
  std::deque<std::pair<std::string, std::string>> csrf_;  // (token, job id), oldest first
};

// Whether `host` is a loopback address or "localhost".
bool IsLoopback(std::string_view host);

}  // namespace barge::runner::ui
