// ProgressWatch (progress_watch.h): per-rank clocks of output, progress and
// heartbeats, and step times, checked on the job's timers.
#include "runner/controller/progress_watch.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <memory>
#include <string>

#include "runner/console/time_format.h"
#include "runner/controller/job_state.h"
#include "runner/store/job_store.h"

namespace barge::runner::internal {

namespace {

std::string Ago(Clock::time_point now, Clock::time_point t) {
  return FormatDuration(std::chrono::duration_cast<milliseconds>(now - t)) + " ago";
}

std::string Seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f s", s);
  return buf;
}

}  // namespace

std::vector<FileAge> ParseFileTimes(std::string_view answer) {
  std::vector<FileAge> out;
  while (!answer.empty()) {
    const size_t eol = std::min(answer.find('\n'), answer.size());
    std::string_view line = answer.substr(0, eol);
    answer.remove_prefix(std::min(eol + 1, answer.size()));
    const size_t a = line.find(' ');
    const size_t b = a == std::string_view::npos ? a : line.find(' ', a + 1);
    if (b == std::string_view::npos) continue;
    FileAge age{std::string(line.substr(0, a)), std::nullopt};
    long long now = 0;
    long long mtime = 0;
    const std::string_view now_text = line.substr(a + 1, b - a - 1);
    const std::string_view mtime_text = line.substr(b + 1);
    if (std::from_chars(now_text.data(), now_text.data() + now_text.size(), now).ec == std::errc() &&
        std::from_chars(mtime_text.data(), mtime_text.data() + mtime_text.size(), mtime).ec == std::errc()) {
      age.age = std::chrono::seconds(std::max(0LL, now - mtime));
    }
    out.push_back(std::move(age));
  }
  return out;
}

double LowerMedian(std::vector<double> values) {
  const size_t mid = (values.size() - 1) / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid), values.end());
  return values[mid];
}

ProgressWatch::ProgressWatch(JobContext* ctx, Attempt* attempt, Faults* faults)
    : JobPart(ctx), attempt_(*attempt), faults_(*faults) {
  // The job file's reader checked they compile.
  if (!ctx_.spec.progress) return;
  if (ctx_.spec.progress->pattern) pattern_.emplace(*ctx_.spec.progress->pattern, std::regex::ECMAScript);
  if (ctx_.spec.progress->stragglers && ctx_.spec.progress->stragglers->time) {
    step_time_.emplace(*ctx_.spec.progress->stragglers->time, std::regex::ECMAScript);
  }
}

void ProgressWatch::Start() {
  if (!ctx_.spec.progress) return;
  generation_ = attempt_.generation;
  declared_ = false;
  asking_ = 0;
  started_ = Now();
  ranks_.assign(attempt_.nodes.size(), RankClock{});
  const int gen = generation_;
  auto tick = std::make_shared<std::function<void()>>();
  *tick = [this, gen, weak = std::weak_ptr<std::function<void()>>(tick)] {
    if (gen != attempt_.generation || attempt_.tearing_down || declared_) return;
    Check(/*heartbeats=*/false);
    if (!declared_) CheckStragglers();
    if (!declared_) AskHeartbeats();
    if (auto t = weak.lock(); t && !declared_) ctx_.timers.Add(Now() + ctx_.spec.progress->every, [t] { (*t)(); });
  };
  attempt_.monitors.push_back(tick);
  ctx_.timers.Add(Now() + ctx_.spec.progress->every, [tick] { (*tick)(); });
}

void ProgressWatch::Line(int rank, std::string_view text) {
  if (generation_ != attempt_.generation || rank < 0 || static_cast<size_t>(rank) >= ranks_.size()) return;
  RankClock& r = ranks_[rank];
  const Clock::time_point now = Now();
  r.output = now;
  r.printed = true;
  NoteStep(r, text, now);
  if (pattern_ && std::regex_search(text.begin(), text.end(), *pattern_)) {
    r.progress = now;
    r.progressed = true;
  }
}

void ProgressWatch::NoteStep(RankClock& r, std::string_view text, Clock::time_point now) {
  if (!ctx_.spec.progress->stragglers) return;
  const StragglerSpec& s = *ctx_.spec.progress->stragglers;
  std::optional<double> step;
  if (step_time_) {
    std::match_results<std::string_view::const_iterator> m;
    if (!std::regex_search(text.begin(), text.end(), m, *step_time_) || m.size() < 2) return;
    double value = 0;
    const std::string_view group(&*m[1].first, static_cast<size_t>(m[1].length()));
    if (m[1].length() == 0 || std::from_chars(group.data(), group.data() + group.size(), value).ec != std::errc()) return;
    step = value;
  } else if (pattern_ && std::regex_search(text.begin(), text.end(), *pattern_)) {
    // The first match starts the clock; each later one ends a step.
    if (r.progressed) step = std::chrono::duration<double>(now - r.progress).count();
  }
  if (!step || *step < 0) return;
  r.steps.push_back(*step);
  while (r.steps.size() > static_cast<size_t>(s.steps)) r.steps.pop_front();
}

