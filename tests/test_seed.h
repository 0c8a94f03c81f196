// The seed of a random or property test, the same way for every test:
//
//   1. the test's own variable, where it has one (BARGE_INJECTION_SEED=N);
//   2. BARGE_TEST_SEED=N, for every seeded test of the run;
//      BARGE_TEST_SEED=random: a fresh seed each (for longer local runs);
//   3. otherwise the test's fixed default, so that a run with neither (CI)
//      does the same cases every time and never fails by chance.
//
// TestSeed() prints the seed it chose and the variable that reruns it, on
// stdout (ctest --output-on-failure shows it beside the failure). Header-only,
// for tests.
#pragma once

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>

namespace barge::testing {

// A seed variable's value: a decimal number (nullopt when it is not one),
// or "random". Pure, for its own tests.
struct SeedSetting {
  bool random = false;
  uint64_t value = 0;
};
inline std::optional<SeedSetting> ParseSeedSetting(const char* text) {
  if (text == nullptr || *text == '\0') return std::nullopt;
  if (std::string(text) == "random") return SeedSetting{true, 0};
  for (const char* c = text; *c != '\0'; ++c) {
    if (*c < '0' || *c > '9') return std::nullopt;
  }
  errno = 0;
  const unsigned long long v = std::strtoull(text, nullptr, 10);
  if (errno == ERANGE) return std::nullopt;
  return SeedSetting{false, v};
}

// The seed for the running test (printed with its name), from
// `own_variable` (may be nullptr), BARGE_TEST_SEED or `fixed_default`, in
// that order. A variable
// set to something else than a number or "random" aborts the test program
// with a message: a typo must not silently run the default.
inline uint64_t TestSeed(uint64_t fixed_default, const char* own_variable = nullptr) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string name =
      info == nullptr ? "(no test)" : std::string(info->test_suite_name()) + "." + info->name();
  const char* source = "fixed default";
  uint64_t seed = fixed_default;
  for (const char* variable : {own_variable, "BARGE_TEST_SEED"}) {
    if (variable == nullptr) continue;
    const char* text = std::getenv(variable);
    if (text == nullptr || *text == '\0') continue;
    std::optional<SeedSetting> s = ParseSeedSetting(text);
    if (!s) {
      std::fprintf(stderr, "%s=%s: not a seed (a decimal number, or \"random\")\n", variable, text);
      std::abort();
    }
    seed = s->random ? (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}()
                     : s->value;
    source = variable;
    break;
  }
  const char* rerun = own_variable != nullptr ? own_variable : "BARGE_TEST_SEED";
  std::printf("[seed] %s: %llu (%s; rerun with %s=%llu)\n", name.c_str(),
              static_cast<unsigned long long>(seed), source, rerun,
              static_cast<unsigned long long>(seed));
  std::fflush(stdout);
  return seed;
}

}  // namespace barge::testing
