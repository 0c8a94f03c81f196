// ParseSeedSetting and TestSeed's order: the test's own variable, then
// BARGE_TEST_SEED, then the fixed default.
#include "tests/test_seed.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace barge::testing {
namespace {

TEST(SeedSetting, ANumberOrRandomIsASettingAndAnythingElseIsNot) {
  EXPECT_EQ(ParseSeedSetting("42")->value, 42u);
  EXPECT_FALSE(ParseSeedSetting("42")->random);
  EXPECT_EQ(ParseSeedSetting("18446744073709551615")->value, 18446744073709551615ull);
  EXPECT_TRUE(ParseSeedSetting("random")->random);
  for (const char* bad : {"", "-1", "+1", "12x", "0x10", "Random", " 1", "18446744073709551616"}) {
    EXPECT_FALSE(ParseSeedSetting(bad).has_value()) << bad;
  }
  EXPECT_FALSE(ParseSeedSetting(nullptr).has_value());
}

class TestSeedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : {"BARGE_TEST_SEED", "BARGE_OWN_SEED"}) {
      if (const char* old = std::getenv(v)) saved_.emplace_back(v, old);
      unsetenv(v);
    }
  }
  void TearDown() override {
    unsetenv("BARGE_TEST_SEED");
    unsetenv("BARGE_OWN_SEED");
    for (const auto& [k, v] : saved_) setenv(k.c_str(), v.c_str(), 1);
  }
  std::vector<std::pair<std::string, std::string>> saved_;
};

TEST_F(TestSeedTest, WithoutVariablesTheFixedDefaultIsUsedSoCiRunsTheSameCases) {
  EXPECT_EQ(TestSeed(7), 7u);
  EXPECT_EQ(TestSeed(7, "BARGE_OWN_SEED"), 7u);
}

TEST_F(TestSeedTest, TheTestsOwnVariableWinsOverBargeTestSeedWhichWinsOverTheDefault) {
  setenv("BARGE_TEST_SEED", "11", 1);
  EXPECT_EQ(TestSeed(7), 11u);
  EXPECT_EQ(TestSeed(7, "BARGE_OWN_SEED"), 11u);
  setenv("BARGE_OWN_SEED", "13", 1);
  EXPECT_EQ(TestSeed(7, "BARGE_OWN_SEED"), 13u);
  EXPECT_EQ(TestSeed(7), 11u);
}

TEST_F(TestSeedTest, RandomGivesSeedsThatDifferFromTheDefaultAndFromEachOther) {
  setenv("BARGE_TEST_SEED", "random", 1);
  const uint64_t a = TestSeed(7), b = TestSeed(7), c = TestSeed(7);
  // Three 64-bit draws: all equal to each other or to 7 has odds of ~2^-64.
  EXPECT_FALSE(a == b && b == c) << a;
  EXPECT_NE(a, 7u);
}

TEST_F(TestSeedTest, AMistypedValueStopsTheTestProgramInsteadOfRunningTheDefault) {
  setenv("BARGE_TEST_SEED", "12x", 1);
  EXPECT_DEATH(TestSeed(7), "BARGE_TEST_SEED=12x: not a seed");
}

}  // namespace
}  // namespace barge::testing
