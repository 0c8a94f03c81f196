#include "runner/ui/timeline.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "runner/console/time_format.h"
#include "runner/ui/html.h"

namespace barge::runner::ui {

namespace {

using std::chrono::milliseconds;

const char* Name(Phase phase) { return NameOf(kPhaseNames, phase).data(); }

bool IsFault(const std::string& kind) {
  return kind == event::kHostLost || kind == event::kNodeFailed || kind == event::kPreempted || kind == event::kHang;
}
bool IsMarker(const std::string& kind) {
  return IsFault(kind) || kind == event::kRestarting || kind == event::kNodeExited || kind == event::kStraggler;
}

// The phase a job-wide status event opens; "" for one that closes the
// open span and opens none (torn_down, the final statuses).
std::optional<std::string> DerivedPhase(const std::string& kind) {
  if (kind == event::kPreflight) return Name(Phase::kPreflight);
  if (kind == event::kPushing) return Name(Phase::kPush);
  if (kind == event::kStarting) return Name(Phase::kStart);
  if (kind == event::kRunning) return Name(Phase::kRunning);
  if (kind == event::kCompleting) return Name(Phase::kStop);
  if (kind == event::kTornDown || kind == event::kSucceeded || kind == event::kFailed ||
      kind == event::kCancelled || kind == event::kTimedOut || kind == event::kLost) {
    return "";
  }
  return std::nullopt;  // not a status edge (head_ready, faults, ...)
}

// "rank 3 (worker) ended: ..." -> 3.
std::optional<int> RankInDetail(const std::string& detail) {
  int rank = 0;
  if (std::sscanf(detail.c_str(), "rank %d ", &rank) == 1) return rank;
  return std::nullopt;
}

// "12.3s", "3m05s" of a span.
std::string SpanLength(milliseconds d) {
  if (d < std::chrono::minutes(1)) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1fs", static_cast<double>(d.count()) / 1000.0);
    return buf;
  }
  return FormatDuration(d);
}

const PhaseStyle* StyleOf(const std::string& phase) {
  for (const PhaseStyle& s : PhaseStyles()) {
    if (phase == s.phase) return &s;
  }
  return nullptr;
}

}  // namespace

const std::vector<PhaseStyle>& PhaseStyles() {
  static const std::vector<PhaseStyle> kStyles = {
      {Name(Phase::kConnect), "connect", "#9e9e9e", 'c'},
      {Name(Phase::kPreflight), "preflight", "#7e57c2", 'p'},
      {Name(Phase::kPush), "image push", "#29b6f6", 'P'},
      {Name(Phase::kUpload), "upload", "#26a69a", 'u'},
      {Name(Phase::kStart), "start", "#ffa726", 's'},
      {Name(Phase::kReady), "waiting for readiness", "#fdd835", 'w'},
      {Name(Phase::kRunning), "running", "#66bb6a", '='},
      {Name(Phase::kStop), "stopping", "#ef9a9a", 'x'},
      {Name(Phase::kRemove), "remove", "#8d6e63", 'r'},
  };
  return kStyles;
}

