#include "runner/ui/timeline.h"

#include <gtest/gtest.h>

namespace barge::runner::ui {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TimePoint At(milliseconds offset = milliseconds(0)) {
  return TimePoint(milliseconds(int64_t{1714564800} * 1000)) + offset;
}

JobRecord Job(JobStatus status, std::optional<TimePoint> ended, int nodes) {
  JobRecord j;
  j.id = "ab12cd34";
  j.name = "train";
  j.status = status;
  j.created = At();
  j.ended = ended;
  j.nodes = nodes;
  return j;
}

NodeRecord Node(int rank, const std::string& role, const std::string& host) {
  NodeRecord n;
  n.job_id = "ab12cd34";
  n.rank = rank;
  n.role = role;
  n.host = host;
  return n;
}

EventRecord Event(milliseconds at, const std::string& kind,
                  std::optional<std::string> host = std::nullopt, const std::string& detail = "") {
  EventRecord e;
  e.job_id = "ab12cd34";
  e.at = At(at);
  e.kind = kind;
  e.host = std::move(host);
  e.detail = detail;
  return e;
}

PhaseRecord Phase(int host_id, const std::string& host, std::optional<int> rank,
                  const std::string& phase, milliseconds began, std::optional<milliseconds> ended,
                  const std::string& outcome = "ok") {
  PhaseRecord p;
  p.job_id = "ab12cd34";
  p.host_id = host_id;
  p.host = host;
  p.rank = rank;
  p.phase = phase;
  p.began = At(began);
  if (ended) p.ended = At(*ended);
  p.outcome = ended ? outcome : "";
  return p;
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
  return n;
}

TEST(Timeline, PhaseRecordsGiveOneRowPerRankAndHostWidePhasesGoToEveryNodeOfTheirHost) {
  // Two nodes on host a, one on host b.
  const std::vector<NodeRecord> nodes = {Node(0, "head", "a"), Node(1, "worker", "a"),
                                         Node(2, "worker", "b")};
  const std::vector<PhaseRecord> phases = {
      Phase(0, "a", std::nullopt, "preflight", seconds(0), seconds(1)),
      Phase(1, "b", std::nullopt, "preflight", seconds(0), seconds(2)),
      Phase(0, "a", 0, "start", seconds(2), seconds(3)),
      Phase(0, "a", 1, "start", seconds(3), seconds(4)),
      Phase(1, "b", 2, "start", seconds(3), seconds(5), "exit status 125: no such image"),
      Phase(0, "a", 0, "running", seconds(4), std::nullopt),
  };
  const Timeline t = BuildTimeline(Job(JobStatus::kRunning, std::nullopt, 3), nodes, phases, {},
                                   At(seconds(10)));
  EXPECT_TRUE(t.from_phases);
  ASSERT_EQ(t.rows.size(), 3u);
  EXPECT_EQ(t.end, At(seconds(10)));  // a running job's timeline reaches now
  // Rows 0 and 1 share host a's preflight; row 2 has b's.
  ASSERT_EQ(t.rows[0].spans.size(), 3u);
  EXPECT_EQ(t.rows[0].spans[0].phase, "preflight");
  EXPECT_EQ(t.rows[0].spans[2].phase, "running");
  EXPECT_FALSE(t.rows[0].spans[2].ended.has_value());
  ASSERT_EQ(t.rows[1].spans.size(), 2u);
  EXPECT_EQ(t.rows[1].spans[1].began, At(seconds(3)));
  ASSERT_EQ(t.rows[2].spans.size(), 2u);
  EXPECT_EQ(t.rows[2].spans[0].ended, At(seconds(2)));
  EXPECT_EQ(t.rows[2].spans[1].outcome, "exit status 125: no such image");
}

TEST(Timeline, WithoutPhasesTheStatusEventsBecomeSpansAndANodesRunningEndsAtItsExit) {
  const std::vector<NodeRecord> nodes = {Node(0, "head", "local"), Node(1, "worker", "local")};
  const std::vector<EventRecord> events = {
      Event(seconds(0), event::kPreflight),
      Event(seconds(1), event::kStarting),
      Event(seconds(2), event::kHeadReady, "local"),
      Event(seconds(3), event::kRunning),
      Event(seconds(6), event::kNodeExited, "local", "rank 1 (worker) ended: exit 0"),
      Event(seconds(8), event::kNodeExited, "local", "rank 0 (head) ended: exit 0"),
      Event(seconds(8), event::kCompleting),
      Event(seconds(9), event::kTornDown),
      Event(seconds(9), event::kSucceeded),
  };
  const Timeline t = BuildTimeline(Job(JobStatus::kSucceeded, At(seconds(9)), 2), nodes, {},
                                   events, At(seconds(100)));
  EXPECT_FALSE(t.from_phases);
  EXPECT_EQ(t.end, At(seconds(9)));  // a finished job's timeline ends with it, not now
  ASSERT_EQ(t.rows.size(), 2u);
  std::vector<std::string> phases;
  for (const TimelineSpan& s : t.rows[0].spans) phases.push_back(s.phase);
  EXPECT_EQ(phases, (std::vector<std::string>{"preflight", "start", "running", "stop"}));
  EXPECT_EQ(t.rows[0].spans[2].ended, At(seconds(8)));
  EXPECT_EQ(t.rows[1].spans[2].ended, At(seconds(6)));  // the worker ended first
  EXPECT_EQ(t.rows[1].spans[2].outcome, "rank 1 (worker) ended: exit 0");
  EXPECT_EQ(t.rows[0].spans[3].ended, At(seconds(9)));
  // node_exited marks only its own row.
  ASSERT_EQ(t.rows[1].markers.size(), 1u);
  EXPECT_EQ(t.rows[1].markers[0].at, At(seconds(6)));
}

TEST(Timeline, FaultsMarkTheRowsOfTheirHostAndRestartsMarkEveryRow) {
  const std::vector<NodeRecord> nodes = {Node(0, "head", "a"), Node(1, "worker", "b")};
  const std::vector<EventRecord> events = {
      Event(seconds(0), event::kPreflight),
      Event(seconds(1), event::kRunning),
      Event(seconds(4), event::kHostLost, "b", "no answer for 10s"),
      Event(seconds(5), event::kRestarting, "c", "restart 1 of 3"),
      Event(seconds(7), event::kFailed),
  };
  const Timeline t =
      BuildTimeline(Job(JobStatus::kFailed, At(seconds(7)), 2), nodes, {}, events, At(seconds(9)));
  ASSERT_EQ(t.rows.size(), 2u);
  ASSERT_EQ(t.rows[0].markers.size(), 1u);
  EXPECT_EQ(t.rows[0].markers[0].kind, "restarting");
  ASSERT_EQ(t.rows[1].markers.size(), 2u);
  EXPECT_EQ(t.rows[1].markers[0].kind, "host_lost");
  // The last span of a failed job carries its status.
  EXPECT_EQ(t.rows[0].spans.back().outcome, "failed");
}

TEST(Timeline, AStragglerMarksTheRowsOfItsHostAndAHangMarksEveryRow) {
  const std::vector<NodeRecord> nodes = {Node(0, "head", "a"), Node(1, "worker", "b"), Node(2, "worker", "c")};
  const std::vector<EventRecord> events = {
      Event(seconds(0), event::kPreflight),
      Event(seconds(1), event::kRunning),
      Event(seconds(3), event::kStraggler, "c", "rank 2 (c): its last 5 steps took 3.00 s on average"),
      Event(seconds(6), event::kHang, "", "the job made no progress"),
      Event(seconds(7), event::kFailed),
  };
  const Timeline t =
      BuildTimeline(Job(JobStatus::kFailed, At(seconds(7)), 3), nodes, {}, events, At(seconds(9)));
  ASSERT_EQ(t.rows.size(), 3u);
  ASSERT_EQ(t.rows[0].markers.size(), 1u);
  EXPECT_EQ(t.rows[0].markers[0].kind, "hang");
  ASSERT_EQ(t.rows[2].markers.size(), 2u);
  EXPECT_EQ(t.rows[2].markers[0].kind, "straggler");
  EXPECT_EQ(t.rows[2].markers[1].kind, "hang");
}

TEST(Timeline, TheSvgHasOneRowGroupPerNodeAndEscapesWhatItShows) {
  const std::vector<NodeRecord> nodes = {Node(0, "head", "<script>alert(1)</script>"),
                                         Node(1, "worker", "b"), Node(2, "worker", "c")};
  const std::vector<PhaseRecord> phases = {
      Phase(0, "<script>alert(1)</script>", 0, "running", seconds(1), seconds(5), "a&b"),
      Phase(1, "b", 1, "running", seconds(1), seconds(5)),
  };
  const Timeline t =
      BuildTimeline(Job(JobStatus::kSucceeded, At(seconds(5)), 3), nodes, phases, {}, At());
  const std::string svg = TimelineSvg(t);
  EXPECT_EQ(svg.rfind("<svg ", 0), 0u);
  EXPECT_EQ(Count(svg, "class=\"tl-row\""), 3u);
  EXPECT_EQ(Count(svg, "class=\"tl-span\""), 2u);
  EXPECT_NE(svg.find("data-rank=\"2\""), std::string::npos);
  EXPECT_EQ(svg.find("<script>"), std::string::npos);
  EXPECT_NE(svg.find("&lt;script&gt;"), std::string::npos);
  EXPECT_NE(svg.find("running: 4.0s, a&amp;b"), std::string::npos);
  EXPECT_EQ(svg.find("style="), std::string::npos);  // a strict CSP forbids inline style
}

TEST(Timeline, TextBarsPutEachPhasesLetterWhereItsTimeIs) {
  const std::vector<NodeRecord> nodes = {Node(0, "head", "h1")};
  const std::vector<PhaseRecord> phases = {
      Phase(0, "h1", std::nullopt, "preflight", seconds(0), seconds(2)),
      Phase(0, "h1", 0, "start", seconds(2), seconds(4)),
      Phase(0, "h1", 0, "running", seconds(4), seconds(10)),
  };
  const std::vector<EventRecord> events = {Event(seconds(7), event::kNodeFailed, "h1", "oom")};
  const Timeline t = BuildTimeline(Job(JobStatus::kFailed, At(seconds(10)), 1), nodes, phases,
                                   events, At());
  const std::string text = TimelineText(t, 10);
  // 10 columns for 10 s: one second each.
  EXPECT_NE(text.find("0 head h1 |ppss===!==|"), std::string::npos) << text;
  EXPECT_NE(text.find("10.0s"), std::string::npos) << text;
  EXPECT_NE(text.find("p preflight"), std::string::npos);
  EXPECT_EQ(text.find("from the job's status events"), std::string::npos);
}

}  // namespace
}  // namespace barge::runner::ui
