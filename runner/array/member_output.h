// A job array member's output, as the array's controller passes it on:
// the member's own controller writes container lines as "[RANK ROLE HOST]
// text" (runner/logs/log_sink.h) and its messages as "barge: ...". In the
// array's stream each line also names the member: "[3:0 head h1] text",
// "[3] barge: ...".
#pragma once

#include <string>
#include <string_view>

namespace barge::runner::array {

class MemberOutput {
 public:
  // `container_stream`: the member's stdout (its container lines).
  MemberOutput(int index, bool container_stream) : index_(index), container_stream_(container_stream) {}

  // Appends `bytes`; returns the complete lines among what has come so far,
  // each prefixed and ending in '\n' ("" when none is complete).
  std::string Add(std::string_view bytes);
  // What is left without a newline, as a last line ("" when nothing is).
  std::string Flush();

 private:
  std::string Prefixed(std::string_view line) const;
  int index_;
  bool container_stream_;
  std::string partial_;
};

}  // namespace barge::runner::array
