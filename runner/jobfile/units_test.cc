#include "runner/jobfile/units.h"

#include <gtest/gtest.h>

namespace barge::runner {
namespace {

using std::chrono::milliseconds;

TEST(Size, AcceptsWhatDockerAcceptsWithOneObviousMeaning) {
  for (const char* s : {"0", "1024", "512m", "1g", "2g", "2GB", "2gb", "1.5g", "4KiB", "4kib",
                        "100b", "100B", "1 g", "3T", "1p", "7M"}) {
    EXPECT_TRUE(IsSize(s)) << s;
  }
}

TEST(Size, RejectsWordsSignsDoubledUnitsAndEmptyText) {
  for (const char* s :
       {"", "16 gigs", "-1g", "1bb", "1gi", "g", ".5g", "1.g", "1  g", "1 ", "lots", "1e9", "1,5g",
        "1g ", " 1g", "1x", "+1g", "123456789012345678901234567890123g"}) {
    EXPECT_FALSE(IsSize(s)) << s;
  }
}

TEST(Size, MessageNamesTheValueAndAnExample) {
  EXPECT_EQ(InvalidSizeMessage("16 gigs"), "invalid size '16 gigs' (expected e.g. 512m, 2g)");
}

TEST(Duration, ParsesEachUnitAndCombinations) {
  EXPECT_EQ(*ParseDuration("10s"), milliseconds(10'000));
  EXPECT_EQ(*ParseDuration("500ms"), milliseconds(500));
  EXPECT_EQ(*ParseDuration("5m"), milliseconds(300'000));
  EXPECT_EQ(*ParseDuration("12h"), milliseconds(12 * 3'600'000LL));
  EXPECT_EQ(*ParseDuration("1d"), milliseconds(86'400'000));
  EXPECT_EQ(*ParseDuration("1h30m"), milliseconds(5'400'000));
  EXPECT_EQ(*ParseDuration("1d2h3m4s5ms"), milliseconds(86'400'000 + 7'200'000 + 180'000 + 4'005));
  EXPECT_EQ(*ParseDuration("0s"), milliseconds(0));
}

TEST(Duration, FractionsAreExactToTheMillisecondAndTruncatedBelow) {
  EXPECT_EQ(*ParseDuration("1.5h"), milliseconds(5'400'000));
  EXPECT_EQ(*ParseDuration("1.25s"), milliseconds(1'250));
  EXPECT_EQ(*ParseDuration("0.0019s"), milliseconds(1));
  EXPECT_EQ(*ParseDuration("2.9ms"), milliseconds(2));
}

TEST(Duration, ABareNumberIsAnErrorThatNamesTheUnits) {
  Result<milliseconds> d = ParseDuration("10");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().message(),
            "invalid duration '10': a unit is required (ms, s, m, h or d, e.g. 10s)");
}

TEST(Duration, RejectsUnknownUnitsSpacesSignsAndRepeats) {
  for (const char* s : {"", "10 s", "10sec", "10S", "-5s", "s", "1.s", "10s ", "1w", "5mm"}) {
    Result<milliseconds> d = ParseDuration(s);
    ASSERT_FALSE(d.ok()) << s;
    EXPECT_EQ(d.status().message(),
              "invalid duration '" + std::string(s) + "' (expected e.g. 500ms, 10s, 5m, 1h30m, 1d)")
        << s;
  }
  EXPECT_EQ(ParseDuration("1m2m").status().message(),
            "invalid duration '1m2m': unit 'm' given twice");
}

TEST(Duration, HugeValuesAreRefusedNotWrappedAround) {
  EXPECT_EQ(ParseDuration("9999999999d").status().message(),
            "invalid duration '9999999999d': too long");
  Result<milliseconds> biggest = ParseDuration("999999999d999999999h");
  ASSERT_TRUE(biggest.ok());
  EXPECT_GT(biggest->count(), 0);
}

}  // namespace
}  // namespace barge::runner
