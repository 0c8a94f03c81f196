#include "runner/ui/html.h"

namespace barge::runner::ui {

std::string HtmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string UrlEncode(std::string_view text) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string PageShell(const std::string& title, const std::string& body, const std::string& base) {
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><base href=\"" +
         HtmlEscape(base) +
         "\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
         "<title>" +
         HtmlEscape(title) +
         "</title><link rel=\"stylesheet\" href=\"static/ui.css\">"
         "<script src=\"static/ui.js\" defer></script></head>\n<body>\n"
         "<header><a href=\"./\" class=\"brand\">barge</a><nav><a href=\"./\" id=\"nav-jobs\">jobs</a>"
         "<a href=\"hosts\" id=\"nav-hosts\">hosts</a></nav></header>\n<main>\n" +
         body + "</main>\n</body></html>\n";
}

const std::string& StyleSheet() {
  static const std::string kCss = R"css(
body { font-family: system-ui, sans-serif; margin: 0; color: #212121; background: #fafafa; }
header { background: #263238; padding: 8px 16px; }
header a.brand { color: #fff; font-weight: bold; text-decoration: none; font-size: 18px; }
header nav { display: inline; margin-left: 24px; }
header nav a { color: #cfd8dc; text-decoration: none; margin-right: 16px; font-size: 14px; }
main { padding: 12px 16px; }
h1 { font-size: 20px; margin: 8px 0; }
h2 { font-size: 16px; margin: 18px 0 6px; }
table { border-collapse: collapse; background: #fff; }
th, td { border-bottom: 1px solid #e0e0e0; padding: 4px 10px; text-align: left; font-size: 13px; }
th { background: #eceff1; }
td.num { text-align: right; }
.status { font-weight: bold; }
.status-running, .status-starting, .status-preflight, .status-pushing, .status-completing { color: #1565c0; }
.status-succeeded { color: #2e7d32; }
.status-failed, .status-lost, .status-timed_out { color: #c62828; }
.status-cancelled { color: #6d4c41; }
form.filter { margin: 8px 0; }
form.stop button { background: #c62828; color: #fff; border: 0; padding: 6px 14px; border-radius: 3px; cursor: pointer; }
.notice { background: #fff8e1; border: 1px solid #ffe082; padding: 6px 10px; margin: 8px 0; }
pre.log { background: #1e1e1e; color: #e0e0e0; padding: 8px; font-size: 12px; max-height: 480px; overflow: auto; white-space: pre-wrap; }
pre.log .stderr { color: #ff8a80; }
pre.log .prefix { color: #80cbc4; }
.pager a { margin-right: 12px; }
svg.timeline { background: #fff; border: 1px solid #e0e0e0; max-width: 100%; height: auto; }
.muted { color: #757575; font-size: 12px; }
.status-waiting { color: #ef6c00; }
section.host { margin: 8px 0 14px; }
h3 { font-size: 14px; margin: 10px 0 4px; }
h4 { font-size: 13px; margin: 8px 0 4px; font-weight: normal; color: #455a64; }
.notice.error { background: #ffebee; border-color: #ef9a9a; }
)css";
  return kCss;
}

const std::string& Script() {
  // Live logs: an EventSource on the stream the page names (a relative
  // URL, resolved against the page's <base>); each "line"
  // event is JSON {rank, role, host, stderr, text}, shown as text (never as
  // HTML). "end" says the job is over: the page reloads to show it. A
  // stream that ends (its lifetime) is resumed by the browser from its
  // Last-Event-ID; one refused (503) is opened again after 5 s.
  static const std::string kJs = R"js(
'use strict';
document.addEventListener('DOMContentLoaded', function () {
  var log = document.getElementById('live-log');
  if (!log) return;
  var state = document.getElementById('live-state');
  var select = document.getElementById('log-node');
  var source = null;
  var kMaxLines = )js" + std::to_string(kLiveLogLines) + R"js(;
  function say(text) { if (state) state.textContent = text; }
  function open() {
    if (source) source.close();
    log.textContent = '';
    var url = log.getAttribute('data-stream');
    if (select && select.value !== '') url += '?node=' + encodeURIComponent(select.value);
    source = new EventSource(url);
    say('following the job\u2019s output\u2026');
    source.addEventListener('line', function (e) {
      var l = JSON.parse(e.data);
      var div = document.createElement('div');
      if (l.stderr) div.className = 'stderr';
      var prefix = document.createElement('span');
      prefix.className = 'prefix';
      prefix.textContent = '[' + l.rank + ' ' + l.role + ' ' + l.host + (l.stderr ? ' stderr' : '') + '] ';
      div.appendChild(prefix);
      div.appendChild(document.createTextNode(l.text));
      var atBottom = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
      log.appendChild(div);
      while (log.childNodes.length > kMaxLines) log.removeChild(log.firstChild);
      if (atBottom) log.scrollTop = log.scrollHeight;
    });
    source.addEventListener('end', function () {
      source.close();
      say('the job has ended; reloading\u2026');
      setTimeout(function () { location.reload(); }, 1000);
    });
    source.addEventListener('error', function () {
      if (source.readyState === EventSource.CLOSED) {
        // Refused (503: too many streams open) or the server is gone: the
        // browser does not retry that by itself.
        say('the live stream was refused (too many open?); retrying in 5 s\u2026');
        setTimeout(open, 5000);
      } else {
        say('the stream was interrupted; retrying\u2026');
      }
    });
  }
  if (select) select.addEventListener('change', open);
  open();
});
)js";
  return kJs;
}

}  // namespace barge::runner::ui
