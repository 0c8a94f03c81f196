// Fuzz target for what any client may send the dashboard's front gate
// (runner/ui/gate.h) before it is let in: ParseRequestHead over the bytes
// as they grow, the way the gate parses them after every read.
//
// Checks, besides "never crashes" and the sanitizers:
//   - a verdict stays: once a prefix is bad, every longer prefix is bad;
//     once a prefix is complete, every longer one is complete with the
//     same head (the same length, line and fields);
//   - a complete head's length is within the bytes given;
//   - Field and QueryParam never read past the head.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "runner/ui/request_head.h"

namespace {

using barge::runner::ui::HeadParse;
using barge::runner::ui::ParseRequestHead;

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "request_head_fuzz: %s\n", what);
    std::abort();
  }
}

bool SameHead(const HeadParse& a, const HeadParse& b) {
  return a.head.length == b.head.length && a.head.method == b.head.method &&
         a.head.target == b.head.target && a.head.version == b.head.version &&
         a.head.fields == b.head.fields;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const HeadParse whole = ParseRequestHead(bytes);
  if (whole.state == HeadParse::State::kComplete) {
    Check(whole.head.length <= size, "a head longer than its bytes");
    (void)whole.head.Field("Host");
    (void)whole.head.QueryParam("token");
  }
  if (whole.state == HeadParse::State::kBad) Check(!whole.why.empty(), "bad with no reason");
  // The verdict on prefixes, as a connection's bytes arrive.
  HeadParse::State seen = HeadParse::State::kIncomplete;
  HeadParse first_complete;
  const size_t step = size > 512 ? size / 64 : 1;
  for (size_t n = 0; n <= size; n += step) {
    const HeadParse p = ParseRequestHead(bytes.substr(0, n));
    if (seen == HeadParse::State::kBad) Check(p.state == HeadParse::State::kBad, "bad, then not");
    if (seen == HeadParse::State::kComplete) {
      Check(p.state == HeadParse::State::kComplete, "complete, then not");
      Check(SameHead(p, first_complete), "complete, then another head");
    }
    if (seen == HeadParse::State::kIncomplete && p.state == HeadParse::State::kComplete) {
      first_complete = p;
    }
    seen = p.state;
  }
  if (seen != HeadParse::State::kIncomplete) Check(whole.state == seen, "whole and prefix disagree");
  return 0;
}
