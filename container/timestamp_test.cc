#include "container/timestamp.h"

#include <gtest/gtest.h>

#include <limits>

namespace barge::container {
namespace {

int64_t Parse(std::string_view text) {
  Result<int64_t> r = ParseTimestamp(text);
  EXPECT_TRUE(r.ok()) << text << ": " << r.status().message();
  return r.ok() ? *r : -1;
}

constexpr int64_t kSecond = 1'000'000'000;
// 2026-11-22T04:37:38Z
constexpr int64_t kBase = 1795322258 * kSecond;

TEST(ParseTimestamp, TheEpochIsZero) {
  EXPECT_EQ(Parse("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(Parse("1970-01-01T00:00:00.000000001Z"), 1);
}

TEST(ParseTimestamp, EveryFractionLengthFromNoneToNineDigitsIsExact) {
  EXPECT_EQ(Parse("2026-11-22T04:37:38Z"), kBase);
  EXPECT_EQ(Parse("2026-11-22T04:37:38.5Z"), kBase + 500000000);
  EXPECT_EQ(Parse("2026-11-22T04:37:38.41Z"), kBase + 410000000);
  EXPECT_EQ(Parse("2026-11-22T04:37:38.417Z"), kBase + 417000000);
  EXPECT_EQ(Parse("2026-11-22T04:37:38.4175Z"), kBase + 417500000);
  EXPECT_EQ(Parse("2026-11-22T04:37:38.41756Z"), kBase + 417560000);
  EXPECT_EQ(Parse("2026-11-22T04:37:38.417560Z"), kBase + 417560000);
  EXPECT_EQ(Parse("2026-11-22T04:37:38.4175603Z"), kBase + 417560300);
  EXPECT_EQ(Parse("2026-11-22T04:37:38.41756031Z"), kBase + 417560310);
  EXPECT_EQ(Parse("2026-11-22T04:37:38.417560310Z"), kBase + 417560310);
  EXPECT_EQ(Parse("2026-11-22T04:37:38.123456789Z"), kBase + 123456789);
}

TEST(ParseTimestamp, TheSameInstantSpelledDifferentlyIsEqual) {
  // `docker inspect` (trailing zeros dropped) vs `docker logs` (9 digits)
  // vs a numeric offset.
  const int64_t a = Parse("2026-11-22T04:37:38.41756031Z");
  EXPECT_EQ(Parse("2026-11-22T04:37:38.417560310Z"), a);
  EXPECT_EQ(Parse("2026-11-22T04:37:38.417560310+00:00"), a);
  EXPECT_EQ(Parse("2026-11-22T05:37:38.41756031+01:00"), a);
  EXPECT_EQ(Parse("2026-11-21T23:07:38.41756031-05:30"), a);
  EXPECT_EQ(Parse("2026-11-22t04:37:38.41756031z"), a);
}

TEST(ParseTimestamp, OrderFollowsTimeAcrossSpellings) {
  EXPECT_LT(Parse("2026-11-22T04:37:38.5Z"), Parse("2026-11-22T04:37:38.500000001Z"));
  EXPECT_LT(Parse("2026-11-22T04:37:38.499999999Z"), Parse("2026-11-22T04:37:38.5Z"));
  EXPECT_LT(Parse("2026-11-22T04:37:38Z"), Parse("2026-11-22T04:37:38.000000001Z"));
  EXPECT_LT(Parse("2026-11-22T04:37:59.999999999Z"), Parse("2026-11-22T04:38:00Z"));
  // An offset can reorder what string comparison would get wrong.
  EXPECT_LT(Parse("2026-11-22T05:00:00+02:00"), Parse("2026-11-22T04:00:00Z"));
}

TEST(ParseTimestamp, CalendarRulesAreApplied) {
  EXPECT_EQ(Parse("2024-02-29T00:00:00Z") + 86400 * kSecond, Parse("2024-03-01T00:00:00Z"));
  EXPECT_EQ(Parse("2000-02-29T00:00:00Z") + 86400 * kSecond, Parse("2000-03-01T00:00:00Z"));
  EXPECT_EQ(Parse("2026-12-31T23:59:59Z") + kSecond, Parse("2027-01-01T00:00:00Z"));
  EXPECT_FALSE(ParseTimestamp("2026-02-29T00:00:00Z").ok());
  EXPECT_FALSE(ParseTimestamp("2100-02-29T00:00:00Z").ok());
  EXPECT_FALSE(ParseTimestamp("2026-04-31T00:00:00Z").ok());
}

TEST(ParseTimestamp, TimesBeforeTheEpochAreNegative) {
  EXPECT_EQ(Parse("1969-12-31T23:59:59.5Z"), -kSecond / 2);
  EXPECT_EQ(Parse("1969-12-31T23:59:59.999999999Z"), -1);
}

TEST(ParseTimestamp, TheInt64RangeIsExactAtBothEnds) {
  EXPECT_EQ(Parse("2262-04-11T23:47:16.854775807Z"), std::numeric_limits<int64_t>::max());
  EXPECT_FALSE(ParseTimestamp("2262-04-11T23:47:16.854775808Z").ok());
  EXPECT_EQ(Parse("1677-09-21T00:12:43.145224192Z"), std::numeric_limits<int64_t>::min());
  EXPECT_FALSE(ParseTimestamp("1677-09-21T00:12:43.145224191Z").ok());
  Result<int64_t> zero = ParseTimestamp(kDockerZeroTime);
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("outside the range"), std::string::npos);
}

TEST(ParseTimestamp, InvalidStampsAreErrorsThatQuoteTheInput) {
  for (std::string_view bad : {
           "", "2026", "2026-11-22", "2026-11-22T04:37:38", "2026-11-22 04:37:38Z",
           "2026-11-22T04:37:38.Z", "2026-11-22T04:37:38.1234567890Z", "2026-11-22T04:37:38.5",
           "2026-11-22T04:37:38+0000", "2026-11-22T04:37:38+00", "2026-11-22T04:37:38Z ",
           " 2026-11-22T04:37:38Z", "2026-13-01T00:00:00Z", "2026-00-01T00:00:00Z",
           "2026-11-00T00:00:00Z", "2026-11-22T24:00:00Z", "2026-11-22T04:60:00Z",
           "2026-11-22T04:37:60Z", "2026-11-22T04:37:38+24:00", "2026-11-22T04:37:38+01:60",
           "2026-1-22T04:37:38Z", "2026-11-22T04:37:38.5ZZ", "2026-11-22T04:37:3aZ",
           "+026-11-22T04:37:38Z", "line 0"}) {
    Result<int64_t> r = ParseTimestamp(bad);
    ASSERT_FALSE(r.ok()) << "accepted: \"" << bad << "\"";
    EXPECT_NE(r.status().message().find("\"" + std::string(bad) + "\""), std::string::npos)
        << r.status().message();
  }
}

TEST(FormatTimestamp, WritesUtcWithNineFractionDigits) {
  EXPECT_EQ(FormatTimestamp(0), "1970-01-01T00:00:00.000000000Z");
  EXPECT_EQ(FormatTimestamp(kBase + 417560310), "2026-11-22T04:37:38.417560310Z");
  EXPECT_EQ(FormatTimestamp(-1), "1969-12-31T23:59:59.999999999Z");
  EXPECT_EQ(FormatTimestamp(std::numeric_limits<int64_t>::max()),
            "2262-04-11T23:47:16.854775807Z");
  EXPECT_EQ(FormatTimestamp(std::numeric_limits<int64_t>::min()),
            "1677-09-21T00:12:43.145224192Z");
}

TEST(FormatTimestamp, RoundTripsThroughParseTimestamp) {
  const int64_t samples[] = {0,
                             1,
                             -1,
                             kBase,
                             kBase + 5,
                             951782400LL * kSecond,  // 2000-02-29
                             -2208988800LL * kSecond + 123,  // 1900-01-01
                             std::numeric_limits<int64_t>::max(),
                             std::numeric_limits<int64_t>::min()};
  for (int64_t ns : samples) {
    EXPECT_EQ(Parse(FormatTimestamp(ns)), ns) << FormatTimestamp(ns);
  }
  // And a sweep of days from 1860 to 2243, across leap and century years,
  // at an odd time of day.
  for (int64_t day = -40000; day < 100000; day += 97) {
    const int64_t ns = day * 86400 * kSecond + 37 * kSecond + 999;
    EXPECT_EQ(Parse(FormatTimestamp(ns)), ns) << FormatTimestamp(ns);
  }
}

}  // namespace
}  // namespace barge::container
