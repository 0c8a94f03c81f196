// ProgressWatch: whether a running attempt makes progress, as the job's
// `progress:` block says (runner/jobfile/job_spec.h's ProgressSpec), and a
// hang when it makes none:
//   silence    every rank silent for this long;
//   pattern    no rank's line matching it for `within`;
//   heartbeat  no rank's container modified its heartbeat file for
//              `within` (the file's time is asked on each host, one bounded
//              command per host per period, over the job's connections).
// The clocks start when the attempt's nodes all run (Start); the check runs
// every `every` on the job's timers, so a hang is declared within its
// bound plus one period.
//
// On a hang it says which ranks still print and which went silent (the
// ones still printing are the hint to where it hangs), and notes a fault of
// cause `hang` (Faults): the attempt ends; Faults::Restartable says whether
// the job restarts (`on_hang: restart` and `restart:` allowing it). A hang
// declared on progress lines (`within`) or heartbeats that TraceHang
// traces to one host names that host (the fault's and its event's host; a
// line of the detail that starts with kTracedTo): the host's failure
// record keeps it (host_records.h). Any other hang names no host: a
// `silence` hang never does (any line is no sign of progress: a rank that
// prints only as it starts, as ranks other than 0 often do, would look
// like a host that went quiet).
//
// Stragglers (`stragglers:`) are only reported: a rank whose last `steps`
// step times were each more than `factor` times the median rank's (its own
// median over the same steps; the lower middle one of an even count) is
// named in a line, a `straggler` event, and the job's status detail; when it
// keeps up again, a line and a `straggler_cleared` event. A step's time is
// the interval between two of the rank's lines matching `pattern`, or the
// seconds the first group of `stragglers.time` captures.
//
// Threading: the loop's thread only.
#pragma once

#include <deque>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "runner/controller/attempt.h"
#include "runner/controller/faults.h"
#include "runner/controller/job_context.h"

namespace barge::runner::internal {

// One line of DockerCommands::FileTimes' answer: the file's age on its
// host's clock (nullopt: no file, or the container could not be asked).
struct FileAge {
  std::string container;
  std::optional<std::chrono::seconds> age;
};
std::vector<FileAge> ParseFileTimes(std::string_view answer);

// The lower median of `values` (not empty).
double LowerMedian(std::vector<double> values);

// One rank's last sign of the kind a hang was declared on (a line matching
// the pattern for `within`, a heartbeat), with its host. A rank that gave
// none in the attempt has none (it tells nothing of its host: the job may
// show progress on some ranks only).
struct RankSign {
  std::string host;
  Clock::time_point last{};
};
// A hang traced to one host: its ranks went quiet `lead` before any rank of
// another host did.
struct HangTrace {
  std::string host;
  Clock::duration lead{};
};
// The host a hang is traced to, if any: the ranks are on two hosts or more,
// and every rank of that host went quiet (the last of them) at least
// `bound` (the hang's own bound: progress.within or .heartbeat.within)
// before the first rank of any other host did: the other
// hosts' ranks went on for a whole bound while every rank of that host gave
// no sign, before they stopped too (waiting for it). Ranks that stall
// together (a hang of the whole job, or one rank that blocks a collective
// all ranks wait in within a step) went quiet within one bound of each
// other: no host. At most one host can be traced.
std::optional<HangTrace> TraceHang(const std::vector<RankSign>& ranks, Clock::duration bound);
// The start of the detail's line that names the host a hang is traced to.
inline constexpr std::string_view kTracedTo = "traced to ";

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
    Clock::time_point output{};     // its last line
    Clock::time_point progress{};   // its last line matching the pattern
    Clock::time_point heartbeat{};  // its file's last modification
    bool printed = false;
    bool progressed = false;
    bool beat = false;
    std::deque<double> steps;  // its last step times, seconds (newest last)
    bool straggling = false;
  };
  // Declares a hang when the bounds are past (once per attempt); the
  // heartbeat's only with `heartbeats` (a round of answers just ended).
  void Check(bool heartbeats);
  // Which sign a hang was declared on.
  enum class Sign { kLine, kProgress, kHeartbeat };
  struct Hang {
    std::string why;  // "" when the attempt does not hang
    Sign sign = Sign::kLine;
    Clock::duration bound{};
  };
  Hang HangOf(Clock::time_point now, bool heartbeats) const;
  // The last sign of `sign` of each rank that gave one, with its host.
  std::vector<RankSign> Signs(Sign sign) const;
  // Asks every host of the attempt for its ranks' heartbeat files.
  void AskHeartbeats();
  void NoteStep(RankClock& r, std::string_view text, Clock::time_point now);
  // Reports ranks that start or stop straggling.
  void CheckStragglers();
  // "rank 1 (h2): silent for 2m10s" lines, by rank.
  std::string RankLines() const;
  std::string RankName(size_t rank) const;

  Attempt& attempt_;
  Faults& faults_;
  std::optional<std::regex> pattern_;
  std::optional<std::regex> step_time_;  // stragglers.time
  std::vector<RankClock> ranks_;
  Clock::time_point started_{};
  int generation_ = -1;  // the attempt the clocks are of
  bool declared_ = false;
  int asking_ = 0;  // heartbeat commands in flight
};

}  // namespace barge::runner::internal
