// The bad job file corpus: tests/bad_jobs/NN-short-name.yaml, each with the
// exact errors it must produce in NN-short-name.expected (one ToString()
// line per error). Files are named relative to the source root, as a user
// running `barge run tests/bad_jobs/...` from there would see them.
//
// A case whose input is too big to keep in git has only its .expected file;
// its input is generated here (see Generated()).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "runner/jobfile/job_file.h"

namespace barge::runner {
namespace {

namespace fs = std::filesystem;

const fs::path kRoot = BARGE_SOURCE_DIR;
const fs::path kCorpus = kRoot / "tests" / "bad_jobs";

// Inputs generated rather than stored, by case name.
std::map<std::string, std::string> Generated() {
  std::string big = "name: big\nimage: debian:12\ncontainer:\n  env:\n";
  for (int i = 0; big.size() < 10 * 1024 * 1024; ++i) {
    big += "    VAR_" + std::to_string(i) + ": \"some value that is fairly long\"\n";
  }
  return {{"26-ten-megabytes", big}};
}

std::vector<std::string> CaseNames() {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(kCorpus)) {
    if (entry.path().extension() == ".expected") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class BadJobCorpus : public ::testing::TestWithParam<std::string> {};

TEST_P(BadJobCorpus, ProducesExactlyTheExpectedErrorsAndNoSpec) {
  const std::string name = GetParam();
  const fs::path input = kCorpus / (name + ".yaml");
  std::string text;
  if (fs::exists(input)) {
    text = ReadAll(input);
  } else {
    auto generated = Generated();
    ASSERT_TRUE(generated.contains(name)) << name << ": no .yaml and no generator";
    text = generated.at(name);
  }
  const std::string shown = "tests/bad_jobs/" + name + ".yaml";
  LoadedJob job = ParseJobText(text, shown, kCorpus.string());
  EXPECT_FALSE(job.spec.has_value());
  std::string actual;
  for (const JobFileError& e : job.errors) actual += e.ToString() + "\n";
  EXPECT_EQ(actual, ReadAll(kCorpus / (name + ".expected")));
  // Every message names this file (or a file beside it) and a line.
  for (const JobFileError& e : job.errors) {
    EXPECT_EQ(e.file.rfind("tests/bad_jobs/", 0), 0u) << e.ToString();
    EXPECT_GE(e.line, 1) << e.ToString();
    EXPECT_GE(e.column, 1) << e.ToString();
  }
}

std::string TestName(const ::testing::TestParamInfo<std::string>& info) {
  std::string out = "_" + info.param;
  std::replace(out.begin(), out.end(), '-', '_');
  return out;
}

INSTANTIATE_TEST_SUITE_P(Corpus, BadJobCorpus, ::testing::ValuesIn(CaseNames()), TestName);

TEST(BadJobCorpusFiles, HasAtLeastFortyCasesEachWithAnInputAndExpectedErrors) {
  std::vector<std::string> names = CaseNames();
  EXPECT_GE(names.size(), 40u);
  auto generated = Generated();
  for (const std::string& name : names) {
    EXPECT_TRUE(fs::exists(kCorpus / (name + ".yaml")) || generated.contains(name)) << name;
    EXPECT_FALSE(ReadAll(kCorpus / (name + ".expected")).empty()) << name;
  }
  // No input without its expectations.
  for (const auto& entry : fs::directory_iterator(kCorpus)) {
    if (entry.path().extension() != ".yaml") continue;
    fs::path expected = entry.path();
    expected.replace_extension(".expected");
    EXPECT_TRUE(fs::exists(expected)) << entry.path();
  }
}

}  // namespace
}  // namespace barge::runner
