#include "runner/controller/job_observer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

namespace barge::runner {
namespace {

// Reads back what was written to a tmpfile.
std::vector<std::string> Lines(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::vector<std::string> out;
  char buf[4096];
  while (std::fgets(buf, sizeof buf, f)) out.emplace_back(buf);
  return out;
}

TEST(EventStream, EveryPhaseEdgeAndJobEventIsOneJsonObjectPerLineInOrder) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  EventStreamObserver events(f);
  ObserverList list;
  list.Add(&events);
  const TimePoint t{std::chrono::milliseconds(1764000000123)};
  list.HostBegan(HostPhase{Phase::kPreflight, 1, "h1", std::nullopt, std::nullopt}, t);
  list.HostEnded(HostPhase{Phase::kPreflight, 1, "h1", std::nullopt, std::nullopt}, t, false, "disk full: \"quoted\"\nnext");
  list.HostBegan(HostPhase{Phase::kStart, 2, "h2", 1, std::nullopt}, t);
  list.JobEvent("head_ready", std::string("h1"), "port 29500 open", t);
  std::vector<std::string> lines = Lines(f);
  std::fclose(f);
  ASSERT_EQ(lines.size(), 4u);
  for (const auto& l : lines) ASSERT_EQ(l.back(), '\n') << l;
  auto j0 = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(j0["type"], "phase");
  EXPECT_EQ(j0["phase"], "preflight");
  EXPECT_EQ(j0["state"], "began");
  EXPECT_EQ(j0["host"], "h1");
  EXPECT_EQ(j0["host_id"], 1);
  EXPECT_FALSE(j0.contains("rank"));
  EXPECT_EQ(j0["at"], "2025-11-24T16:00:00.123Z");
  auto j1 = nlohmann::json::parse(lines[1]);
  EXPECT_EQ(j1["state"], "ended");
  EXPECT_EQ(j1["ok"], false);
  EXPECT_EQ(j1["detail"], "disk full: \"quoted\"\nnext");
  auto j2 = nlohmann::json::parse(lines[2]);
  EXPECT_EQ(j2["phase"], "start");
  EXPECT_EQ(j2["rank"], 1);
  auto j3 = nlohmann::json::parse(lines[3]);
  EXPECT_EQ(j3["type"], "event");
  EXPECT_EQ(j3["kind"], "head_ready");
  EXPECT_EQ(j3["host"], "h1");
}

TEST(ProgressObserver, OnlyTheCurrentStepsHostsAreCountedOnTheStatusLine) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    Progress progress(f, /*terminal=*/false);
    ProgressObserver status(&progress);
    const TimePoint t{};
    status.StepBegan(Phase::kPreflight, "preflight", 2);
    status.HostEnded(HostPhase{Phase::kPreflight, 1, "h1", std::nullopt, std::nullopt}, t, true, "");
    // Another phase's end is not this step's.
    status.HostEnded(HostPhase{Phase::kConnect, 2, "h2", std::nullopt, std::nullopt}, t, false, "refused");
    status.HostEnded(HostPhase{Phase::kPreflight, 2, "h2", std::nullopt, std::nullopt}, t, false, "disk full");
    status.StepEnded(Phase::kPreflight);
    status.StepEnded(Phase::kPreflight);  // no step open: nothing
  }
  std::string all;
  for (const auto& l : Lines(f)) all += l;
  std::fclose(f);
  EXPECT_NE(all.find("[0/2] preflight\n"), std::string::npos) << all;
  EXPECT_NE(all.find("[2/2] preflight: h2 FAILED: disk full"), std::string::npos) << all;
  EXPECT_EQ(all.find("refused"), std::string::npos) << all;
  EXPECT_NE(all.find("(1 ok, 1 failed)"), std::string::npos) << all;
}

// The local engine's connect step (barge exec, top, hosts, reap on the
// local engine): a step with no label prints nothing at all.
TEST(ProgressObserver, AStepWithNoLabelPrintsNoStatusLine) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    Progress progress(f, /*terminal=*/false);
    ProgressObserver status(&progress);
    const TimePoint t{};
    status.StepBegan(Phase::kConnect, "", 1);
    status.HostEnded(HostPhase{Phase::kConnect, 1, "local", std::nullopt, std::nullopt}, t, true, "");
    status.StepEnded(Phase::kConnect);
  }
  std::string all;
  for (const auto& l : Lines(f)) all += l;
  std::fclose(f);
  EXPECT_EQ(all, "");
}

}  // namespace
}  // namespace barge::runner
