#include "runner/ui/auth.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include <sys/random.h>

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace barge::runner::ui {

namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

bool ConstantTimeEqual(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

}  // namespace

bool IsLoopback(std::string_view host) {
  const std::string h = Lower(host);
  return h == "localhost" || h == "::1" || h == "[::1]" || h.rfind("127.", 0) == 0;
}

Result<AuthSecrets> AuthSecrets::New(std::string token) {
  AuthSecrets s;
  s.token = token.empty() ? Auth::NewToken() : std::move(token);
  const std::string root = Auth::NewToken();
  s.session = Auth::NewToken();
  if (s.token.empty() || root.empty() || s.session.empty()) {
    return Status::Error(
        "cannot make the dashboard's secrets: neither getrandom nor /dev/urandom gives random bytes");
  }
  s.root = "/s/" + root.substr(0, 32);  // 128 bits: not guessed, and a shorter URL
  return s;
}

Auth::Auth(AuthSecrets secrets, std::string listen_host, int port)
    : secrets_(std::move(secrets)), listen_host_(std::move(listen_host)), port_(port) {}

std::string Auth::NewToken() {
  unsigned char bytes[32];
  size_t got = 0;
  while (got < sizeof bytes) {
    ssize_t n = getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;  // ENOSYS, EPERM (a seccomp filter): /dev/urandom below
    got += static_cast<size_t>(n);
  }
  if (got < sizeof bytes) {
    const int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    while (fd >= 0 && got < sizeof bytes) {
      ssize_t n = read(fd, bytes + got, sizeof bytes - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    if (fd >= 0) close(fd);
    if (got < sizeof bytes) return "";  // no randomness: the caller reports it
  }
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

std::string Auth::SetCookieValue() const {
  // Path without a trailing slash: it matches ROOT and ROOT/..., never
  // ROOTx. No Secure (and so no __Host- name): the dashboard is plain
  // http, and neither would keep the cookie from another port.
  return std::string(kCookieName) + "=" + secrets_.session + "; Path=" + secrets_.root +
         "; HttpOnly; SameSite=Strict";
}

bool Auth::HostAllowed(std::string_view host_header) const {
  const std::string got = Lower(host_header);
  const std::string port = ":" + std::to_string(port_);
  const std::string listen = Lower(listen_host_);
  const bool v6 = listen.find(':') != std::string::npos;
  if (got == (v6 ? "[" + listen + "]" : listen) + port) return true;
  return IsLoopback(listen) && got == "localhost" + port;
}

bool Auth::TokenMatches(std::string_view candidate) const {
  return ConstantTimeEqual(candidate, secrets_.token);
}

bool Auth::SessionIn(std::string_view header) const {
  bool found = false;
  size_t pos = 0;
  while (pos < header.size()) {
    size_t end = header.find(';', pos);
    if (end == std::string_view::npos) end = header.size();
    std::string_view part = header.substr(pos, end - pos);
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    const size_t eq = part.find('=');
    if (eq != std::string_view::npos && part.substr(0, eq) == kCookieName &&
        ConstantTimeEqual(part.substr(eq + 1), secrets_.session)) {
      found = true;
    }
    pos = end + 1;
  }
  return found;
}

bool Auth::UnderRoot(std::string_view path) const {
  const std::string& root = secrets_.root;
  return path.substr(0, root.size()) == root && (path.size() == root.size() || path[root.size()] == '/');
}

Auth::Decision Auth::Decide(std::string_view host_header, std::string_view path,
                            const std::optional<std::string>& token_param,
                            std::string_view cookie_header) const {
  if (!HostAllowed(host_header)) {
    const bool v6 = listen_host_.find(':') != std::string::npos;
    return {Verdict::kRefuse, 403,
            "the Host header must name this server's address (" +
                (v6 ? "[" + listen_host_ + "]" : listen_host_) + ":" + std::to_string(port_) + ")"};
  }
  // Outside the root, the same answers as under it: they tell no one
  // whether a path they guessed is the root.
  const Decision needs_token{Verdict::kRefuse, 401,
                             "this dashboard needs its token: open the URL `barge ui` printed (it "
                             "ends in ?token=...)"};
  const Decision wrong_token{Verdict::kRefuse, 401,
                             "wrong token or address: open the URL `barge ui` printed, whole"};
  if (!UnderRoot(path)) return token_param ? wrong_token : needs_token;
  if (SessionIn(cookie_header)) return {token_param ? Verdict::kDropToken : Verdict::kServe, 0, ""};
  if (!token_param) return needs_token;
  if (!TokenMatches(*token_param)) return wrong_token;
  if (token_used_) {
    return {Verdict::kRefuse, 401,
            "this URL has logged in already, and its token logs in once: open the dashboard in the "
            "browser that used it, or restart `barge ui` for a new URL"};
  }
  return {Verdict::kLogIn, 0, ""};
}

bool Auth::RedeemToken() {
  bool unused = false;
  return token_used_.compare_exchange_strong(unused, true);
}

std::string Auth::NewCsrf(const std::string& job_id) {
  std::string csrf = NewToken();
  if (csrf.empty()) return csrf;  // never stored: an empty one matches nothing
  std::lock_guard<std::mutex> lock(mu_);
  csrf_.emplace_back(csrf, job_id);
  while (csrf_.size() > kMaxCsrf) csrf_.pop_front();
  return csrf;
}

bool Auth::CsrfValid(const std::string& job_id, std::string_view csrf) const {
  if (csrf.empty()) return false;
  std::lock_guard<std::mutex> lock(mu_);
  bool valid = false;
  for (const auto& [token, job] : csrf_) {
    if (ConstantTimeEqual(csrf, token) && job == job_id) valid = true;
  }
  return valid;
}

}  // namespace barge::runner::ui
