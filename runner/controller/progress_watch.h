// ProgressWatch: whether a running attempt makes progress, as the job's
// `progress:` block says (runner/jobfile/job_spec.h's ProgressSpec), and a
// hang when it makes none: every rank silent for `silence`, or no rank's
// line matching `pattern` for `within`. The clocks start when the
// attempt's nodes all run (Start); the check runs every `every` on the
// job's timers, so a hang is declared within its bound plus one period.
//
// On a hang it says which ranks still print and which went silent (the
// ones still printing are the hint to where it hangs), and notes a fault of
// cause `hang` (Faults): the attempt ends; Faults::Restartable says whether
// the job restarts (`on_hang: restart` and `restart:` allowing it).
//
// Threading: the loop's thread only.
#pragma once

#include <optional>
#include <regex>
#include <string_view>
#include <vector>

#include "runner/controller/attempt.h"
#include "runner/controller/faults.h"
#include "runner/controller/job_context.h"

namespace barge::runner::internal {

class ProgressWatch : private JobPart {
 public:
  // A hang is a fault (`faults`, not owned).
  ProgressWatch(JobContext* ctx, Attempt* attempt, Faults* faults);

  // The attempt's nodes all run: the clocks start and the checks begin.
  // Nothing without `progress:`. A new attempt starts them again.
  void Start();
  // A line of rank `rank`'s output (NodeStreams), of the current attempt.
  void Line(int rank, std::string_view text);

 private:
  struct RankClock {
    Clock::time_point output{};    // its last line
    Clock::time_point progress{};  // its last line matching the pattern
    bool printed = false;
    bool progressed = false;
  };
  // Declares a hang when the bounds are past (once per attempt).
  void Check();
  // "rank 1 (h2): silent for 2m10s" lines, by rank.
  std::string RankLines() const;

  Attempt& attempt_;
  Faults& faults_;
  std::optional<std::regex> pattern_;
  std::vector<RankClock> ranks_;
  Clock::time_point started_{};
  int generation_ = -1;  // the attempt the clocks are of
  bool declared_ = false;
};

}  // namespace barge::runner::internal
