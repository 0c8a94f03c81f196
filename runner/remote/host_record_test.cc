#include "runner/remote/host_record.h"

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace barge::runner {
namespace {

constexpr long long kNow = 1'800'000'000;  // the fake clock: a host's "now"

FaultEntry Entry(long long at, std::string kind = "engine", std::optional<int> gpu = std::nullopt,
                 std::string serial = "") {
  FaultEntry e;
  e.at = at;
  e.kind = std::move(kind);
  e.job_id = "j" + std::to_string(at);
  e.user = "alice";
  e.gpu = gpu;
  e.serial = std::move(serial);
  e.name = std::string(kFaultPrefix) + std::to_string(at);
  return e;
}

TEST(RecordRule, AHostIsOutWithMoreThanTheAllowedFailuresInTheWindow) {
  const RecordRule rule;  // the defaults: more than 1 in 24h
  EXPECT_FALSE(JudgeRecord({Entry(kNow - 60)}, kNow, rule).host_out);
  RecordVerdict v = JudgeRecord({Entry(kNow - 60), Entry(kNow - 3600, "host_lost")}, kNow, rule);
  EXPECT_TRUE(v.host_out);
  ASSERT_EQ(v.counted.size(), 2u);
  EXPECT_EQ(v.counted[0].at, kNow - 60);  // newest first
  // allowed: 2 lets the same two through.
  EXPECT_FALSE(JudgeRecord({Entry(kNow - 60), Entry(kNow - 3600)}, kNow, {2, std::chrono::hours(24)}).host_out);
}

TEST(RecordRule, FailuresOutsideTheWindowDoNotCountAndTheWindowMovesWithTheClock) {
  const RecordRule rule{1, std::chrono::hours(1)};
  const std::vector<FaultEntry> record = {Entry(kNow - 600), Entry(kNow - 3000)};
  EXPECT_TRUE(JudgeRecord(record, kNow, rule).host_out);
  // 1 h after the older one (exactly at the window's edge): it no longer counts.
  EXPECT_FALSE(JudgeRecord(record, kNow - 3000 + 3600, rule).host_out);
  EXPECT_EQ(JudgeRecord(record, kNow - 3000 + 3600, rule).counted.size(), 1u);
  EXPECT_TRUE(JudgeRecord(record, kNow - 3000 + 3599, rule).host_out);
  // A window over the record's own age limit is held to it.
  const RecordRule long_window{0, std::chrono::seconds(kRecordMaxAge * 2)};
  EXPECT_FALSE(JudgeRecord({Entry(kNow - kRecordMaxAge - 1)}, kNow, long_window).host_out);
  EXPECT_TRUE(JudgeRecord({Entry(kNow - kRecordMaxAge + 1)}, kNow, long_window).host_out);
}

TEST(RecordRule, AForgivenessClearsEveryEarlierFailureButNotLaterOnes) {
  const RecordRule rule;
  std::vector<FaultEntry> record = {Entry(kNow - 600), Entry(kNow - 500), Entry(kNow - 400, std::string(kForgivenKind))};
  RecordVerdict v = JudgeRecord(record, kNow, rule);
  EXPECT_FALSE(v.host_out);
  EXPECT_TRUE(v.counted.empty());
  ASSERT_TRUE(v.forgiven.has_value());
  EXPECT_EQ(v.forgiven->at, kNow - 400);
  record.push_back(Entry(kNow - 300));
  record.push_back(Entry(kNow - 200));
  EXPECT_TRUE(JudgeRecord(record, kNow, rule).host_out);
}

TEST(RecordRule, AGpuEntryTakesOutItsGpuNotTheHostUnlessTheGpuWasReplaced) {
  const RecordRule rule;
  const std::vector<FaultEntry> record = {Entry(kNow - 60, "gpu_health", 1, "S-1"),
                                          Entry(kNow - 70, "gpu_health", 1, "S-1"),
                                          Entry(kNow - 80, "gpu_health", 3, "S-3")};
  RecordVerdict v = JudgeRecord(record, kNow, rule);
  EXPECT_FALSE(v.host_out);
  ASSERT_EQ(v.gpus_out.size(), 2u);
  EXPECT_EQ(v.gpus_out.at(1).at, kNow - 60);  // its newest entry
  // GPU 3 has another serial now: a new board, not the one that failed.
  v = JudgeRecord(record, kNow, rule, {{1, "S-1"}, {3, "S-9"}});
  EXPECT_EQ(v.gpus_out.size(), 1u);
  EXPECT_EQ(v.gpus_out.count(1), 1u);
  // Out of the window, the GPU is back.
  EXPECT_TRUE(JudgeRecord(record, kNow + 86400, rule).gpus_out.empty());
}

TEST(RecordRule, TheReasonNamesTheRecordTheRuleAndHowToClearIt) {
  const RecordRule rule;
  FaultEntry a = Entry(kNow - 60);
  a.detail = "docker did not answer within ssh.engine_timeout";
  a.job_name = "train";
  const std::string why = OutReason("h2", JudgeRecord({a, Entry(kNow - 120, "hang")}, kNow, rule), rule);
  EXPECT_NE(why.find("2 host-caused failure(s) in the last 24h00m"), std::string::npos) << why;
  EXPECT_NE(why.find("more than the 1 allowed (health.host_failures)"), std::string::npos) << why;
  EXPECT_NE(why.find("engine "), std::string::npos) << why;
  EXPECT_NE(why.find("train (alice): docker did not answer"), std::string::npos) << why;
  EXPECT_NE(why.find("hang "), std::string::npos) << why;
  EXPECT_NE(why.find("`barge hosts --forgive h2` clears it"), std::string::npos) << why;
}

// What the record keeps of a host's failed phase: an engine that does not
// answer, never a host that does not fit the job.
TEST(RecordedFailure, AnEngineThatDoesNotAnswerIsRecordedAHostThatDoesNotFitTheJobIsNot) {
  const auto kind = [](std::string_view phase, std::string_view outcome, bool reached = true) {
    const std::optional<HostFaultKind> k = RecordedFailureOf(phase, outcome, reached);
    return k ? std::string(NameOf(kHostFaultKindNames, *k)) : std::string("-");
  };
  EXPECT_EQ(kind("preflight", "the Docker engine did not answer within 2 s, 1 time(s) in a row (ssh.engine_timeout, "
                              "ssh.engine_misses)"),
            "engine");
  EXPECT_EQ(kind("preflight", "cannot reserve the host (a hold container on its engine): no answer from the engine "
                              "within 2s"),
            "engine");
  EXPECT_EQ(kind("preflight", "preflight did not finish: the session was lost"), "engine");
  // A host without the GPUs, without an engine the user may use, with a full
  // disk; the job's own image: none of them is the host failing.
  EXPECT_EQ(kind("preflight", "GPUs requested but unavailable: docker: Error response from daemon: could not select "
                              "device driver \"\" with capabilities: [[gpu]]."),
            "-");
  EXPECT_EQ(kind("preflight", "docker is not reachable: sh: 1: docker: not found"), "-");
  EXPECT_EQ(kind("preflight", "docker is not reachable: permission denied while trying to connect to the Docker daemon "
                              "socket"),
            "-");
  EXPECT_EQ(kind("preflight", "disk full: /var/lib/docker has 12 MB free"), "-");
  EXPECT_EQ(kind("preflight", "image not found: busybox:nope"), "-");
  EXPECT_EQ(kind("preflight", "cannot reserve the host (a hold container on its engine): held by job 1a2b"), "-");
  EXPECT_EQ(kind("preflight", "ok"), "-");
  // A connect failure: only of a host the job had reached before.
  EXPECT_EQ(kind("connect", "cannot connect to 10.77.0.9:22: connection refused", false), "-");
  EXPECT_EQ(kind("connect", "cannot connect to 10.77.0.9:22: timed out", true), "connect");
  EXPECT_EQ(kind("upload", "the Docker engine did not answer within 2 s"), "-") << "not a phase the record reads";
}

TEST(FaultDetail, IsOneBoundedLineCutAtACharactersStart) {
  EXPECT_EQ(FaultDetail("a\nb\t\tc\r\n"), "a b c");
  const std::string long_text = std::string(kFaultDetailMax - 1, 'x') + "é and more";
  const std::string d = FaultDetail(long_text);
  EXPECT_LE(d.size(), kFaultDetailMax);
  EXPECT_EQ(d, std::string(kFaultDetailMax - 1, 'x'));  // not half of é
}

TEST(HostRecordListing, EntriesAreReadFromTheHoldsListingAndStandInNobodysWay) {
  // The listing's line of an entry: no barge.job, barge.hold.gpus the GPU.
  const std::string text =
      "now 2000\n"
      "hold\tf1\tbarge-fault-1990-j9-0-0\t\ttrain\tbob\tbox2\t2\t1990\t\t\t\tgpu_health\tj9\tS-2\tXid 79\n"
      "hold\tf2\tbarge-fault-1995-j8-0-0\t\teval\tbob\tbox2\t\t1995\t\t\t\tengine\tj8\t\tno answer\n";
  HoldReply r = ParseHoldReply(text);
  ASSERT_EQ(r.holds.size(), 2u);
  EXPECT_TRUE(IsFault(r.holds[0]));
  EXPECT_FALSE(IsStale(r.holds[0], 1'000'000'000'000));  // never stale: no job, no lease
  EXPECT_TRUE(Conflicts(HoldRequest{}, r, "mine").empty());  // an exclusive job takes the host
  const std::vector<FaultEntry> record = RecordOf(r.holds);
  ASSERT_EQ(record.size(), 2u);
  EXPECT_EQ(record[0].at, 1995);  // newest first
  EXPECT_EQ(record[0].kind, "engine");
  EXPECT_EQ(record[0].job_id, "j8");
  EXPECT_FALSE(record[0].gpu.has_value());
  EXPECT_EQ(record[1].gpu, 2);
  EXPECT_EQ(record[1].serial, "S-2");
  EXPECT_EQ(record[1].detail, "Xid 79");
  EXPECT_EQ(record[1].job_name, "train");
}

// The writing shell run by sh against bench/emu/fake-docker (an emulated
// engine: atomic names, templated ps with label filters, rm by ID).
class RecordScriptRun : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() / ("barge-record-" + std::to_string(getpid()));
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_ / "engine");
    std::ofstream(root_ / "docker") << "#!/bin/sh\nFAKE_DOCKER_ROOT=" << (root_ / "engine").string() << " exec "
                                    << BARGE_SOURCE_DIR << "/bench/emu/fake-docker \"$@\"\n";
    std::filesystem::permissions(root_ / "docker", std::filesystem::perms::owner_all);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  DockerCommands Docker() { return DockerCommands({(root_ / "docker").string()}); }
  int Run(const std::string& script, std::string* out = nullptr) {
    std::ofstream(root_ / "s.sh") << script;
    const std::string cmd = "sh " + (root_ / "s.sh").string() + " 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    std::string text;
    char buf[4096];
    for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) text.append(buf, n);
    const int status = pclose(p);
    if (out) *out = text;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  // The record as a job's holds listing reads it.
  std::vector<FaultEntry> Listed() {
    std::string out;
    EXPECT_EQ(Run(ListHoldsScript(Docker(), false, std::chrono::seconds(20)), &out), 0) << out;
    return RecordOf(ParseHoldReply(out).holds);
  }
  std::filesystem::path root_;
};

