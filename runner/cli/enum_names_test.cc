// Every enum barge spells as text (job-file values, statuses, phases, flags,
// log streams) goes from value to name and back through its one table, and
// the readers and writers built on the tables agree with them.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "base/enum_names.h"
#include "runner/console/color.h"
#include "runner/controller/job_observer.h"
#include "runner/store/array_store.h"
#include "runner/jobfile/job_file.h"
#include "runner/jobfile/job_keys.h"
#include "runner/jobfile/job_spec.h"
#include "runner/store/job_store.h"
#include "runner/logs/log_files.h"
#include "runner/logs/log_sink.h"
#include "runner/jobfile/overrides.h"
#include "ssh/session_options.h"

namespace barge::runner {
namespace {

template <typename E, size_t N>
void ExpectRoundTrip(const EnumTable<E, N>& table) {
  EXPECT_TRUE(ListsEveryValueInOrder(table));
  for (const auto& [value, name] : table) {
    EXPECT_EQ(NameOf(table, value), name);
    EXPECT_EQ(ValueOf(table, name), value) << name;
  }
}

TEST(EnumNames, EveryTableRoundTripsEveryValue) {
  ExpectRoundTrip(kImagePullNames);
  ExpectRoundTrip(kOnWorkerExitNames);
  ExpectRoundTrip(kRestartCauseNames);
  ExpectRoundTrip(ssh::kHostKeyCheckingNames);
  ExpectRoundTrip(kJobStatusNames);
  ExpectRoundTrip(kPhaseNames);
  ExpectRoundTrip(kMemberStatusNames);
  ExpectRoundTrip(kColorModeNames);
  ExpectRoundTrip(kStreamNames);
  ExpectRoundTrip(kOverrideFlags);
}

TEST(EnumNames, JobStatusesParseBackFromTheirNamesAndOtherTextListsThemAll) {
  for (const auto& [status, name] : kJobStatusNames) {
    EXPECT_EQ(std::string(ToString(status)), name);
    Result<JobStatus> parsed = ParseJobStatus(ToString(status));
    ASSERT_TRUE(parsed.ok()) << name;
    EXPECT_EQ(*parsed, status);
  }
  Result<JobStatus> bad = ParseJobStatus("done");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "unknown status 'done' (expected one of: preflight, waiting, pushing, starting, running, "
            "completing, succeeded, failed, cancelled, timed_out, lost)");
}

TEST(EnumNames, PhasesAndMemberStatusesSpellTheirTableNames) {
  for (const auto& [phase, name] : kPhaseNames) EXPECT_EQ(std::string(ToString(phase)), name);
  for (const auto& [status, name] : kMemberStatusNames) {
    EXPECT_EQ(std::string(ToString(status)), name);
    EXPECT_EQ(ParseMemberStatus(std::string(name)), status);
  }
  EXPECT_EQ(ParseMemberStatus("exploded"), MemberStatus::kFailed);
}

TEST(EnumNames, EveryOverrideKindSurvivesARecordedRunRequest) {
  RunRequest request;
  request.file = "job.yaml";
  request.text = "name: x\n";
  request.overrides = {{Override::Kind::kSet, "container.shm_size", "8g"},
                       {Override::Kind::kEnv, "EPOCHS", "3"},
                       {Override::Kind::kHostsFile, "", "/tmp/hosts"},
                       {Override::Kind::kName, "", "again"}};
  Result<RunRequest> back = RunRequestFromJson(RunRequestToJson(request));
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->overrides.size(), kOverrideFlags.size());
  for (size_t i = 0; i < kOverrideFlags.size(); ++i) {
    EXPECT_EQ(back->overrides[i].kind, kOverrideFlags[i].value);
    EXPECT_EQ(back->overrides[i].Flag(), kOverrideFlags[i].name);
    EXPECT_EQ(back->overrides[i].Argument(), request.overrides[i].Argument());
  }
  Result<RunRequest> unknown = RunRequestFromJson(
      R"({"file": "f", "text": "", "overrides": [{"flag": "--sett", "argument": "a=b"}]})");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message(), "recorded run request: unknown flag --sett");
}

