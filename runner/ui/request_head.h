// The head of one HTTP/1.x request (request line and header fields), as the
// dashboard's front gate (gate.h) reads it off a connection before any
// server thread sees the connection. Only what the gate decides on is
// parsed: the target's query and the header fields; the server parses the
// request again in full.
//
// Accepted: "METHOD SP TARGET SP HTTP/1.0|1.1" and "NAME: VALUE" lines, each
// ending in CRLF (or a bare LF), then an empty line. Refused (400): a
// method or field name that is not an RFC 9110 token, a target with spaces
// or control bytes, another version, a folded line (one starting with
// a space or tab), a field line with no colon.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace barge::runner::ui {

struct RequestHead {
  std::string method;
  std::string target;  // as sent: "/jobs/x?node=1"
  std::string version;  // "HTTP/1.1"
  std::vector<std::pair<std::string, std::string>> fields;  // values trimmed
  size_t length = 0;  // bytes of the head, the empty line included

  // The first field named `name` (case-insensitive); "" when none.
  std::string Field(std::string_view name) const;
  // The target up to its query or fragment, as sent (not %XX-decoded).
  std::string_view Path() const;
  // The first query parameter of the target named `name`, %XX- and
  // '+'-decoded as a form would encode it; nullopt when there is none.
  std::optional<std::string> QueryParam(std::string_view name) const;
};

struct HeadParse {
  enum class State { kIncomplete, kComplete, kBad };
  State state = State::kIncomplete;
  RequestHead head;  // kComplete only
  std::string why;   // kBad only: what is wrong, for the 400's message
};

// Parses the request head at the start of `bytes` (what the connection sent
// so far). kIncomplete: no empty line yet and nothing wrong in what came.
HeadParse ParseRequestHead(std::string_view bytes);

}  // namespace barge::runner::ui