std::optional<HangTrace> TraceHang(const std::vector<RankSign>& ranks, Clock::duration bound) {
  // Per host: when its last rank went quiet, and when its first one did.
  std::map<std::string, std::pair<Clock::time_point, Clock::time_point>> hosts;
  for (const RankSign& r : ranks) {
    auto it = hosts.try_emplace(r.host, r.last, r.last).first;
    it->second.first = std::max(it->second.first, r.last);
    it->second.second = std::min(it->second.second, r.last);
  }
  if (hosts.size() < 2) return std::nullopt;
  for (const auto& [host, quiet] : hosts) {
    Clock::duration lead = Clock::duration::max();
    for (const auto& [other, went] : hosts) {
      if (other != host) lead = std::min(lead, went.second - quiet.first);
    }
    if (lead >= bound) return HangTrace{host, lead};
  }
  return std::nullopt;
}

void ProgressWatch::Check(bool heartbeats) {
  const Hang hang = HangOf(Now(), heartbeats);
  if (hang.why.empty()) return;
  declared_ = true;
  std::string detail = "the job made no progress: " + hang.why + " (progress:)\n";
  // Any line is no sign of progress: a rank that prints only as it starts
  // (ranks other than 0 often do) would look like a host that went quiet.
  const std::optional<HangTrace> trace =
      hang.sign == Sign::kLine ? std::nullopt : TraceHang(Signs(hang.sign), hang.bound);
  if (trace) {
    auto span = [](Clock::duration d) { return FormatDuration(std::chrono::duration_cast<milliseconds>(d)); };
    detail += std::string(kTracedTo) + trace->host + ": its ranks went quiet " + span(trace->lead) +
              " before any rank of another host did (the bound: " + span(hang.bound) + ")\n";
  }
  faults_.NoteFault(Fault{RestartCause::kHang, trace ? trace->host : "", detail + RankLines()});
}

ProgressWatch::Hang ProgressWatch::HangOf(Clock::time_point now, bool heartbeats) const {
  const ProgressSpec& p = *ctx_.spec.progress;
  Clock::time_point last_output = started_;
  Clock::time_point last_progress = started_;
  Clock::time_point last_beat = started_;
  for (const RankClock& r : ranks_) {
    if (r.printed) last_output = std::max(last_output, r.output);
    if (r.progressed) last_progress = std::max(last_progress, r.progress);
    if (r.beat) last_beat = std::max(last_beat, r.heartbeat);
  }
  auto for_ = [now](Clock::time_point t) { return FormatDuration(std::chrono::duration_cast<milliseconds>(now - t)); };
  if (p.silence && now - last_output >= *p.silence) {
    return {"no rank printed anything for " + for_(last_output), Sign::kLine, *p.silence};
  }
  if (pattern_ && p.within && now - last_progress >= *p.within) {
    return {"no rank printed a line matching /" + *p.pattern + "/ for " + for_(last_progress), Sign::kProgress,
            *p.within};
  }
  // Judged when a round of asking ends (AskHeartbeats), on its answers: a
  // round's answers are older than the file by the time of the next one.
  if (p.heartbeat && heartbeats && now - last_beat >= p.heartbeat->within) {
    return {"no rank touched " + p.heartbeat->file + " for " + for_(last_beat), Sign::kHeartbeat,
            p.heartbeat->within};
  }
  return {};
}

std::vector<RankSign> ProgressWatch::Signs(Sign sign) const {
  std::vector<RankSign> out;
  for (size_t rank = 0; rank < ranks_.size() && rank < attempt_.nodes.size(); ++rank) {
    const RankClock& r = ranks_[rank];
    const bool gave = sign == Sign::kLine ? r.printed : sign == Sign::kProgress ? r.progressed : r.beat;
    if (!gave) continue;
    const Clock::time_point at = sign == Sign::kLine ? r.output : sign == Sign::kProgress ? r.progress : r.heartbeat;
    out.push_back({attempt_.nodes[rank]->host->name, at});
  }
  return out;
}