Timeline BuildTimeline(const JobRecord& job, const std::vector<NodeRecord>& nodes,
                       const std::vector<PhaseRecord>& phases,
                       const std::vector<EventRecord>& events, TimePoint now) {
  Timeline t;
  t.start = job.created;
  t.end = job.ended ? *job.ended : (IsFinal(job.status) ? job.created : now);
  std::map<int, TimelineRow> rows;
  for (const NodeRecord& n : nodes) rows[n.rank] = TimelineRow{n.rank, n.role, n.host, {}, {}};
  for (int r = 0; r < job.nodes; ++r) {
    if (!rows.count(r)) rows[r] = TimelineRow{r, "", "", {}, {}};
  }
  for (const PhaseRecord& p : phases) {
    if (p.rank && !rows.count(*p.rank)) rows[*p.rank] = TimelineRow{*p.rank, "", p.host, {}, {}};
  }
  auto rows_of_host = [&](const std::optional<std::string>& host) {
    std::vector<TimelineRow*> out;
    for (auto& [rank, row] : rows) {
      if (!host || row.host == *host) out.push_back(&row);
    }
    return out;
  };

  if (!phases.empty()) {
    t.from_phases = true;
    for (const PhaseRecord& p : phases) {
      TimelineSpan span{p.phase, p.began, p.ended, p.outcome};
      if (p.rank) {
        rows[*p.rank].spans.push_back(span);
      } else {
        for (TimelineRow* row : rows_of_host(p.host)) row->spans.push_back(span);
      }
    }
  } else {
    // Job-wide spans from the status events, in the order written.
    std::vector<TimelineSpan> job_spans;
    for (const EventRecord& e : events) {
      std::optional<std::string> phase = DerivedPhase(e.kind);
      if (!phase) continue;
      if (!job_spans.empty() && !job_spans.back().ended) job_spans.back().ended = e.at;
      if (!phase->empty()) job_spans.push_back(TimelineSpan{*phase, e.at, std::nullopt, ""});
    }
    if (!job_spans.empty() && !job_spans.back().ended && IsFinal(job.status)) {
      job_spans.back().ended = t.end;
    }
    for (TimelineSpan& s : job_spans) {
      if (s.ended) s.outcome = "ok";
    }
    if (!job_spans.empty() && IsFinal(job.status) && job.status != JobStatus::kSucceeded) {
      job_spans.back().outcome = ToString(job.status);
    }
    for (auto& [rank, row] : rows) row.spans = job_spans;
    // A node's running span ends when the node does.
    for (const EventRecord& e : events) {
      if (e.kind != event::kNodeExited) continue;
      std::optional<int> rank = RankInDetail(e.detail);
      if (!rank || !rows.count(*rank)) continue;
      for (TimelineSpan& s : rows[*rank].spans) {
        if (s.phase == Name(Phase::kRunning) && s.began <= e.at && (!s.ended || *s.ended > e.at)) {
          s.ended = e.at;
          s.outcome = e.detail;
        }
      }
    }
  }

  for (const EventRecord& e : events) {
    if (!IsMarker(e.kind)) continue;
    TimelineMarker m{e.at, e.kind, e.detail};
    std::optional<int> rank = e.kind == event::kNodeExited ? RankInDetail(e.detail) : std::nullopt;
    if (rank && rows.count(*rank)) {
      rows[*rank].markers.push_back(m);
      continue;
    }
    // A restart and a hang are the whole job's.
    const bool whole_job = e.kind == event::kRestarting || e.kind == event::kHang;
    for (TimelineRow* row : rows_of_host(whole_job ? std::nullopt : e.host)) {
      row->markers.push_back(m);
    }
  }

  for (auto& [rank, row] : rows) {
    std::stable_sort(row.spans.begin(), row.spans.end(),
                     [](const TimelineSpan& a, const TimelineSpan& b) { return a.began < b.began; });
    for (const TimelineSpan& s : row.spans) {
      t.end = std::max(t.end, s.ended.value_or(s.began));
      t.start = std::min(t.start, s.began);
    }
    for (const TimelineMarker& m : row.markers) t.end = std::max(t.end, m.at);
    t.rows.push_back(std::move(row));
  }
  if (t.end < t.start) t.end = t.start;
  return t;
}

std::string TimelineSvg(const Timeline& t) {
  constexpr int kLabelWidth = 200, kBarsWidth = 760, kRowHeight = 24, kAxisHeight = 22,
                kLegendHeight = 26;
  const int height = kAxisHeight + static_cast<int>(t.rows.size()) * kRowHeight + kLegendHeight;
  const int width = kLabelWidth + kBarsWidth + 20;
  const double total = std::max<double>(1.0, static_cast<double>((t.end - t.start).count()));
  auto x_of = [&](TimePoint at) {
    double f = static_cast<double>((at - t.start).count()) / total;
    return kLabelWidth + std::clamp(f, 0.0, 1.0) * kBarsWidth;
  };
  auto num = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f", v);
    return std::string(buf);
  };
  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"timeline\" width=\"" +
                  std::to_string(width) + "\" height=\"" + std::to_string(height) +
                  "\" viewBox=\"0 0 " + std::to_string(width) + " " + std::to_string(height) +
                  "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  // Axis: 0 and five ticks.
  for (int i = 0; i <= 5; ++i) {
    const double x = kLabelWidth + kBarsWidth * i / 5.0;
    const milliseconds at(static_cast<int64_t>(total * i / 5.0));
    s += "<line x1=\"" + num(x) + "\" y1=\"" + std::to_string(kAxisHeight - 4) + "\" x2=\"" +
         num(x) + "\" y2=\"" + std::to_string(height - kLegendHeight) +
         "\" stroke=\"#ddd\"/><text x=\"" + num(x) + "\" y=\"14\" text-anchor=\"middle\">" +
         HtmlEscape(SpanLength(at)) + "</text>\n";
  }
  int y = kAxisHeight;
  for (const TimelineRow& row : t.rows) {
    s += "<g class=\"tl-row\" data-rank=\"" + std::to_string(row.rank) + "\">";
    s += "<text x=\"4\" y=\"" + std::to_string(y + 16) + "\">" +
         HtmlEscape(std::to_string(row.rank) + " " + row.role + " " + row.host) + "</text>";
    for (const TimelineSpan& span : row.spans) {
      const PhaseStyle* style = StyleOf(span.phase);
      const TimePoint end = span.ended.value_or(t.end);
      const double x0 = x_of(span.began), x1 = std::max(x_of(end), x0 + 1.0);
      const bool bad = !span.outcome.empty() && span.outcome != "ok";
      std::string title = (style ? style->label : span.phase) + std::string(": ") +
                          SpanLength(end - span.began) +
                          (span.ended ? "" : " (still going)") +
                          (span.outcome.empty() ? "" : ", " + span.outcome);
      s += "<rect class=\"tl-span\" data-phase=\"" + HtmlEscape(span.phase) + "\" x=\"" + num(x0) +
           "\" y=\"" + std::to_string(y + 3) + "\" width=\"" + num(x1 - x0) + "\" height=\"" +
           std::to_string(kRowHeight - 6) + "\" fill=\"" + (style ? style->colour : "#bdbdbd") +
           "\"" + (bad ? " stroke=\"#c62828\" stroke-width=\"2\"" : "") + "><title>" +
           HtmlEscape(title) + "</title></rect>";
    }
    for (const TimelineMarker& m : row.markers) {
      const double x = x_of(m.at);
      const bool fault = IsFault(m.kind);
      const char* colour = fault ? "#c62828" : m.kind == event::kRestarting ? "#1565c0" : "#212121";
      const int top = y + 1, bottom = y + kRowHeight - 1;
      s += "<path class=\"tl-marker\" data-kind=\"" + HtmlEscape(m.kind) + "\" d=\"M" + num(x) +
           " " + std::to_string(bottom) + " L" + num(x - 5) + " " + std::to_string(top) + " L" +
           num(x + 5) + " " + std::to_string(top) + " Z\" fill=\"" + colour + "\"><title>" +
           HtmlEscape(m.kind + (m.detail.empty() ? "" : ": " + m.detail)) + "</title></path>";
    }
    s += "</g>\n";
    y += kRowHeight;
  }
  // Legend.
  double lx = 4;
  const int ly = y + 8;
  for (const PhaseStyle& style : PhaseStyles()) {
    s += "<rect x=\"" + num(lx) + "\" y=\"" + std::to_string(ly) + "\" width=\"10\" height=\"10\" fill=\"" +
         style.colour + "\"/><text x=\"" + num(lx + 13) + "\" y=\"" + std::to_string(ly + 9) +
         "\">" + style.label + "</text>";
    lx += 18 + 6.6 * std::string(style.label).size() + 8;
  }
  s += "<path d=\"M" + num(lx + 5) + " " + std::to_string(ly + 10) + " L" + num(lx) + " " +
       std::to_string(ly) + " L" + num(lx + 10) + " " + std::to_string(ly) +
       " Z\" fill=\"#c62828\"/><text x=\"" + num(lx + 13) + "\" y=\"" + std::to_string(ly + 9) +
       "\">fault</text>";
  lx += 60;
  s += "<path d=\"M" + num(lx + 5) + " " + std::to_string(ly + 10) + " L" + num(lx) + " " +
       std::to_string(ly) + " L" + num(lx + 10) + " " + std::to_string(ly) +
       " Z\" fill=\"#1565c0\"/><text x=\"" + num(lx + 13) + "\" y=\"" + std::to_string(ly + 9) +
       "\">restart</text>";
  s += "</svg>\n";
  return s;
}

