// Fuzz target for what the Engine API client reads from an engine (or a
// broken proxy in its place): HttpResponseParser over a response cut into
// chunks, and LogDemuxer over its body.
//
// Input: byte 0 seeds the chunk sizes, the rest is the response's bytes.
//
// Checks, besides "never crashes" and the sanitizers:
//   - the parser gives the same outcome (ok or the same error, the same
//     status, headers and body) however the bytes are cut: in one chunk, in
//     the input's chunking, byte by byte;
//   - an error stays: a later Feed returns it again;
//   - the body delivered is never more than the bytes fed, and the headers
//     kept are within the caps (kMaxHeaders lines);
//   - the demuxer's output is never more than its input, and gives the same
//     bytes per stream, in order (and error), in one chunk and byte by byte.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "container/docker_api.h"

namespace {

using barge::container::HttpResponseParser;
using barge::container::LogDemuxer;
using barge::container::LogStream;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "http_response_fuzz: %s\n", what);
  std::abort();
}

struct Parsed {
  bool ok = true;
  std::string error;
  int status = 0;
  size_t headers = 0;
  std::string body;
  bool complete = false;
};

Parsed Parse(std::string_view bytes, const std::vector<size_t>& cuts) {
  Parsed p;
  HttpResponseParser parser([&](std::string_view b) { p.body.append(b); });
  size_t at = 0;
  for (size_t i = 0; at < bytes.size(); ++i) {
    const size_t n = cuts.empty() ? bytes.size() : std::min(cuts[i % cuts.size()], bytes.size() - at);
    barge::Status s = parser.Feed(bytes.substr(at, n));
    at += n;
    if (!s.ok()) {
      p.ok = false;
      p.error = s.message();
      if (parser.Feed("HTTP/1.1 200 OK\r\n\r\n").ok()) Fail("an error did not stay");
      break;
    }
  }
  if (p.ok) {
    barge::Status s = parser.Finish();
    if (!s.ok()) {
      p.ok = false;
      p.error = s.message();
    }
  }
  p.status = parser.status_code();
  p.headers = parser.headers().size();
  p.complete = parser.complete();
  return p;
}

struct Demuxed {
  std::string out;
  bool ok = true;
  std::string error;
};

Demuxed Demux(std::string_view bytes, size_t step) {
  Demuxed d;
  // Each byte tagged with its stream: the same sequence however the
  // pieces were cut.
  LogDemuxer demux([&](LogStream s, std::string_view b) {
    for (char c : b) {
      d.out += s == LogStream::kStderr ? 'E' : 'O';
      d.out += c;
    }
  });
  for (size_t at = 0; at < bytes.size(); at += step) {
    barge::Status s = demux.Feed(bytes.substr(at, std::min(step, bytes.size() - at)));
    if (!s.ok()) {
      d.ok = false;
      d.error = s.message();
      break;
    }
  }
  return d;
}

bool Same(const Parsed& a, const Parsed& b) {
  return a.ok == b.ok && a.error == b.error && a.status == b.status && a.headers == b.headers &&
         a.body == b.body && a.complete == b.complete;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::vector<size_t> cuts;
  for (uint32_t x = data[0] * 2654435761u + 1, i = 0; i < 16; ++i, x = x * 1103515245u + 12345u) {
    cuts.push_back(1 + (x >> 16) % 97);
  }
  const Parsed whole = Parse(bytes, {});
  const Parsed chunked = Parse(bytes, cuts);
  const Parsed bytewise = Parse(bytes, {1});
  if (!Same(whole, chunked) || !Same(whole, bytewise)) Fail("the outcome depends on the chunking");
  if (whole.body.size() > bytes.size()) Fail("more body than bytes fed");
  if (whole.headers > HttpResponseParser::kMaxHeaders) Fail("more headers kept than the cap");

  const Demuxed one = Demux(bytes, bytes.size() ? bytes.size() : 1);
  const Demuxed each = Demux(bytes, 1);
  if (one.out.size() > 2 * bytes.size()) Fail("the demuxer gave more than it got");
  if (one.ok != each.ok || one.error != each.error) Fail("the demuxer's outcome depends on the chunking");
  if (one.out != each.out) Fail("the demuxer's output depends on the chunking");
  return 0;
}
