// ProgressWatch (progress_watch.h): per-rank clocks of output and progress,
// checked on the job's timers.
#include "runner/controller/progress_watch.h"

#include <algorithm>
#include <memory>
#include <string>

#include "runner/console/time_format.h"
#include "runner/controller/job_state.h"

namespace barge::runner::internal {

ProgressWatch::ProgressWatch(JobContext* ctx, Attempt* attempt, Faults* faults)
    : JobPart(ctx), attempt_(*attempt), faults_(*faults) {
  // The job file's reader checked it compiles.
  if (ctx_.spec.progress && ctx_.spec.progress->pattern) {
    pattern_.emplace(*ctx_.spec.progress->pattern, std::regex::ECMAScript);
  }
}

void ProgressWatch::Start() {
  if (!ctx_.spec.progress) return;
  generation_ = attempt_.generation;
  declared_ = false;
  started_ = Now();
  ranks_.assign(attempt_.nodes.size(), RankClock{});
  const int gen = generation_;
  auto tick = std::make_shared<std::function<void()>>();
  *tick = [this, gen, weak = std::weak_ptr<std::function<void()>>(tick)] {
    if (gen != attempt_.generation || attempt_.tearing_down || declared_) return;
    Check();
    if (auto t = weak.lock(); t && !declared_) ctx_.timers.Add(Now() + ctx_.spec.progress->every, [t] { (*t)(); });
  };
  attempt_.monitors.push_back(tick);
  ctx_.timers.Add(Now() + ctx_.spec.progress->every, [tick] { (*tick)(); });
}

void ProgressWatch::Line(int rank, std::string_view text) {
  if (generation_ != attempt_.generation || rank < 0 || static_cast<size_t>(rank) >= ranks_.size()) return;
  RankClock& r = ranks_[rank];
  r.output = Now();
  r.printed = true;
  if (pattern_ && std::regex_search(text.begin(), text.end(), *pattern_)) {
    r.progress = r.output;
    r.progressed = true;
  }
}

void ProgressWatch::Check() {
  const ProgressSpec& p = *ctx_.spec.progress;
  Clock::time_point last_output = started_;
  Clock::time_point last_progress = started_;
  for (const RankClock& r : ranks_) {
    if (r.printed) last_output = std::max(last_output, r.output);
    if (r.progressed) last_progress = std::max(last_progress, r.progress);
  }
  const Clock::time_point now = Now();
  std::string why;
  if (p.silence && now - last_output >= *p.silence) {
    why = "no rank printed anything for " + FormatDuration(std::chrono::duration_cast<milliseconds>(now - last_output));
  } else if (pattern_ && p.within && now - last_progress >= *p.within) {
    why = "no rank printed a line matching /" + *p.pattern + "/ for " +
          FormatDuration(std::chrono::duration_cast<milliseconds>(now - last_progress));
  }
  if (why.empty()) return;
  declared_ = true;
  const std::string detail = "the job made no progress: " + why + " (progress:)\n" + RankLines();
  faults_.NoteFault(Fault{RestartCause::kHang, "", detail});
}

std::string ProgressWatch::RankLines() const {
  const Clock::time_point now = Now();
  auto ago = [now](Clock::time_point t) {
    return FormatDuration(std::chrono::duration_cast<milliseconds>(now - t)) + " ago";
  };
  std::string printing;
  std::string silent;
  for (size_t rank = 0; rank < ranks_.size() && rank < attempt_.nodes.size(); ++rank) {
    const RankClock& r = ranks_[rank];
    const NodeState& node = *attempt_.nodes[rank];
    std::string line = "  rank " + std::to_string(rank) + " (" + node.host->name + "): ";
    line += r.printed ? "last line " + ago(r.output) : "no line since the attempt began " + ago(started_);
    if (pattern_) line += r.progressed ? ", last progress " + ago(r.progress) : ", no progress line";
    line += "\n";
    // Still printing: a line within the last check period.
    const bool recent = r.printed && now - r.output < ctx_.spec.progress->every;
    (recent ? printing : silent) += line;
  }
  std::string out;
  if (!printing.empty()) out += "ranks still printing (where to look first):\n" + printing;
  if (!silent.empty()) out += "ranks silent:\n" + silent;
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace barge::runner::internal
