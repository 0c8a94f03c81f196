#include "runner/ui/request_head.h"

#include <algorithm>

namespace barge::runner::ui {

namespace {

bool IsTchar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool IsToken(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), IsTchar);
}

char Lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

bool EqualsNoCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (Lower(a[i]) != Lower(b[i])) return false;
  }
  return true;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = Lower(c);
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

std::string FormDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() && HexValue(s[i + 1]) >= 0 && HexValue(s[i + 2]) >= 0) {
      out += static_cast<char>(HexValue(s[i + 1]) * 16 + HexValue(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

HeadParse Bad(std::string why) {
  HeadParse p;
  p.state = HeadParse::State::kBad;
  p.why = std::move(why);
  return p;
}

bool ParseRequestLine(std::string_view line, RequestHead* head, std::string* why) {
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    *why = "the request line is not METHOD TARGET VERSION";
    return false;
  }
  std::string_view method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string_view version = line.substr(sp2 + 1);
  if (!IsToken(method)) {
    *why = "the method is not a token";
    return false;
  }
  if (target.empty() ||
      std::any_of(target.begin(), target.end(), [](char c) {
        return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f;
      })) {
    *why = "the target is empty or has control bytes";
    return false;
  }
  if (version != "HTTP/1.1" && version != "HTTP/1.0") {
    *why = "the version is not HTTP/1.0 or HTTP/1.1";
    return false;
  }
  head->method = method;
  head->target = target;
  head->version = version;
  return true;
}

}  // namespace

std::string RequestHead::Field(std::string_view name) const {
  for (const auto& [n, v] : fields) {
    if (EqualsNoCase(n, name)) return v;
  }
  return "";
}

std::string_view RequestHead::Path() const {
  return std::string_view(target).substr(0, target.find_first_of("?#"));
}

std::optional<std::string> RequestHead::QueryParam(std::string_view name) const {
  const size_t q = target.find('?');
  if (q == std::string::npos) return std::nullopt;
  std::string_view query = std::string_view(target).substr(q + 1);
  const size_t hash = query.find('#');
  if (hash != std::string_view::npos) query = query.substr(0, hash);
  size_t pos = 0;
  while (pos <= query.size()) {
    size_t end = query.find('&', pos);
    if (end == std::string_view::npos) end = query.size();
    std::string_view part = query.substr(pos, end - pos);
    const size_t eq = part.find('=');
    const std::string key = FormDecode(part.substr(0, eq));
    if (!part.empty() && key == name) {
      return eq == std::string_view::npos ? std::string() : FormDecode(part.substr(eq + 1));
    }
    pos = end + 1;
  }
  return std::nullopt;
}

HeadParse ParseRequestHead(std::string_view bytes) {
  HeadParse parse;
  RequestHead& head = parse.head;
  size_t pos = 0;
  bool first = true;
  while (true) {
    const size_t nl = bytes.find('\n', pos);
    if (nl == std::string_view::npos) {
      // Judge what came of the unfinished line only where it can already
      // be told: a request line that starts with a non-token byte.
      if (first && pos < bytes.size() && !IsTchar(bytes[pos])) {
        return Bad("the request line does not start with a method");
      }
      return parse;  // kIncomplete
    }
    std::string_view line = bytes.substr(pos, nl - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    pos = nl + 1;
    if (first) {
      std::string why;
      if (!ParseRequestLine(line, &head, &why)) return Bad(why);
      first = false;
      continue;
    }
    if (line.empty()) break;
    if (line.front() == ' ' || line.front() == '\t') return Bad("a folded header line");
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) return Bad("a header line with no colon");
    std::string_view name = line.substr(0, colon);
    if (!IsToken(name)) return Bad("a header name that is not a token");
    std::string_view value = Trim(line.substr(colon + 1));
    if (std::any_of(value.begin(), value.end(), [](char c) {
          return (static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f;
        })) {
      return Bad("a header value with control bytes");
    }
    head.fields.emplace_back(std::string(name), std::string(value));
  }
  head.length = pos;
  parse.state = HeadParse::State::kComplete;
  return parse;
}

}  // namespace barge::runner::ui
