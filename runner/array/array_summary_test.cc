#include "runner/array/array_summary.h"

#include <gtest/gtest.h>

namespace barge::runner::array {
namespace {

TEST(ArraySummary, TheTableHasOneRowPerMemberWithAttemptsExitHostsAndDuration) {
  const TimePoint t0(std::chrono::milliseconds(1'700'000'000'000));
  MemberRecord a;
  a.index = 0;
  a.params = "lr=0.1";
  a.status = MemberStatus::kSucceeded;
  a.attempts = 2;
  a.exit_code = 0;
  a.hosts = "h1";
  a.started = t0;
  a.ended = t0 + std::chrono::seconds(3);
  MemberRecord b;
  b.index = 1;
  b.params = "lr=0.01";
  b.status = MemberStatus::kWaiting;
  EXPECT_EQ(SummaryTable({a, b}, t0),
            "INDEX | PARAMS  | STATUS                 | EXIT | HOSTS | DURATION\n"
            "0     | lr=0.1  | succeeded (2 attempts) | 0    | h1    | 3s\n"
            "1     | lr=0.01 | waiting                | -    | -     | -\n");
}

TEST(ArraySummary, CountsNameOnlyStatusesThatHaveMembers) {
  std::vector<MemberRecord> m(7);
  m[0].status = m[1].status = MemberStatus::kRunning;
  m[2].status = MemberStatus::kSucceeded;
  m[3].status = MemberStatus::kFailed;
  EXPECT_EQ(CountsText(m), "running 2, succeeded 1, failed 1, waiting 3");
}

}  // namespace
}  // namespace barge::runner::array
