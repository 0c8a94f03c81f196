// The live log on an Engine API host is the container's attach stream
// (runner/controller/node_streams_api.cc), through the real CLI on the test bed:
// a node whose Docker log rotates (--log-opt max-size=100k, max-file=2,
// through the job file's run_options) writes 200,000 numbered lines as fast
// as it can, and its kept log file holds every one exactly once, in order,
// stamped on receipt with strictly increasing stamps. Following `docker
// logs` there (the path before the attach) lost most of them: the driver
// kept about 3,000 lines (container/docker_api_bed_test.cc shows that on
// the local engine).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include "container/timestamp.h"
#include "tests/support/bed_job.h"

namespace fs = std::filesystem;
using barge::testing::BedHostsYaml;
using barge::testing::CliOutcome;
using barge::testing::GetBed;
using barge::testing::JobDir;
using barge::testing::JobIdIn;
using barge::testing::ReadWholeFile;
using barge::testing::RunShell;

namespace {

TEST(AttachLogsTest, ARotatingLogDriverLosesNoneOfTwoHundredThousandLinesInTheKeptFile) {
  constexpr int kLines = 200000;
  const auto& bed = GetBed();
  JobDir job("attach-logs");
  job.Write("name: rotating\nimage: " + bed.image + "\n" + BedHostsYaml(0, 1) +
            "timeout: 60s\n"
            "container:\n"
            "  run_options: [\"--log-opt\", \"max-size=100k\", \"--log-opt\", \"max-file=2\"]\n"
            "command: [\"sh\", \"-c\", \"seq 1 " + std::to_string(kLines) +
            "; echo done >&2\"]\n");
  const auto t0 = std::chrono::steady_clock::now();
  CliOutcome o = job.Barge("run job.yaml");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(o.code, 0) << o.err;
  // It ran through the Engine API (else this tests the CLI's follow).
  EXPECT_EQ(o.err.find("the docker CLI is used there"), std::string::npos) << o.err;
  const std::string id = JobIdIn(o.err);
  ASSERT_FALSE(id.empty()) << o.err;

  const std::string log =
      ReadWholeFile(job.path() / "home" / "runs" / id / ("0-" + bed.hosts[0].address + ".log"));
  // "<stamp> stdout <n>" for n = 1..kLines in order, then "<stamp> stderr done".
  size_t pos = 0;
  int64_t previous = 0;
  int next = 1;
  uint64_t sum = 0, weighted = 0;  // a checksum of the numbers and their order
  bool saw_done = false;
  int bad = 0;
  while (pos < log.size()) {
    const size_t nl = log.find('\n', pos);
    ASSERT_NE(nl, std::string::npos) << "the kept file ends inside a line";
    const std::string line = log.substr(pos, nl - pos);
    pos = nl + 1;
    const size_t a = line.find(' ');
    const size_t b = line.find(' ', a + 1);
    ASSERT_NE(b, std::string::npos) << line;
    barge::Result<int64_t> stamp = barge::container::ParseTimestamp(line.substr(0, a));
    ASSERT_TRUE(stamp.ok()) << line;
    if (*stamp <= previous && ++bad <= 5) ADD_FAILURE() << "a stamp not after the one before: " << line;
    previous = *stamp;
    const std::string stream = line.substr(a + 1, b - a - 1);
    const std::string text = line.substr(b + 1);
    if (stream == "stderr") {
      // Where it lands among stdout's last lines is not asserted: the
      // engine copies a container's stdout and stderr in two goroutines,
      // so a stderr line written right after a 1.2 MB stdout burst can
      // overtake the burst's tail (seen on the bed: after line 179,127).
      // Order across the streams is tested at 20 ms spacing below.
      EXPECT_EQ(text, "done");
      EXPECT_FALSE(saw_done) << "stderr's line twice";
      saw_done = true;
      continue;
    }
    ASSERT_EQ(stream, "stdout") << line;
    if (text != std::to_string(next)) {
      ADD_FAILURE() << "line " << next << " of the kept file is \"" << text << "\"";
      return;
    }
    sum += static_cast<uint64_t>(next);
    weighted += static_cast<uint64_t>(next) * static_cast<uint64_t>(next % 7 + 1);
    ++next;
  }
  EXPECT_EQ(next - 1, kLines) << "stdout lines in the kept file";
  EXPECT_EQ(sum, uint64_t{kLines} * (kLines + 1) / 2);
  uint64_t want_weighted = 0;
  for (uint64_t i = 1; i <= kLines; ++i) want_weighted += i * (i % 7 + 1);
  EXPECT_EQ(weighted, want_weighted);
  EXPECT_TRUE(saw_done);
  EXPECT_EQ(RunShell("DOCKER_HOST=" + bed.hosts[0].docker_host +
                     " timeout 20 docker ps -aq --filter label=barge.job=" + id),
            "")
      << "the job's container was left behind";
  EXPECT_LT(seconds, 30.0) << "the whole job, launch to teardown";
  std::printf("attach logs: %d lines through a rotating log driver, all kept, job %.1f s\n", kLines,
              seconds);
}

// Issue #10: `barge logs` of a node printing alternately to stdout and
// stderr every 20 ms showed "1 3 5 2 4 6" (each stream's Docker stamps,
// and two pipes). Through the attach, stamped on receipt, the kept file and
// `barge logs` keep the order the lines arrived in.
TEST(AttachLogsTest, LogsKeepsStdoutAndStderrLinesWrittenTwentyMsApartInTheirOrder) {
  const auto& bed = GetBed();
  JobDir job("attach-order");
  job.Write("name: alternate\nimage: " + bed.image + "\n" + BedHostsYaml(1, 1) +
            "timeout: 60s\n"
            "command: [\"sh\", \"-c\", \"i=1; while [ $i -le 12 ]; do if [ $((i % 2)) = 1 ]; "
            "then echo $i; else echo $i >&2; fi; sleep 0.02; i=$((i+1)); done\"]\n");
  CliOutcome o = job.Barge("run job.yaml");
  ASSERT_EQ(o.code, 0) << o.err;
  const std::string id = JobIdIn(o.err);
  ASSERT_FALSE(id.empty()) << o.err;
  CliOutcome logs = job.Barge("logs " + id);
  ASSERT_EQ(logs.code, 0) << logs.err;
  std::string order;
  size_t pos = 0;
  while (pos < logs.out.size()) {
    const size_t nl = logs.out.find('\n', pos);
    const std::string line = logs.out.substr(pos, nl - pos);
    pos = nl == std::string::npos ? logs.out.size() : nl + 1;
    const size_t close = line.find("] ");
    if (close == std::string::npos) continue;
    const bool err = line.substr(0, close).find(" stderr") != std::string::npos;
    order += line.substr(close + 2) + (err ? "e " : "o ");
  }
  EXPECT_EQ(order, "1o 2e 3o 4e 5o 6e 7o 8e 9o 10e 11o 12e ") << logs.out;
}

}  // namespace
