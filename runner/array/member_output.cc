// Prefixing a job array member's lines with its index.
#include "runner/array/member_output.h"

namespace barge::runner::array {

std::string MemberOutput::Prefixed(std::string_view line) const {
  const std::string index = std::to_string(index_);
  if (container_stream_ && line.size() > 1 && line[0] == '[' && line[1] >= '0' && line[1] <= '9') {
    return "[" + index + ":" + std::string(line.substr(1)) + "\n";
  }
  return "[" + index + "] " + std::string(line) + "\n";
}

std::string MemberOutput::Add(std::string_view bytes) {
  partial_.append(bytes);
  std::string out;
  size_t start = 0;
  for (size_t nl = partial_.find('\n'); nl != std::string::npos; nl = partial_.find('\n', start)) {
    out += Prefixed(std::string_view(partial_).substr(start, nl - start));
    start = nl + 1;
  }
  partial_.erase(0, start);
  return out;
}

std::string MemberOutput::Flush() {
  if (partial_.empty()) return "";
  std::string out = Prefixed(partial_);
  partial_.clear();
  return out;
}

}  // namespace barge::runner::array
