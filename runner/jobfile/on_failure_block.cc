// `on_failure:`: what a failed job leaves for a look before its teardown.
#include "runner/jobfile/blocks.h"

namespace barge::runner::jobfile {

constexpr KeyRule<OnFailureSpec> kOnFailureRules[] = {
    {"keep",
     {.type = KeyType::kDuration,
      .description = "A failed job keeps its containers, holds and leases this long (or until barge down) before its teardown"},
     [](const Entry& e, OnFailureSpec& f) {
       std::optional<std::chrono::milliseconds> d = ReadDuration(e, /*allow_zero=*/false);
       if (!d) return;
       // The hosts' watchdogs count it in whole seconds.
       if (*d < std::chrono::seconds(1) || *d > std::chrono::hours(24 * 7)) {
         e.Error("keep from 1s to 7d, not " + QuoteValue(e.value.Scalar()));
         return;
       }
       f.keep = *d;
     }},
};
std::vector<KeyInfo> OnFailureKeys() { return Describe(kOnFailureRules); }

void ReadOnFailure(const Entry& e, JobSpec& spec) {
  OnFailureSpec f;
  SeenKeys seen = ReadMapping(e, kOnFailureRules, f);
  if (!seen.contains("keep")) {
    e.KeyError("needs 'keep': how long a failed job keeps its containers for a look");
    return;
  }
  if (f.keep.count() > 0) spec.on_failure = f;
}

}  // namespace barge::runner::jobfile
