// Fuzz target for the job-file parser: any bytes as a job file's text.
//
// Checks, besides "never crashes, hangs or throws":
//   - ParseJobText keeps its contract: a spec exactly when there is no
//     error, and every error placed (line and column from 1) with a message;
//   - the nesting cap is exact: text that yaml-cpp reads more than
//     kMaxNestingDepth collections deep (in the documents the parser looks
//     at) is refused with the nesting message. The text scan alone
//     (FindDeepNesting) cannot promise that: it is an estimate, and
//     runner/jobfile/job_text.h says why it cannot be exact; the parser counts depth
//     on yaml-cpp's own events too. Always on (CI included): the fuzzer's
//     earlier nesting finds were the scan's undercounts, which this cap
//     no longer depends on.
//
// Relative paths in the text resolve against a directory that does not
// exist. Absolute ones (hosts_file, identity files) are looked at on this
// machine, read-only and capped as for any job file; run the fuzzer with
// stdin from /dev/null (scripts/fuzz.sh does).
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <string_view>

#include "runner/jobfile/job_file.h"
#include "runner/jobfile/job_text.h"

namespace {

using barge::runner::FindInvalidUtf8;
using barge::runner::JobFileError;
using barge::runner::kMaxJobFileBytes;
using barge::runner::kMaxNestingDepth;
using barge::runner::LoadedJob;
using barge::runner::NestedTooDeepMessage;
using barge::runner::ParseJobText;

[[noreturn]] void Fail(const char* what, std::string_view detail) {
  std::fprintf(stderr, "job_file_fuzz: %s: %.*s\n", what, static_cast<int>(detail.size()),
               detail.data());
  std::abort();
}

// The most collections yaml-cpp holds open at once while parsing, up to
// where it gives up (it throws on bad syntax; so does Count past a cap).
class DepthProbe : public YAML::EventHandler {
 public:
  struct TooMany {};

  int max_depth() const { return max_depth_; }

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override { Count(); }
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override { Count(); }
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {
    Count();
  }
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    Open();
  }
  void OnSequenceEnd() override { --depth_; }
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    Open();
  }
  void OnMapEnd() override { --depth_; }

 private:
  void Open() {
    Count();
    if (++depth_ > max_depth_) max_depth_ = depth_;
  }
  // As the parser entry does, stop where a job file never goes.
  void Count() {
    if (++nodes_ > 100000) throw TooMany{};
  }

  int depth_ = 0;
  int max_depth_ = 0;
  long long nodes_ = 0;
};

// yaml-cpp's depth of `text` (at most three documents, as the parser
// entry looks at) past kMaxNestingDepth must mean the nesting error.
void CheckNestingCap(std::string_view text, const LoadedJob& job) {
  DepthProbe probe;
  try {
    std::istringstream in{std::string(text)};
    YAML::Parser parser(in);
    for (int i = 0; i < 3 && parser.HandleNextDocument(probe); ++i) {
    }
  } catch (const DepthProbe::TooMany&) {
  } catch (const YAML::Exception&) {
  }
  if (probe.max_depth() <= kMaxNestingDepth) return;
  const std::string nesting = NestedTooDeepMessage(kMaxNestingDepth);
  for (const JobFileError& e : job.errors) {
    if (e.message == nesting) return;
  }
  Fail("yaml-cpp reads the text deeper than kMaxNestingDepth, and the parser said nothing of it",
       std::to_string(probe.max_depth()) + " levels, " + std::to_string(job.errors.size()) +
           " other error(s)");
}

void CheckContract(const LoadedJob& job) {
  if (job.spec.has_value() == !job.errors.empty()) {
    Fail("spec and errors disagree", job.errors.empty() ? "no error, no spec" : "both");
  }
  for (const JobFileError& e : job.errors) {
    const std::string shown = e.ToString();
    if (e.line < 1 || e.column < 1) Fail("error without a place", shown);
    if (e.message.empty()) Fail("error without a message", shown);
    if (e.file.empty()) Fail("error without a file", shown);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // Never a command: a mutated `hosts_command:` is refused, not run.
  barge::runner::JobLayers layers;
  layers.run_hosts_command = false;
  LoadedJob job = ParseJobText(text, "fuzz.yaml", "/nonexistent/barge-fuzz",
                               barge::runner::SecretValues::kRead, layers);
  CheckContract(job);
  // Only for text the entry would hand to the scan and the parser: within
  // the size cap, without NUL bytes, UTF-8, its byte order mark dropped.
  std::string_view scanned = text;
  if (scanned.substr(0, 3) == "\xEF\xBB\xBF") scanned.remove_prefix(3);
  if (size <= kMaxJobFileBytes && scanned.find('\0') == std::string_view::npos &&
      FindInvalidUtf8(scanned) == std::string_view::npos) {
    CheckNestingCap(scanned, job);
  }
  return 0;
}
