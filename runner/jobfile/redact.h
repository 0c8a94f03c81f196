// Keeps secret values out of what barge itself prints or records: its
// messages, errors, the job store's details and the job file it records.
// Containers' own output is never altered.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "runner/jobfile/job_spec.h"

namespace barge::runner {

inline constexpr std::string_view kRedacted = "[redacted]";

// Replaces every occurrence of a registered value with "[redacted]".
// Immutable once built; safe to share between threads for reading.
class Redactor {
 public:
  // Values shorter than this are not masked: masking "ab" would garble
  // every message, and hides nothing worth hiding.
  static constexpr size_t kMinLength = 4;

  Redactor() = default;
  // Every secret value of `spec` and its registry password.
  explicit Redactor(const JobSpec& spec);

  // Registers `value`, as it is, without its trailing line breaks, and each
  // of its lines (a message may quote one line of a multi-line file).
  void Add(std::string_view value);

  // `text` with every registered value replaced, longest values first.
  std::string operator()(std::string_view text) const;

  bool empty() const { return values_.empty(); }

 private:
  std::vector<std::string> values_;  // longest first, no duplicates
};

}  // namespace barge::runner