TEST(EnumNames, LogFilesReadBackTheStreamTheSinkNamed) {
  for (const auto& [stream, name] : kStreamNames) {
    LogLine line = ParseLogLine("2026-11-24T10:00:00.000000000Z " + std::string(name) + " hello", 0);
    EXPECT_EQ(line.is_stderr, stream == Stream::kStderr) << name;
    EXPECT_EQ(line.text, "hello");
  }
  EXPECT_EQ(ParseLogLine("2026-11-24T10:00:00.000000000Z stdin hello", 0).text,
            "2026-11-24T10:00:00.000000000Z stdin hello");
}

TEST(EnumNames, ColorCompletionsListTheColorModes) {
  EXPECT_EQ(ColorModeWords(), "auto always never");
}

// The job file's readers: every name of an enum key parses to its value.
JobSpec Parse(const std::string& extra) {
  LoadedJob job = ParseJobText("name: t\nimage: busybox\ncommand: [\"true\"]\n" + extra, "job.yaml", "/tmp");
  for (const JobFileError& e : job.errors) ADD_FAILURE() << e.ToString();
  return job.spec.value_or(JobSpec{});
}

TEST(EnumNames, EveryEnumKeysNameReadsAsItsValue) {
  for (const auto& [value, name] : kImagePullNames) {
    EXPECT_EQ(Parse("image_pull: " + std::string(name) + "\n").image_pull, value) << name;
  }
  for (const auto& [value, name] : kOnWorkerExitNames) {
    EXPECT_EQ(Parse("on_worker_exit: " + std::string(name) + "\n").on_worker_exit, value) << name;
  }
  for (const auto& [value, name] : ssh::kHostKeyCheckingNames) {
    EXPECT_EQ(Parse("ssh:\n  host_key_checking: " + std::string(name) + "\n").ssh.host_key_checking, value)
        << name;
  }
  for (const auto& [value, name] : kRestartCauseNames) {
    JobSpec spec = Parse("restart:\n  max_restarts: 1\n  on: [" + std::string(name) + "]\n");
    ASSERT_TRUE(spec.restart.has_value()) << name;
    EXPECT_EQ(spec.restart->on_host_lost, value == RestartCause::kHostLost) << name;
    EXPECT_EQ(spec.restart->on_node_failed, value == RestartCause::kNodeFailed) << name;
    EXPECT_EQ(spec.restart->on_preempted, value == RestartCause::kPreempted) << name;
  }
}

// The key table's choices (what `barge schema` and the docs list) are the
// enum tables' names, in order.
std::vector<std::string> ChoicesOf(const std::vector<KeyInfo>& keys, std::string_view key) {
  for (const KeyInfo& k : keys) {
    if (k.key == key) return std::vector<std::string>(k.doc.choices.begin(), k.doc.choices.end());
  }
  ADD_FAILURE() << "no key " << key;
  return {};
}

template <typename E, size_t N>
std::vector<std::string> Names(const EnumTable<E, N>& table) {
  std::vector<std::string> out;
  for (const auto& [value, name] : table) out.emplace_back(name);
  return out;
}

TEST(EnumNames, TheKeyTableListsTheEnumTablesNames) {
  const std::vector<KeyInfo> top = JobFileKeys();
  EXPECT_EQ(ChoicesOf(top, "image_pull"), Names(kImagePullNames));
  EXPECT_EQ(ChoicesOf(top, "on_worker_exit"), Names(kOnWorkerExitNames));
  auto block = [&](std::string_view key) {
    for (const KeyInfo& k : top) {
      if (k.key == key && k.doc.keys) return k.doc.keys();
    }
    ADD_FAILURE() << "no block " << key;
    return std::vector<KeyInfo>();
  };
  EXPECT_EQ(ChoicesOf(block("ssh"), "host_key_checking"), Names(ssh::kHostKeyCheckingNames));
  EXPECT_EQ(ChoicesOf(block("restart"), "on"), Names(kRestartCauseNames));
}

}  // namespace
}  // namespace barge::runner