void ProgressWatch::AskHeartbeats() {
  if (!ctx_.spec.progress->heartbeat || asking_ > 0) return;
  // The ranks of each host, asked in one command there.
  std::map<HostState*, std::vector<std::string>> by_host;
  std::map<std::string, size_t> rank_of;
  for (size_t rank = 0; rank < attempt_.nodes.size() && rank < ranks_.size(); ++rank) {
    const NodeState& node = *attempt_.nodes[rank];
    if (node.phase != NodePhase::kRunning || node.host->lost) continue;
    by_host[node.host].push_back(node.plan->container.name);
    rank_of[node.plan->container.name] = rank;
  }
  const int gen = generation_;
  const auto limit = std::clamp<milliseconds>(ctx_.spec.progress->every, seconds(1), seconds(30));
  for (auto& [host, names] : by_host) {
    ++asking_;
    const std::string line = host->docker->FileTimes(names, ctx_.spec.progress->heartbeat->file);
    attempt_.commands.Run(*host->exec, Bounded(line, limit), [this, gen, rank_of](const Outcome& o) {
      if (gen != generation_ || gen != attempt_.generation) return;
      --asking_;
      const Clock::time_point now = Now();
      for (const FileAge& f : ParseFileTimes(o.out)) {
        auto it = rank_of.find(f.container);
        if (it == rank_of.end() || !f.age) continue;
        RankClock& r = ranks_[it->second];
        r.heartbeat = now - std::chrono::duration_cast<Clock::duration>(*f.age);
        r.beat = true;
      }
      if (asking_ == 0 && !declared_ && !attempt_.tearing_down) Check(/*heartbeats=*/true);
    });
  }
}

void ProgressWatch::CheckStragglers() {
  if (!ctx_.spec.progress->stragglers) return;
  const StragglerSpec& s = *ctx_.spec.progress->stragglers;
  std::vector<double> medians;
  for (const RankClock& r : ranks_) {
    if (r.steps.size() == static_cast<size_t>(s.steps)) medians.push_back(LowerMedian({r.steps.begin(), r.steps.end()}));
  }
  if (medians.size() < 2) return;
  const double median = LowerMedian(medians);
  bool changed = false;
  for (size_t rank = 0; rank < ranks_.size(); ++rank) {
    RankClock& r = ranks_[rank];
    if (r.steps.size() != static_cast<size_t>(s.steps)) continue;
    const double fastest = *std::min_element(r.steps.begin(), r.steps.end());
    const bool slow = fastest > s.factor * median;
    if (slow == r.straggling) continue;
    r.straggling = slow;
    changed = true;
    const std::string host = attempt_.nodes[rank]->host->name;
    double mean = 0;
    for (double step : r.steps) mean += step;
    mean /= static_cast<double>(r.steps.size());
    char ratio[16];
    std::snprintf(ratio, sizeof ratio, "%.1fx", mean / median);
    const std::string detail =
        slow ? RankName(rank) + ": its last " + std::to_string(s.steps) + " steps took " + Seconds(mean) +
                   " on average, " + ratio + " the median rank's " + Seconds(median) + " (stragglers.factor " +
                   Seconds(s.factor).substr(0, Seconds(s.factor).size() - 2) + ")"
             : RankName(rank) + " keeps up again: its last " + std::to_string(s.steps) + " steps took " +
                   Seconds(mean) + " on average, the median rank's " + Seconds(median);
    Say((slow ? "straggler: " : "") + detail);
    Event(slow ? event::kStraggler : event::kStragglerCleared, host, detail);
  }
  if (!changed) return;
  std::string status = std::to_string(attempt_.nodes.size()) + " node(s)" +
                       (attempt_.restart_count ? ", restart " + std::to_string(attempt_.restart_count) : "");
  std::string names;
  for (size_t rank = 0; rank < ranks_.size(); ++rank) {
    if (ranks_[rank].straggling) names += (names.empty() ? "" : ", ") + RankName(rank);
  }
  if (!names.empty()) status += "; straggling: " + names;
  SetStatus(JobStatus::kRunning, status);
}

std::string ProgressWatch::RankName(size_t rank) const {
  return "rank " + std::to_string(rank) + " (" + attempt_.nodes[rank]->host->name + ")";
}

std::string ProgressWatch::RankLines() const {
  const Clock::time_point now = Now();
  const ProgressSpec& p = *ctx_.spec.progress;
  std::string printing;
  std::string silent;
  for (size_t rank = 0; rank < ranks_.size() && rank < attempt_.nodes.size(); ++rank) {
    const RankClock& r = ranks_[rank];
    std::string line = "  " + RankName(rank) + ": ";
    line += r.printed ? "last line " + Ago(now, r.output) : "no line since the attempt began " + Ago(now, started_);
    if (pattern_) line += r.progressed ? ", last progress " + Ago(now, r.progress) : ", no progress line";
    if (p.heartbeat) line += r.beat ? ", heartbeat " + Ago(now, r.heartbeat) : ", no heartbeat file seen";
    line += "\n";
    // Still printing: a line within the last check period.
    const bool recent = r.printed && now - r.output < p.every;
    (recent ? printing : silent) += line;
  }
  std::string out;
  if (!printing.empty()) out += "ranks still printing (where to look first):\n" + printing;
  if (!silent.empty()) out += "ranks silent:\n" + silent;
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

}  // namespace barge::runner::internal
