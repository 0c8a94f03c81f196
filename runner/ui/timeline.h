// The job timeline: one row per node (rank), time on the x axis, a span per
// phase (connect, preflight, push, upload, start, ready, running, stop,
// remove) and markers for faults, restarts and node exits. Built from the
// store's records (pure functions: no I/O), drawn as inline SVG for the
// dashboard and as text bars for `barge show JOB --timeline`.
//
// Where the rows come from: per-host phase spans (JobStore::GetPhases)
// when the job has any; a span with a rank goes to that node's row, one
// without (connect, preflight, push, upload) to every row of its host.
// For a job without phase records (run by a controller that wrote none),
// the job-wide status events (preflight, pushing, starting, running,
// completing, torn_down, the final status) become spans on every row, and
// a node's running span ends at its node_exited event.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "runner/store/job_store.h"

namespace barge::runner::ui {

struct TimelineSpan {
  std::string phase;  // as in PhaseRecord
  TimePoint began{};
  std::optional<TimePoint> ended;  // nullopt: still open (drawn to the timeline's end)
  std::string outcome;             // "", "ok", or what went wrong
};

struct TimelineMarker {
  TimePoint at{};
  std::string kind;  // an event kind: host_lost, node_failed, preempted, hang, straggler, restarting, node_exited
  std::string detail;
};

struct TimelineRow {
  int rank = 0;
  std::string role;
  std::string host;
  std::vector<TimelineSpan> spans;  // by began
  std::vector<TimelineMarker> markers;
};

struct Timeline {
  TimePoint start{};  // the job's creation
  TimePoint end{};    // its end, or `now` while it runs; never before start
  bool from_phases = false;
  std::vector<TimelineRow> rows;  // by rank
};

// `now` ends the spans still open of a job that is not final.
Timeline BuildTimeline(const JobRecord& job, const std::vector<NodeRecord>& nodes,
                       const std::vector<PhaseRecord>& phases,
                       const std::vector<EventRecord>& events, TimePoint now);

// A self-contained <svg> element (no script, no style attribute: colours are
// presentation attributes, so a strict Content-Security-Policy allows it).
// Every row is a <g class="tl-row" data-rank="N">; each span a <rect> with a
// <title> (phase, duration, outcome); all text is XML-escaped.
std::string TimelineSvg(const Timeline& timeline);

// Text bars, `width` columns for the time axis (at least 10), then a legend:
//   RANK ROLE HOST |ppPPsss=========x|
std::string TimelineText(const Timeline& timeline, int width = 60);

// The phases in their launch order, each with its SVG colour and its text
// letter.
struct PhaseStyle {
  const char* phase;
  const char* label;
  const char* colour;
  char letter;
};
const std::vector<PhaseStyle>& PhaseStyles();

}  // namespace barge::runner::ui