std::string TimelineText(const Timeline& t, int width) {
  width = std::max(width, 10);
  const double total = std::max<double>(1.0, static_cast<double>((t.end - t.start).count()));
  auto col_of = [&](TimePoint at) {
    double f = static_cast<double>((at - t.start).count()) / total;
    return std::clamp(static_cast<int>(f * width), 0, width - 1);
  };
  std::vector<std::string> labels;
  size_t label_width = 0;
  for (const TimelineRow& row : t.rows) {
    std::string label = std::to_string(row.rank) + " " + row.role + " " + row.host;
    label_width = std::max(label_width, label.size());
    labels.push_back(std::move(label));
  }
  std::string out;
  const std::string length = SpanLength(t.end - t.start);
  out += std::string(label_width, ' ') + " 0s" +
         std::string(static_cast<size_t>(std::max<int>(1, width - 1 - static_cast<int>(length.size()))), ' ') +
         length + "\n";
  for (size_t i = 0; i < t.rows.size(); ++i) {
    const TimelineRow& row = t.rows[i];
    std::string bar(static_cast<size_t>(width), ' ');
    for (const TimelineSpan& span : row.spans) {
      const PhaseStyle* style = StyleOf(span.phase);
      // Columns [c0, c1): a span takes at least one.
      const int c0 = col_of(span.began);
      const double f_end =
          static_cast<double>((span.ended.value_or(t.end) - t.start).count()) / total;
      const int c1 = std::clamp(static_cast<int>(f_end * width), c0 + 1, width);
      for (int c = c0; c < c1; ++c) bar[static_cast<size_t>(c)] = style ? style->letter : '?';
    }
    for (const TimelineMarker& m : row.markers) {
      if (m.kind == event::kNodeExited) continue;  // the bar's end shows it
      bar[static_cast<size_t>(col_of(m.at))] = IsFault(m.kind) ? '!' : m.kind == event::kStraggler ? 'S' : 'R';
    }
    out += labels[i] + std::string(label_width - labels[i].size(), ' ') + " |" + bar + "|\n";
  }
  out += "\n";
  std::string legend;
  for (const PhaseStyle& style : PhaseStyles()) {
    legend += std::string(legend.empty() ? "" : "  ") + style.letter + " " + style.label;
  }
  out += legend + "  ! fault  S straggler  R restart\n";
  if (!t.from_phases) {
    out += "(from the job's status events: this job has no per-host phase records)\n";
  }
  return out;
}

}  // namespace barge::runner::ui
