#include "runner/ui/log_view.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace barge::runner::ui {
namespace {

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/barge-ui-log-test-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

void Append(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::app | std::ios::binary) << text;
}

// Line i of node `rank`, stamped at second 2*i + rank, as LogSink writes it.
std::string Line(int rank, int i, bool err = false) {
  char buf[128];
  std::snprintf(buf, sizeof buf, "2024-05-01T12:00:%02d.000000000Z %s r%d line %d\n", 2 * i + rank,
                err ? "stderr" : "stdout", rank, i);
  return buf;
}

struct Fixture {
  TempDir dir;
  JobRecord job;
  std::vector<NodeRecord> nodes;
  Fixture() {
    job.id = "j1";
    job.run_dir = dir.path();
    job.status = JobStatus::kSucceeded;
    for (int r = 0; r < 2; ++r) {
      NodeRecord n;
      n.job_id = "j1";
      n.rank = r;
      n.role = r ? "worker" : "head";
      n.host = "h" + std::to_string(r);
      nodes.push_back(n);
      for (int i = 0; i < 10; ++i) Append(dir.path() + "/" + std::to_string(r) + "-h" + std::to_string(r) + ".log", Line(r, i, i == 3));
    }
  }
};

TEST(UiLogView, APageIsAWindowOfTheMergedOutputAndTheDefaultIsTheLastOne) {
  Fixture f;
  Result<LogPage> last = ReadLogPage(f.job, f.nodes, std::nullopt, std::nullopt, 5);
  ASSERT_TRUE(last.ok()) << last.status().message();
  EXPECT_EQ(last->total, 20u);
  EXPECT_EQ(last->first, 15u);
  ASSERT_EQ(last->lines.size(), 5u);
  EXPECT_EQ(last->lines.back().text, "r1 line 9");
  Result<LogPage> second = ReadLogPage(f.job, f.nodes, std::nullopt, 2, 3);
  ASSERT_TRUE(second.ok());
  ASSERT_EQ(second->lines.size(), 3u);
  // Merged by stamp: r0 line 0 (0 s), r1 line 0 (1 s), r0 line 1 (2 s), r1 line 1 (3 s), ...
  EXPECT_EQ(second->lines[0].text, "r0 line 1");
  EXPECT_EQ(second->lines[1].text, "r1 line 1");
  EXPECT_EQ(second->lines[1].host, "h1");
  EXPECT_EQ(second->lines[1].role, "worker");
  Result<LogPage> node1 = ReadLogPage(f.job, f.nodes, 1, 3, 1);
  ASSERT_TRUE(node1.ok());
  EXPECT_EQ(node1->total, 10u);
  ASSERT_EQ(node1->lines.size(), 1u);
  EXPECT_TRUE(node1->lines[0].is_stderr);
  EXPECT_EQ(node1->lines[0].text, "r1 line 3");
  Result<LogPage> past = ReadLogPage(f.job, f.nodes, std::nullopt, 100, 5);
  ASSERT_TRUE(past.ok());
  EXPECT_TRUE(past->lines.empty());
  EXPECT_EQ(past->first, 20u);
}

TEST(UiLogView, ATailReturnsOnlyAppendedCompleteLinesAndResumesFromItsCursor) {
  Fixture f;
  f.job.status = JobStatus::kRunning;
  LogTail tail(std::nullopt);
  Result<std::vector<ViewLine>> first = tail.Poll(f.job, f.nodes, false, 4);
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->size(), 4u);  // the end of the backlog only
  EXPECT_EQ(first->back().text, "r1 line 9");
  EXPECT_TRUE(tail.grew());
  const std::string path0 = f.dir.path() + "/0-h0.log";
  Append(path0, "2024-05-01T12:01:00.000000000Z stdout new ");
  Result<std::vector<ViewLine>> none = tail.Poll(f.job, f.nodes, false);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());  // no newline yet
  const std::string cursor = tail.Cursor();
  Append(path0, "line\n");
  Result<std::vector<ViewLine>> one = tail.Poll(f.job, f.nodes, false);
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].text, "new line");
  // A tail started from the cursor taken before sees the line again, and
  // nothing before it.
  std::optional<std::map<int, uint64_t>> at = LogTail::ParseCursor(cursor);
  ASSERT_TRUE(at.has_value()) << cursor;
  LogTail resumed(std::nullopt, *at);
  Result<std::vector<ViewLine>> again = resumed.Poll(f.job, f.nodes, false);
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->size(), 1u);
  EXPECT_EQ((*again)[0].text, "new line");
  EXPECT_FALSE(LogTail::ParseCursor("0:12,x:3").has_value());
  EXPECT_FALSE(LogTail::ParseCursor("0:").has_value());
  EXPECT_FALSE(LogTail::ParseCursor("../etc").has_value());
  EXPECT_TRUE(LogTail::ParseCursor("")->empty());
}

}  // namespace
}  // namespace barge::runner::ui
