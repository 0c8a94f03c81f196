// HTML building blocks for the dashboard's server-rendered pages: escaping
// (every value barge did not write itself goes through it), URL query
// encoding, and the page shell with its one stylesheet and script (served
// by barge itself: no CDN, no inline script or style, so the strict
// Content-Security-Policy of server.h holds; it allows a <base> of the
// dashboard's own origin).
#pragma once

#include <string>
#include <string_view>

namespace barge::runner::ui {

// The most lines a job page keeps in its live log (older ones leave the
// page as new ones come): a live stream never sends more in one go.
inline constexpr size_t kLiveLogLines = 5000;

// &, <, >, " and ' as entities: safe in element text and in quoted
// attribute values, in HTML and in SVG.
std::string HtmlEscape(std::string_view text);

// Percent-encodes everything but unreserved characters (RFC 3986), for a
// query value or a path segment.
std::string UrlEncode(std::string_view text);

// A complete HTML document: <head> with `title` (escaped), <base
// href="BASE"> and the stylesheet and script, a header linking the jobs and
// hosts pages; `body` as given (already escaped by the caller). The
// dashboard is served under a secret root (auth.h), which no page states:
// every link of a page is relative ("jobs/ID", "static/ui.js"), resolved
// against `base`, the root as seen from the page: "./" for a page at
// ROOT/ or ROOT/NAME, "../" for one at ROOT/DIR/NAME.
std::string PageShell(const std::string& title, const std::string& body, const std::string& base);

// The stylesheet and script the pages use, served at /static/ui.css and
// /static/ui.js.
const std::string& StyleSheet();
const std::string& Script();

}  // namespace barge::runner::ui
