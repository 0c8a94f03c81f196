// The job file's JSON Schema: generated from the validator's key tables.
// (That samples validate and bad files fail against it, with a real
// validator, is tests/cli/schema_test.sh.)
#include "runner/jobfile/job_schema.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <regex>

#include "runner/jobfile/units.h"

#include "runner/jobfile/job_keys.h"

namespace barge::runner {
namespace {

using Json = nlohmann::json;

// Every property below `schema`, with its path.
void Properties(const Json& schema, const std::string& path,
                std::vector<std::pair<std::string, Json>>* out) {
  if (!schema.is_object()) return;
  if (schema.contains("properties")) {
    for (const auto& [key, value] : schema["properties"].items()) {
      out->emplace_back(path + key, value);
      Properties(value, path + key + ".", out);
    }
  }
  for (const char* nested : {"items", "additionalProperties"}) {
    if (schema.contains(nested)) Properties(schema[nested], path, out);
  }
  if (schema.contains("anyOf")) {
    for (const Json& s : schema["anyOf"]) Properties(s, path, out);
  }
}

TEST(JobSchema, IsDraft2020JsonWithEveryTopLevelKeyOfTheTableAndNoOther) {
  Json schema = Json::parse(JobSchemaJson());
  EXPECT_EQ(schema["$schema"], "https://json-schema.org/draft/2020-12/schema");
  EXPECT_EQ(schema["additionalProperties"], false);
  std::vector<KeyInfo> keys = JobFileKeys();
  EXPECT_EQ(schema["properties"].size(), keys.size());
  for (const KeyInfo& k : keys) EXPECT_TRUE(schema["properties"].contains(std::string(k.key))) << k.key;
  EXPECT_EQ(schema["required"], Json::array({"name"}));
}

TEST(JobSchema, EveryKeyAtEveryDepthHasADescriptionAndAType) {
  std::vector<std::pair<std::string, Json>> all;
  Properties(Json::parse(JobSchemaJson()), "", &all);
  EXPECT_GT(all.size(), 80u);
  for (const auto& [path, p] : all) {
    EXPECT_FALSE(p.value("description", "").empty()) << path;
    EXPECT_TRUE(p.contains("type") || p.contains("enum") || p.contains("anyOf")) << path;
  }
}

TEST(JobSchema, DefaultsEnumsAndNestedBlocksComeFromTheTables) {
  Json schema = Json::parse(JobSchemaJson());
  const Json& p = schema["properties"];
  EXPECT_EQ(p["image_pull"]["default"], "missing");
  EXPECT_EQ(p["image_pull"]["enum"], Json::array({"always", "missing", "never", "push", "push-direct"}));
  EXPECT_EQ(p["stop_grace"]["default"], "10s");
  EXPECT_EQ(p["rendezvous"]["properties"]["port"]["default"], 29500);
  EXPECT_EQ(p["ssh"]["properties"]["host_key_checking"]["enum"],
            Json::array({"strict", "accept-new", "off"}));
  // A port is a number or a string of digits, as barge reads `port: "22"`.
  EXPECT_EQ(p["ssh"]["properties"]["port"]["type"], Json::array({"integer", "string"}));
  // Keys a table knows only to say they belong elsewhere are not keys.
  EXPECT_FALSE(p["roles"]["properties"]["head"]["properties"].contains("count"));
  EXPECT_TRUE(p["roles"]["properties"]["worker"]["properties"].contains("count"));
  EXPECT_EQ(p["hosts"]["items"]["anyOf"][1]["required"], Json::array({"address"}));
}

// The schema's sizes and durations are what the validator accepts, so an
// editor (and the docs check) refuse `shm_size: lots` or `timeout: 10`
// as barge does: the patterns are matched against IsSize and
// ParseDuration on the same samples.
TEST(JobSchema, SizeAndDurationPatternsAcceptExactlyWhatTheValidatorDoes) {
  Json schema = Json::parse(JobSchemaJson());
  const Json& shm = schema["properties"]["container"]["properties"]["shm_size"];
  const Json& size_string = shm["anyOf"][1];
  ASSERT_EQ(size_string["type"], "string") << shm.dump();
  const std::regex size(size_string["pattern"].get<std::string>());
  for (const char* text : {"1024", "512m", "2g", "2GB", "1.5g", "4KiB", "1 g", "7b", "3tb", "1p", "16 gigs", "-1g",
                           "1bb", "", "1 ", "1gi", "g", "1.g", ".5g", "1kib", "2 GiB"}) {
    EXPECT_EQ(std::regex_match(text, size), IsSize(text)) << "'" << text << "'";
  }
  EXPECT_EQ(shm["anyOf"][0]["minimum"], 0);
  const Json& timeout = schema["properties"]["timeout"];
  ASSERT_EQ(timeout["type"], "string") << timeout.dump();
  const std::regex duration(timeout["pattern"].get<std::string>());
  for (const char* text : {"10s", "500ms", "1h30m", "1.5h", "1d", "10", "", "10 s", "s", "1w", "-1s", "1h30", "2m3s"}) {
    EXPECT_EQ(std::regex_match(text, duration), ParseDuration(text).ok()) << "'" << text << "'";
  }
}

}  // namespace
}  // namespace barge::runner
