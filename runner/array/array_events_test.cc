#include "runner/array/array_events.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

namespace barge::runner::array {
namespace {

std::vector<nlohmann::json> Lines(std::FILE* f) {
  std::rewind(f);
  std::string text;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
  std::vector<nlohmann::json> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

TEST(ArrayEventStream, EachCallIsOneJsonLineInTheJobEventEnvelopeWithTheMembersFields) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  ArrayEventStream events(f, "arr1");
  const TimePoint t0 = TimePoint(std::chrono::milliseconds(1700000000000));
  events.ArrayStarted(2, 2, 1, t0);
  events.MemberStarted(0, "job0", 1, "local", t0 + std::chrono::milliseconds(1));
  events.MemberEnded(0, "job0", 1, 7, "retrying", 0, t0 + std::chrono::milliseconds(2));
  events.MemberStarted(0, "job0b", 2, "local", t0 + std::chrono::milliseconds(3));
  events.MemberEnded(0, "job0b", 2, 0, "succeeded", 1, t0 + std::chrono::milliseconds(4));
  events.ArrayEnded("failed", 125, "succeeded 1, failed 1", t0 + std::chrono::milliseconds(5));
  std::vector<nlohmann::json> ev = Lines(f);
  std::fclose(f);
  ASSERT_EQ(ev.size(), 6u);
  for (const auto& e : ev) {
    EXPECT_EQ(e["type"], "event");
    EXPECT_EQ(e["array"], "arr1");
    EXPECT_TRUE(e["at"].is_string());
    EXPECT_TRUE(e["detail"].is_string());
  }
  EXPECT_EQ(ev[0]["at"], "2023-11-14T22:13:20.000Z");
  EXPECT_EQ(ev[0]["kind"], "array_started");
  EXPECT_EQ(ev[0]["size"], 2);
  EXPECT_EQ(ev[1]["kind"], "member_started");
  EXPECT_EQ(ev[1]["index"], 0);
  EXPECT_EQ(ev[1]["job"], "job0");
  EXPECT_EQ(ev[2]["kind"], "member_ended");
  EXPECT_EQ(ev[2]["exit_code"], 7);
  EXPECT_EQ(ev[2]["status"], "retrying");
  EXPECT_EQ(ev[4]["retries"], 1);
  EXPECT_EQ(ev[4]["attempt"], 2);
  EXPECT_EQ(ev[5]["kind"], "failed");
  EXPECT_EQ(ev[5]["exit_code"], 125);
}

}  // namespace
}  // namespace barge::runner::array