TEST_F(RecordScriptRun, AnEntryIsWrittenWithItsLabelsAndReadBackByTheHoldsListing) {
  FaultEntry e = Entry(0, "gpu_health", 0, "S-0");
  e.job_id = "1a2b3c4d";
  e.job_name = "train";
  e.machine = "box";
  e.detail = "Xid 79 (GPU has fallen off the bus)\nsecond line";
  std::string out;
  ASSERT_EQ(Run(RecordFaultsNowCommand(Docker(), {e, Entry(0, "engine")}, 1, std::chrono::seconds(20)), &out), 0)
      << out;
  const std::vector<FaultEntry> record = Listed();
  ASSERT_EQ(record.size(), 2u);
  const FaultEntry& gpu = record[0].gpu ? record[0] : record[1];
  EXPECT_EQ(gpu.kind, "gpu_health");
  EXPECT_EQ(gpu.job_id, "1a2b3c4d");
  EXPECT_EQ(gpu.job_name, "train");
  EXPECT_EQ(gpu.user, "alice");
  EXPECT_EQ(gpu.machine, "box");
  EXPECT_EQ(gpu.gpu, 0);
  EXPECT_EQ(gpu.serial, "S-0");
  EXPECT_EQ(gpu.detail, "Xid 79 (GPU has fallen off the bus) second line");
  EXPECT_GT(gpu.at, kNow - 1'000'000'000);  // the host's clock, not the entry's 0
  EXPECT_EQ(gpu.name.rfind(std::string(kFaultPrefix), 0), 0u);
}

TEST_F(RecordScriptRun, AnEntryCarriesNoHoldLabelSoABargeThatListsHoldsByItNeverSeesOne) {
  std::string out;
  ASSERT_EQ(Run(RecordFaultsNowCommand(Docker(), {Entry(0, "engine")}, 1, std::chrono::seconds(20)), &out), 0)
      << out;
  // Barge before the record listed holds by their label and would have
  // taken the entry for a hold that never goes stale.
  ASSERT_EQ(Run(Docker().Line({"ps", "-a", "--filter", "label=barge.hold", "--format", "{{.Names}}"}), &out), 0);
  EXPECT_EQ(out, "");
  EXPECT_EQ(Listed().size(), 1u);
}

TEST_F(RecordScriptRun, AContainerOnlyNamedLikeAHoldOrAnEntryIsNeitherToTheListing) {
  std::string out;
  for (const char* name : {"barge-hold-gpu-7", "barge-fault-1-user"}) {
    ASSERT_EQ(Run(Docker().Line({"create", "--name", name, "--label", "owner=someone", "barge/hold:1", "hold"}), &out),
              0)
        << out;
  }
  ASSERT_EQ(Run(RecordFaultsNowCommand(Docker(), {Entry(0, "engine")}, 1, std::chrono::seconds(20)), &out), 0)
      << out;
  ASSERT_EQ(Run(ListHoldsScript(Docker(), false, std::chrono::seconds(20)), &out), 0) << out;
  const HoldReply reply = ParseHoldReply(out);
  ASSERT_EQ(reply.holds.size(), 1u) << out;
  EXPECT_TRUE(IsFault(reply.holds[0]));
  EXPECT_EQ(reply.holds[0].fault_kind, "engine");
}

TEST_F(RecordScriptRun, TheRecordIsCappedByCountAndByAge) {
  std::vector<FaultEntry> many;
  for (size_t i = 0; i < kRecordCap + 5; ++i) many.push_back(Entry(0, "engine"));
  std::string out;
  ASSERT_EQ(Run(RecordFaultsNowCommand(Docker(), many, 1, std::chrono::seconds(20)), &out), 0) << out;
  EXPECT_EQ(Listed().size(), kRecordCap);
  // Age: one entry backdated past kRecordMaxAge goes at the next write.
  const std::filesystem::path victim = *std::filesystem::directory_iterator(root_ / "engine");
  {
    std::ifstream in(victim / "labels");
    std::string all, line;
    while (std::getline(in, line)) {
      if (line.rfind("barge.hold.since=", 0) == 0) line = "barge.hold.since=1000";
      all += line + "\n";
    }
    std::ofstream(victim / "labels") << all;
  }
  ASSERT_EQ(Run(RecordFaultsNowCommand(Docker(), {Entry(0, "hang")}, 2, std::chrono::seconds(20)), &out), 0) << out;
  const std::vector<FaultEntry> record = Listed();
  EXPECT_EQ(record.size(), kRecordCap);
  EXPECT_TRUE(std::none_of(record.begin(), record.end(), [](const FaultEntry& e) { return e.at == 1000; }));
  EXPECT_EQ(record[0].kind, "hang");  // the newest is kept
}

TEST_F(RecordScriptRun, TheBackgroundWriterReturnsAtOnceAndWritesAfterwards) {
  std::string out;
  ASSERT_EQ(Run(RecordFaultsCommand(Docker(), {Entry(0, "host_lost")}, 1, std::chrono::seconds(20)), &out), 0) << out;
  EXPECT_EQ(out, "");  // nothing on the channel
  std::vector<FaultEntry> record;
  for (int i = 0; i < 100 && record.empty(); ++i) {
    usleep(50'000);
    record = Listed();
  }
  ASSERT_EQ(record.size(), 1u);
  EXPECT_EQ(record[0].kind, "host_lost");
}

TEST_F(RecordScriptRun, AnotherJobsHoldTakingLeavesTheRecordAlone) {
  std::string out;
  ASSERT_EQ(Run(RecordFaultsNowCommand(Docker(), {Entry(0, "engine")}, 1, std::chrono::seconds(20)), &out), 0) << out;
  const std::string job = "ut" + std::to_string(getpid()) + "rec";
  std::filesystem::create_directories("/tmp/barge-" + job);
  HoldOwner o;
  o.job_id = job;
  o.job_name = "x";
  o.user = "bob";
  o.machine = "box";
  o.job_dir = "/tmp/barge-" + job;
  ASSERT_EQ(Run(TakeHoldsScript(Docker(), HoldRequest{}, o, std::chrono::seconds(20)), &out), 0) << out;
  HoldReply r = ParseHoldReply(out);
  std::filesystem::remove_all("/tmp/barge-" + job);
  EXPECT_TRUE(r.removed_stale.empty());
  EXPECT_EQ(r.taken, std::vector<std::string>{HostHoldName()});
  EXPECT_EQ(RecordOf(r.holds).size(), 1u);
  EXPECT_TRUE(Conflicts(HoldRequest{}, r, job).empty());
  // Its release takes only what is labelled with its job.
  ASSERT_EQ(Run(ReleaseHoldsCommand(Docker(), job), &out), 0) << out;
  EXPECT_EQ(Listed().size(), 1u);
}

}  // namespace
}  // namespace barge::runner
