// The GPU health gate on real nvidia-smi outputs (tests/data/nvidia-smi: one
// H100, driver 580.159.04), through the stand-in that replays them
// (standin.sh) where the script itself runs. Failure outputs are edits of
// the real ones, each named where it is made.
#include "runner/remote/gpu_health.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "runner/remote/docker_commands.h"
#include "runner/remote/preflight_script.h"

namespace barge::runner::gpu {
namespace {

const std::string kData = std::string(BARGE_SOURCE_DIR) + "/tests/data/nvidia-smi";
const std::string kH100 = kData + "/driver-580.159.04-h100-80gb-hbm3";

std::string Fixture(const std::string& name) {
  std::ifstream in(kH100 + "/" + name);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs GpuHealthLines (with preflight's section markers) against the
// stand-in under `env`, as sh; the reply's three sections.
struct Run {
  std::optional<SectionText> query, remapped, xid, util;
};
// `lines`: other lines than GpuHealthLines (GpuWatchCommand's).
Run RunScript(const std::string& env, std::chrono::seconds timeout = std::chrono::seconds(10),
              const std::optional<std::string>& lines = std::nullopt) {
  const std::string script = "bs() { echo \"@@barge{ $1\"; }\nbe() { echo; echo \"@@barge} $1 $2\"; }\n" +
                             (lines ? *lines : "echo " + std::string(kPosixShellAnswer) + "\n" +
                                                   GpuHealthLines(kData + "/standin.sh", timeout));
  const std::string path = "/tmp/barge-gpu-health-test-" + std::to_string(getpid()) + ".sh";
  std::ofstream(path) << script;
  std::string out;
  FILE* p = popen((env + " sh " + path + " 2>&1").c_str(), "r");
  char buf[4096];
  for (size_t n; p && (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  if (p) pclose(p);
  unlink(path.c_str());
  PreflightReply reply = ParsePreflightReply(out);
  Run r;
  auto section = [&](const char* name) -> std::optional<SectionText> {
    const PreflightSection* s = reply.Find(name);
    if (!s) return std::nullopt;
    return SectionText{s->exit, s->text};
  };
  r.query = section("gpuq");
  r.remapped = section("gpurm");
  r.xid = section("gpuxid");
  r.util = section("gpuutil");
  return r;
}

GpuReport Report(const Run& r) { return ReadGpuReport(r.query, r.remapped, r.xid); }

constexpr std::chrono::seconds kDay{86400};

TEST(GpuHealth, TheCapturedH100ReadsAsOneHealthyGpuWithItsBusIdAndNoFinding) {
  // The sections as the script frames the captured outputs.
  GpuReport r = ReadGpuReport(SectionText{0, "fields full\n" + Fixture("query-health-nounits.txt")},
                              SectionText{0, Fixture("query-remapped-nounits.txt")},
                              SectionText{0, "uptime 5000.12\nsource dmesg\n" + Fixture("dmesg-xid.txt")});
  ASSERT_TRUE(r.query_ok) << r.query_error;
  ASSERT_EQ(r.gpus.size(), 1u);
  const GpuInfo& g = r.gpus[0];
  EXPECT_EQ(g.index, 0);
  EXPECT_EQ(g.uuid, "GPU-32f94187-cb0a-290d-513a-256680d526a5");
  EXPECT_EQ(g.name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(g.driver, "580.159.04");
  EXPECT_EQ(g.memory_mib, 81559);
  EXPECT_EQ(g.ecc_uncorrected, 0);
  EXPECT_EQ(g.retired_pending, std::nullopt) << "Hopper reads [N/A]";
  EXPECT_EQ(g.mig, "Disabled");
  EXPECT_EQ(g.bus_id, "00000000:00:06.0");
  ASSERT_TRUE(r.remapped.has_value());
  ASSERT_EQ(r.remapped->size(), 1u);
  EXPECT_FALSE((*r.remapped)[0].pending);
  ASSERT_TRUE(r.xids.has_value());
  EXPECT_TRUE(r.xids->empty()) << "the captured log has NVRM lines but no Xid";
  EXPECT_EQ(r.uptime, 5000.12);
  EXPECT_TRUE(Judge(r, 1, kDay).empty()) << FindingsTable({{"h", Judge(r, 1, kDay)}});
}

TEST(GpuHealth, TheScriptAsksTheDriverAndFallsBackToTheBasicFieldsWhenItRefusesOne) {
  GpuReport full = Report(RunScript(""));
  ASSERT_TRUE(full.query_ok) << full.query_error;
  EXPECT_FALSE(full.basic_fields);
  ASSERT_EQ(full.gpus.size(), 1u);
  EXPECT_EQ(full.gpus[0].bus_id, "00000000:00:06.0");
  ASSERT_TRUE(full.remapped.has_value()) << full.remapped_error;
  GpuReport basic = Report(RunScript("STANDIN_REFUSE_FULL=1"));
  ASSERT_TRUE(basic.query_ok) << basic.query_error;
  EXPECT_TRUE(basic.basic_fields);
  ASSERT_EQ(basic.gpus.size(), 1u);
  EXPECT_EQ(basic.gpus[0].uuid, "GPU-32f94187-cb0a-290d-513a-256680d526a5");
  EXPECT_EQ(basic.gpus[0].memory_mib, 81559);
  EXPECT_EQ(basic.gpus[0].ecc_uncorrected, std::nullopt);
}

TEST(GpuHealth, AHungNvidiaSmiIsKilledByItsTimeoutAndPutsTheHostOut) {
  GpuReport r = Report(RunScript("STANDIN_HANG=1", std::chrono::seconds(1)));
  EXPECT_FALSE(r.query_ok);
  EXPECT_NE(r.query_error.find("did not answer in time"), std::string::npos) << r.query_error;
  std::vector<Finding> f = Judge(r, 1, kDay);
  EXPECT_TRUE(HostUnhealthy(f));
}

TEST(GpuHealth, APendingRemapOrUncorrectableEccTakesThatGpuOutNotTheHost) {
  for (const char* env : {"STANDIN_REMAP_PENDING=1", "STANDIN_ECC=2"}) {
    std::vector<Finding> f = Judge(Report(RunScript(env)), 1, kDay);
    EXPECT_EQ(UnhealthyGpus(f), std::vector<int>{0}) << env << "\n" << FindingsTable({{"h", f}});
    EXPECT_FALSE(HostUnhealthy(f)) << env;
  }
  std::vector<Finding> ecc = Judge(Report(RunScript("STANDIN_ECC=2")), 1, kDay);
  EXPECT_NE(FindingsTable({{"h1", ecc}}).find("2 uncorrectable ECC error(s)"), std::string::npos);
}

TEST(GpuHealth, AnXidInTheWindowIsFatalForItsGpuAnOlderOneIsNotAndXid94IsAWarning) {
  // The captured log with Xid lines added in the driver's format for the
  // H100's bus (PCI:0000:00:06): 79 an hour before the check, 48 two days
  // before, 94 a minute before.
  const std::string log = Fixture("dmesg-xid.txt") +
                          "[  172800.100000] NVRM: Xid (PCI:0000:00:06): 48, pid=1, DBE (0x1,0x2)\n"
                          "[  342000.000000] NVRM: Xid (PCI:0000:00:06): 79, pid=1896, GPU has fallen off the bus.\n"
                          "[  345540.000000] NVRM: Xid (PCI:0000:00:06): 94, pid=2001, Contained: SM (0x1)\n";
  GpuReport r = ReadGpuReport(SectionText{0, "fields full\n" + Fixture("query-health-nounits.txt")},
                              SectionText{0, Fixture("query-remapped-nounits.txt")},
                              SectionText{0, "uptime 345600.00\nsource dmesg\n" + log});
  ASSERT_TRUE(r.xids.has_value());
  ASSERT_EQ(r.xids->size(), 3u);
  EXPECT_EQ((*r.xids)[1].code, 79);
  EXPECT_EQ((*r.xids)[1].pci, "0000:00:06");
  std::vector<Finding> f = Judge(r, 1, kDay);
  const std::string table = FindingsTable({{"gpu-box", f}});
  ASSERT_EQ(f.size(), 2u) << table;
  EXPECT_EQ(UnhealthyGpus(f), std::vector<int>{0}) << table;
  EXPECT_NE(table.find("Xid 79: GPU has fallen off the bus (reboot the host)"), std::string::npos) << table;
  EXPECT_NE(table.find("1h00m ago"), std::string::npos) << table;
  EXPECT_NE(table.find("warning: Xid 94"), std::string::npos) << table;
  EXPECT_EQ(table.find("Xid 48"), std::string::npos) << "an Xid older than the window counted:\n" << table;
  // The window is the job's to set: a week counts the 48 too.
  EXPECT_EQ(Judge(r, 1, std::chrono::seconds(7 * 86400)).size(), 3u);
}

// The captured H100 with `log` as its kernel log at uptime 345600 s.
GpuReport H100WithLog(const std::string& log) {
  return ReadGpuReport(SectionText{0, "fields full\n" + Fixture("query-health-nounits.txt")},
                       SectionText{0, Fixture("query-remapped-nounits.txt")},
                       SectionText{0, "uptime 345600.00\nsource dmesg\n" + Fixture("dmesg-xid.txt") + log});
}

TEST(GpuHealth, TheJobsXidListsOverrideTheDefaultsCodeByCode) {
  EXPECT_EQ(ClassOfXid(79, {}), XidClass::kFatal);
  EXPECT_EQ(ClassOfXid(94, {}), XidClass::kWarning);
  EXPECT_EQ(ClassOfXid(13, {}), XidClass::kNotCounted) << "13 is usually the application's";
  const XidPolicy p{.fatal = {13, 94}, .warning = {79}, .ignore = {48}};
  EXPECT_EQ(ClassOfXid(13, p), XidClass::kFatal);
  EXPECT_EQ(ClassOfXid(94, p), XidClass::kFatal);
  EXPECT_EQ(ClassOfXid(79, p), XidClass::kWarning) << "moved from fatal to warning: only warns";
  EXPECT_EQ(ClassOfXid(48, p), XidClass::kNotCounted);
  EXPECT_EQ(ClassOfXid(74, p), XidClass::kFatal) << "a code in no list keeps its default";
  EXPECT_EQ(ClassOfXid(31, p), XidClass::kNotCounted);
  // Ignore wins over a default and over nothing else: the reader refuses a
  // code in two lists.
  EXPECT_EQ(ClassOfXid(79, XidPolicy{.ignore = {79}}), XidClass::kNotCounted);
}

TEST(GpuHealth, JudgedWithTheJobsListsAnIgnoredXidIsNotCountedAndAnApplicationXidListedFatalIs) {
  // Lines in the driver's format (as in AnXidLineReads... below) on the
  // H100's bus, within the day.
  const GpuReport r = H100WithLog(
      "[  345000.100000] NVRM: Xid (PCI:0000:00:06): 79, pid=1896, name=python3, GPU has fallen off the bus.\n"
      "[  345100.200000] NVRM: Xid (PCI:0000:00:06): 13, pid='<unknown>', Graphics Exception: ESR 0x504648=0x8\n"
      "[  345200.300000] NVRM: Xid (PCI:0000:00:06): 94, pid=3003, name=train.py, Contained: SM (0x1)\n");
  const std::vector<Finding> defaults = Judge(r, 1, kDay);
  const std::string d = FindingsTable({{"h1", defaults}});
  ASSERT_EQ(defaults.size(), 2u) << d;
  EXPECT_EQ(d.find("Xid 13"), std::string::npos) << d;
  const std::vector<Finding> f = Judge(r, 1, kDay, XidPolicy{.fatal = {13}, .warning = {79}, .ignore = {94}});
  const std::string t = FindingsTable({{"h1", f}});
  ASSERT_EQ(f.size(), 2u) << t;
  EXPECT_NE(t.find("warning: Xid 79: GPU has fallen off the bus (reboot the host)"), std::string::npos) << t;
  EXPECT_NE(t.find("Xid 13: fatal by health.xids"), std::string::npos) << t;
  EXPECT_EQ(t.find("Xid 94"), std::string::npos) << t;
  EXPECT_EQ(UnhealthyGpus(f), std::vector<int>{0});
}

TEST(GpuHealth, WhileTheJobRunsOnlyXidsLoggedAfterItBeganCount) {
  const GpuReport r = H100WithLog(
      "[  345000.000000] NVRM: Xid (PCI:0000:00:06): 79, pid=1896, name=python3, GPU has fallen off the bus.\n"
      "[  345500.000000] NVRM: Xid (PCI:0000:00:06): 94, pid=3003, name=train.py, Contained: SM (0x1)\n");
  const std::vector<Finding> f = Judge(r, 1, kDay, XidPolicy{.after = 345000.0});
  const std::string t = FindingsTable({{"h1", f}});
  ASSERT_EQ(f.size(), 1u) << t;
  EXPECT_NE(t.find("warning: Xid 94"), std::string::npos) << t;
  EXPECT_TRUE(Judge(r, 1, kDay, XidPolicy{.after = 345600.0}).empty());
  EXPECT_EQ(Judge(r, 1, kDay, XidPolicy{.after = 344999.9}).size(), 2u);
}

TEST(GpuHealth, TheInRunCommandAsksHealthAndUtilisationInOneScriptAndReadsEachGpusPercent) {
  const std::string smi = kData + "/standin.sh";
  const auto both = RunScript("STANDIN_GPUS=3 STANDIN_UTIL=97,0,3", std::chrono::seconds(10),
                             GpuWatchCommand(smi, std::chrono::seconds(10), /*health=*/true, /*util=*/true));
  ASSERT_TRUE(both.util.has_value());
  EXPECT_EQ(both.util->exit, 0) << both.util->text;
  const std::vector<GpuUtil> u = ParseGpuUtil(both.util->text);
  ASSERT_EQ(u.size(), 3u) << both.util->text;
  EXPECT_EQ(u[0].index, 0);
  EXPECT_EQ(u[0].percent, 97);
  EXPECT_EQ(u[1].percent, 0);
  EXPECT_EQ(u[2].index, 2);
  EXPECT_EQ(u[2].percent, 3);
  const GpuReport r = Report(both);
  ASSERT_TRUE(r.query_ok) << r.query_error;
  EXPECT_EQ(r.gpus.size(), 3u);
  EXPECT_TRUE(r.uptime.has_value());
  // Utilisation alone: no driver query, no kernel log.
  const auto util = RunScript("", std::chrono::seconds(10), GpuWatchCommand(smi, std::chrono::seconds(10), false, true));
  EXPECT_TRUE(util.util.has_value());
  EXPECT_FALSE(util.query.has_value());
  EXPECT_FALSE(util.xid.has_value());
  // A lost GPU's row has no number: no utilisation for it, the others read.
  const std::vector<GpuUtil> lost = ParseGpuUtil("0, 97\n[GPU is lost], [GPU is lost]\n2, [N/A]\n3, 101\n");
  ASSERT_EQ(lost.size(), 3u);
  EXPECT_EQ(lost[0].percent, 97);
  EXPECT_EQ(lost[1].index, 2);
  EXPECT_EQ(lost[1].percent, std::nullopt);
  EXPECT_EQ(lost[2].percent, std::nullopt) << "no percentage above 100";
}

TEST(GpuHealth, AKernelLogTheUserMayNotReadIsUnknownNeverHealthy) {
  // What the script prints for dmesg's refusal as uid 65534 (captured).
  const std::string refused = Fixture("dmesg-as-nobody.txt");
  const std::string said = refused.substr(0, refused.find('\n'));
  GpuReport r = ReadGpuReport(SectionText{0, "fields full\n" + Fixture("query-health-nounits.txt")},
                              SectionText{0, Fixture("query-remapped-nounits.txt")},
                              SectionText{1, "uptime 100.0\nunreadable: " + said});
  EXPECT_FALSE(r.xids.has_value());
  std::vector<Finding> f = Judge(r, 1, kDay);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].severity, Severity::kUnknown);
  EXPECT_NE(f[0].problem.find("Operation not permitted"), std::string::npos) << f[0].problem;
  EXPECT_FALSE(HostUnhealthy(f));
  EXPECT_TRUE(UnhealthyGpus(f).empty());
  EXPECT_NE(FindingsTable({{"h", f}}).find("unknown: Xid events unknown"), std::string::npos);
}

TEST(GpuHealth, FewerGpusThanTheInventorySaysOrNoDriverPutsTheHostOut) {
  GpuReport one = ReadGpuReport(SectionText{0, "fields full\n" + Fixture("query-health-nounits.txt")},
                                SectionText{0, Fixture("query-remapped-nounits.txt")},
                                SectionText{0, "uptime 1\nsource dmesg\n"});
  std::vector<Finding> f = Judge(one, 8, kDay);
  EXPECT_TRUE(HostUnhealthy(f));
  EXPECT_NE(FindingsTable({{"h", f}}).find("the driver sees 1 GPU(s), the inventory says 8"), std::string::npos);
  // No nvidia-smi at all: sh's own words.
  GpuReport none = ReadGpuReport(SectionText{127, "fields full\nsh: 1: nvidia-smi: not found"}, std::nullopt,
                                 SectionText{0, "uptime 1\nsource dmesg\n"});
  std::vector<Finding> g = Judge(none, std::nullopt, kDay);
  EXPECT_TRUE(HostUnhealthy(g));
  EXPECT_NE(g[0].problem.find("nvidia-smi failed (exit 127): sh: 1: nvidia-smi: not found"), std::string::npos)
      << g[0].problem;
}

// What a host's failure record keeps (IsHardwareFault): the hardware
// failing, never a host that lacks a working nvidia-smi or the GPUs a job
// asks for.
TEST(GpuHealth, AMissingOrFailingNvidiaSmiOrTooFewGpusIsNoHardwareFault) {
  const std::optional<SectionText> log = SectionText{0, "uptime 1\nsource dmesg\n"};
  for (const SectionText& q : {SectionText{127, "fields full\nsh: 1: nvidia-smi: not found"},
                               SectionText{126, "fields full\nsh: 1: nvidia-smi: Permission denied"},
                               SectionText{9, "fields full\nNVIDIA-SMI has failed because it couldn't communicate "
                                              "with the NVIDIA driver."},
                               SectionText{6, "fields full\nNo devices were found"}}) {
    const std::vector<Finding> f = Judge(ReadGpuReport(q, std::nullopt, log), std::nullopt, kDay);
    ASSERT_EQ(f.size(), 1u) << q.text;
    EXPECT_TRUE(HostUnhealthy(f)) << "the job still cannot use the host";
    EXPECT_FALSE(IsHardwareFault(f[0])) << f[0].problem;
  }
  EXPECT_FALSE(IsHardwareFault(Judge(ReadGpuReport(std::nullopt, std::nullopt, log), 1, kDay)[0]))
      << "a query that did not report";
  const std::vector<Finding> fewer =
      Judge(ReadGpuReport(SectionText{0, "fields full\n" + Fixture("query-health-nounits.txt")},
                          SectionText{0, Fixture("query-remapped-nounits.txt")}, log),
            8, kDay);
  ASSERT_EQ(fewer.size(), 1u) << FindingsTable({{"h", fewer}});
  EXPECT_FALSE(IsHardwareFault(fewer[0])) << fewer[0].problem;
  const std::vector<Finding> none = Judge(ReadGpuReport(SectionText{0, "fields full\n"}, std::nullopt, log), 1, kDay);
  ASSERT_FALSE(none.empty());
  EXPECT_EQ(none[0].problem, "the driver sees no GPU");
  EXPECT_FALSE(IsHardwareFault(none[0]));
  EXPECT_FALSE(IsHardwareFault({std::nullopt, "DCGM diagnostic failed (exit 3) and named no test", "now",
                                Severity::kFatal}));
  EXPECT_FALSE(IsHardwareFault({0, "Xid 94: warning", "1m ago", Severity::kWarning})) << "a warning";
  EXPECT_FALSE(IsHardwareFault({std::nullopt, "Xid events unknown", "", Severity::kUnknown})) << "an unknown";
}

TEST(GpuHealth, AFatalXidEccRemapOrAHungDriverIsAHardwareFault) {
  const std::vector<Finding> hung = Judge(Report(RunScript("STANDIN_HANG=1", std::chrono::seconds(1))), 1, kDay);
  ASSERT_EQ(hung.size(), 1u);
  EXPECT_TRUE(IsHardwareFault(hung[0])) << hung[0].problem;
  for (const char* env : {"STANDIN_REMAP_PENDING=1", "STANDIN_ECC=2", "STANDIN_GPUS=2 STANDIN_LOST=1"}) {
    const std::vector<Finding> f = Judge(Report(RunScript(env)), std::nullopt, kDay);
    ASSERT_FALSE(f.empty()) << env;
    for (const Finding& one : f) {
      if (one.severity == Severity::kFatal) EXPECT_TRUE(IsHardwareFault(one)) << env << ": " << one.problem;
    }
  }
  // An Xid on a bus no GPU of the query has: the whole host's, still fatal.
  const std::vector<Finding> xid = Judge(
      H100WithLog("[  345500.000000] NVRM: Xid (PCI:0000:00:09): 79, pid=1896, GPU has fallen off the bus.\n"), 1,
      kDay);
  ASSERT_EQ(xid.size(), 1u) << FindingsTable({{"h", xid}});
  EXPECT_FALSE(xid[0].gpu.has_value());
  EXPECT_TRUE(IsHardwareFault(xid[0])) << xid[0].problem;
  EXPECT_TRUE(IsHardwareFault(ReadDcgmDiag({137, ""})[0])) << "dcgmi that hung";
  EXPECT_TRUE(IsHardwareFault(ReadDcgmDiag({226, R"({"DCGM Diagnostic": {"tests": [{"name": "memory", "results": [{"status": "Fail"}]}]}})"})[0]));
}

// The driver's answers in place of a value (shared/TESTBED.md): a GPU that
// fell off the bus answers "[GPU is lost]" for every field, with exit 0.
TEST(GpuHealth, ALostGpuAmongHealthyOnesIsTheOnlyGpuTakenOutAndTheFindingNamesItsFields) {
  // Three GPUs through the script and the stand-in, GPU 1 lost (its query
  // line and its remapped-rows line: every field "[GPU is lost]").
  const struct Run run = RunScript("STANDIN_GPUS=3 STANDIN_LOST=1");
  ASSERT_TRUE(run.query.has_value());
  ASSERT_NE(run.query->text.find("[GPU is lost], [GPU is lost], [GPU is lost], [GPU is lost], [GPU is lost], "
                                 "[GPU is lost], [GPU is lost], [GPU is lost], [GPU is lost]\n"),
            std::string::npos)
      << run.query->text;
  GpuReport r = Report(run);
  ASSERT_TRUE(r.query_ok) << r.query_error;
  ASSERT_EQ(r.gpus.size(), 3u) << "the lost GPU's row was dropped";
  EXPECT_EQ(r.gpus[1].index, 1) << "the row's place stands for the index the driver cannot give";
  EXPECT_EQ(r.gpus[1].errors.size(), 9u);
  EXPECT_EQ(r.gpus[1].memory_mib, std::nullopt);
  EXPECT_TRUE(r.gpus[0].errors.empty());
  std::vector<Finding> f = Judge(r, 3, kDay);
  const std::string table = FindingsTable({{"h", f}});
  EXPECT_EQ(UnhealthyGpus(f), std::vector<int>{1}) << table;
  EXPECT_FALSE(HostUnhealthy(f)) << table;
  EXPECT_NE(table.find("h     1    the driver answers [GPU is lost] for every field it was asked (index, uuid, name, "
                       "driver_version, memory.total, ecc.errors.uncorrected.volatile.total, retired_pages.pending, "
                       "mig.mode.current, pci.bus_id) (reboot the host)"),
            std::string::npos)
      << table;
  // The remapped rows' line of the lost GPU: its UUID is lost too, so its
  // place among the rows (one per GPU) names it.
  EXPECT_NE(table.find("h     1    remapped rows: the driver answers [GPU is lost] for every field it was asked "
                       "(gpu_uuid, "),
            std::string::npos)
      << table;
  // No Xid says it (rotated out of the log, or older than the window): the
  // driver's answer alone takes the GPU out.
  ASSERT_TRUE(r.xids.has_value());
  EXPECT_TRUE(r.xids->empty());
}

TEST(GpuHealth, UnknownErrorOrErrInOneFieldIsFatalForThatGpuAndNaOrNotSupportedAreNot) {
  // The exact CSV forms, in the H100's line: GPU 0's ECC count reads
  // "[Unknown Error]", GPU 1 reads "[Not Supported]" and "[N/A]" (healthy),
  // GPU 2's MIG mode "ERR!", GPU 3's remapped-rows pending flag
  // "[Unknown Error]".
  const std::string query =
      "fields full\n"
      "0, GPU-32f94187-cb0a-290d-513a-256680d526a0, NVIDIA H100 80GB HBM3, 580.159.04, 81559, [Unknown Error], [N/A], "
      "Disabled, 00000000:00:06.0\n"
      "1, GPU-32f94187-cb0a-290d-513a-256680d526a1, NVIDIA H100 80GB HBM3, 580.159.04, 81559, [Not Supported], [N/A], "
      "[N/A], 00000000:00:07.0\n"
      "2, GPU-32f94187-cb0a-290d-513a-256680d526a2, NVIDIA H100 80GB HBM3, 580.159.04, 81559, 0, [N/A], ERR!, "
      "00000000:00:08.0\n"
      "3, GPU-32f94187-cb0a-290d-513a-256680d526a3, NVIDIA H100 80GB HBM3, 580.159.04, 81559, 0, [N/A], Disabled, "
      "00000000:00:09.0\n";
  const std::string remapped =
      "GPU-32f94187-cb0a-290d-513a-256680d526a0, 0, 0, No, No\n"
      "GPU-32f94187-cb0a-290d-513a-256680d526a1, [Not Supported], [N/A], No, No\n"
      "GPU-32f94187-cb0a-290d-513a-256680d526a2, 0, 0, No, No\n"
      "GPU-32f94187-cb0a-290d-513a-256680d526a3, 0, 0, [Unknown Error], No\n";
  GpuReport r = ReadGpuReport(SectionText{0, query}, SectionText{0, remapped}, SectionText{0, "uptime 1\nsource dmesg\n"});
  ASSERT_EQ(r.gpus.size(), 4u);
  std::vector<Finding> f = Judge(r, 4, kDay);
  const std::string table = FindingsTable({{"h", f}});
  EXPECT_EQ(UnhealthyGpus(f), (std::vector<int>{0, 2, 3})) << table;
  EXPECT_FALSE(HostUnhealthy(f)) << table;
  EXPECT_EQ(f.size(), 3u) << table;
  EXPECT_NE(table.find("h     0    the driver answers [Unknown Error] for ecc.errors.uncorrected.volatile.total "
                       "(reset the GPU)"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("h     2    the driver answers ERR! for mig.mode.current (reset the GPU)"), std::string::npos)
      << table;
  EXPECT_NE(table.find("h     3    remapped rows: the driver answers [Unknown Error] for remapped_rows.pending "
                       "(reset the GPU)"),
            std::string::npos)
      << table;
}

TEST(GpuHealth, AnXidLineReadsItsCodeAndPciAddressWithOrWithoutNameAndWithAnUnknownPid) {
  // The driver's forms: newer drivers print "pid=, name=", older ones
  // "pid=" alone; an event of no process "pid='<unknown>'"; the journal's
  // short-monotonic form adds "HOST kernel: ".
  const std::string log =
      "[  342000.100000] NVRM: Xid (PCI:0000:3b:00): 79, pid=1896, name=python3, GPU has fallen off the bus.\n"
      "[  342000.200000] NVRM: Xid (PCI:0000:86:00): 48, pid=2001, An uncorrectable double bit error (DBE) has been "
      "detected on GPU in the framebuffer at partition 0, subpartition 0.\n"
      "[  342000.300000] NVRM: Xid (PCI:0000:af:00): 119, pid='<unknown>', name=<unknown>, Timeout after 6s of waiting "
      "for RPC response from GPU3 GSP! Expected function 76 (GSP_RM_CONTROL) (0x20801348 0x4).\n"
      "[  342000.400000] gpu-box kernel: NVRM: Xid (PCI:0000:d8:00): 94, pid=3003, name=train.py, Contained: SM "
      "(0x1). RST: No, D-RST: No\n"
      "[  342000.500000] NVRM: Xid (PCI:0000:3b:00): 13, pid='<unknown>', Graphics Exception: ESR 0x504648=0x8\n";
  const std::vector<XidEvent> x = ParseXids(log);
  ASSERT_EQ(x.size(), 5u);
  const std::vector<std::pair<int, std::string>> want = {
      {79, "0000:3b:00"}, {48, "0000:86:00"}, {119, "0000:af:00"}, {94, "0000:d8:00"}, {13, "0000:3b:00"}};
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(x[i].code, want[i].first) << x[i].text;
    EXPECT_EQ(x[i].pci, want[i].second) << x[i].text;
    EXPECT_EQ(x[i].text.rfind("NVRM: Xid (PCI:", 0), 0u) << x[i].text;
  }
  EXPECT_DOUBLE_EQ(x[2].at, 342000.3);
  EXPECT_DOUBLE_EQ(x[3].at, 342000.4);
}

// A stand-in dmesg (first on PATH) that prints `log`; the directory.
std::string DmesgStandin(const std::string& log) {
  const std::string dir = "/tmp/barge-gpu-health-dmesg-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/log") << log;
  std::ofstream(dir + "/dmesg") << "#!/bin/sh\ncat " << dir << "/log\n";
  std::filesystem::permissions(dir + "/dmesg", std::filesystem::perms::owner_all);
  return dir;
}

TEST(GpuHealth, ThreeHundredForgedLinesAfterARealXidNeitherCountNorPushItOutOfView) {
  // A local user's process named "NVRM: Xid (PCI:" (15 characters, all a
  // process name holds) that faults makes the kernel print lines that hold
  // "NVRM: Xid" (its segfault and general protection forms); 300 of them
  // after the driver's real Xid 79 for the H100 (PCI:0000:00:06), a minute
  // ago on this machine's clock.
  double uptime = 0;
  std::ifstream("/proc/uptime") >> uptime;
  ASSERT_GT(uptime, 120);
  char real[200];
  std::snprintf(real, sizeof real,
                "[%12.6f] NVRM: Xid (PCI:0000:00:06): 79, pid=1896, name=python3, GPU has fallen off the bus.\n",
                uptime - 60);
  std::string log = Fixture("dmesg-xid.txt") + real;
  for (int i = 0; i < 150; ++i) {
    char forged[400];
    std::snprintf(forged, sizeof forged,
                  "[%12.6f] NVRM: Xid (PCI:[%d]: segfault at 0 ip 0000000000401000 sp 00007ffd5a1c0000 error 4 in "
                  "forge[401000+1000] likely on CPU 1 (core 1, socket 0)\n"
                  "[%12.6f] traps: NVRM: Xid (PCI:[%d] general protection fault ip:401000 sp:7ffd5a1c0000 error:0 "
                  "in forge[401000+1000]\n",
                  uptime - 50 + i * 0.1, 4000 + i, uptime - 50 + i * 0.1 + 0.05, 5000 + i);
    log += forged;
  }
  const std::string dir = DmesgStandin(log);
  GpuReport r = Report(RunScript("PATH=" + dir + ":$PATH"));
  std::filesystem::remove_all(dir);
  EXPECT_EQ(r.xid_source, "dmesg");
  ASSERT_TRUE(r.xids.has_value()) << r.xid_error;
  ASSERT_EQ(r.xids->size(), 1u) << "the driver's line is out of view, or a forged line counted";
  EXPECT_EQ((*r.xids)[0].code, 79);
  std::vector<Finding> f = Judge(r, 1, kDay);
  EXPECT_EQ(UnhealthyGpus(f), std::vector<int>{0}) << FindingsTable({{"h", f}});
}

// DcgmDiagCommand run by sh against the DCGM stand-in (tests/data/dcgmi-documented-format:
// DCGM 3's documented JSON form, not a capture): exit status and answer.
SectionText RunDcgm(const std::string& env, const std::string& dcgmi, const std::vector<int>& gpus) {
  std::string out;
  const std::string path = "/tmp/barge-dcgm-test-" + std::to_string(getpid()) + ".sh";
  std::ofstream(path) << DcgmDiagCommand(dcgmi, gpus, std::chrono::seconds(10)) << "\n";
  FILE* p = popen((env + " sh " + path + "; echo \"rc=$?\"").c_str(), "r");
  char buf[4096];
  for (size_t n; p && (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  if (p) pclose(p);
  unlink(path.c_str());
  const size_t rc = out.rfind("rc=");
  return SectionText{std::atoi(out.c_str() + rc + 3), out.substr(0, rc)};
}

const std::string kDcgmi = std::string(BARGE_SOURCE_DIR) + "/tests/data/dcgmi-documented-format/standin.sh";

TEST(DcgmDiag, APassingDiagnosticFindsNothingAndIsAskedOnlyForTheGivenGpus) {
  const std::string log = "/tmp/barge-dcgm-test-" + std::to_string(getpid()) + ".log";
  const SectionText a = RunDcgm("STANDIN_DCGM_LOG=" + log, kDcgmi, {1, 3});
  EXPECT_EQ(a.exit, 0) << a.text;
  EXPECT_TRUE(ReadDcgmDiag(a).empty()) << a.text;
  std::ifstream in(log);
  std::string args;
  std::getline(in, args);
  EXPECT_EQ(args, "diag -r 1 -j -i 1,3");
  unlink(log.c_str());
}

TEST(DcgmDiag, AFailedTestIsFatalForTheGpuItsResultNames) {
  const SectionText a = RunDcgm("STANDIN_DCGM_FAIL=1", kDcgmi, {0, 1});
  EXPECT_NE(a.exit, 0);
  const std::vector<Finding> f = ReadDcgmDiag(a);
  ASSERT_EQ(f.size(), 1u) << a.text;
  ASSERT_TRUE(f[0].gpu.has_value());
  EXPECT_EQ(*f[0].gpu, 1);
  EXPECT_EQ(f[0].severity, Severity::kFatal);
  EXPECT_EQ(f[0].problem,
            "DCGM diagnostic: Page Retirement/Row Remap failed: GPU 1 had uncorrectable memory errors and row remapping "
            "failed. Run a field diagnostic on the GPU.");
  EXPECT_EQ(UnhealthyGpus(f), std::vector<int>{1});
  EXPECT_FALSE(HostUnhealthy(f));
}

TEST(DcgmDiag, NoDcgmiOrNoHostEngineIsUnknownNeverHealthyAndAHangIsTheHosts) {
  const std::vector<Finding> absent = ReadDcgmDiag(RunDcgm("", "/nonexistent/dcgmi", {0}));
  ASSERT_EQ(absent.size(), 1u);
  EXPECT_EQ(absent[0].severity, Severity::kUnknown);
  EXPECT_EQ(absent[0].problem, "DCGM diagnostic unknown: dcgmi is not installed");
  const std::vector<Finding> noengine = ReadDcgmDiag(RunDcgm("STANDIN_DCGM_NOENGINE=1", kDcgmi, {0}));
  ASSERT_EQ(noengine.size(), 1u);
  EXPECT_EQ(noengine[0].severity, Severity::kUnknown);
  EXPECT_EQ(noengine[0].problem,
            "DCGM diagnostic unknown: Error: unable to establish a connection to the specified host: localhost");
  const std::vector<Finding> hung = ReadDcgmDiag({137, ""});
  ASSERT_EQ(hung.size(), 1u);
  EXPECT_FALSE(hung[0].gpu.has_value());
  EXPECT_EQ(hung[0].severity, Severity::kFatal);
  EXPECT_TRUE(HostUnhealthy(hung));
}

TEST(DcgmDiag, Dcgm4sFormNamesItsGpuByEntityAndAFailNamingNoGpuIsTheHosts) {
  // The shape DCGM 4 documents: results per entity.
  const std::vector<Finding> f = ReadDcgmDiag(
      {226, R"({"DCGM Diagnostic": {"test_categories": [{"category": "Deployment", "tests": [
        {"name": "software", "results": [{"entity_group": "GPU", "entity_id": 2, "status": "Fail",
          "warnings": [{"warning": "Persistence mode for GPU 2 is disabled.", "error_id": 7}]}]},
        {"name": "memory", "results": [{"status": "Fail", "info": "no GPU named"}]}]}]}})"});
  ASSERT_EQ(f.size(), 2u);
  ASSERT_TRUE(f[0].gpu.has_value());
  EXPECT_EQ(*f[0].gpu, 2);
  EXPECT_EQ(f[0].problem, "DCGM diagnostic: software failed: Persistence mode for GPU 2 is disabled.");
  EXPECT_FALSE(f[1].gpu.has_value());
  EXPECT_EQ(f[1].problem, "DCGM diagnostic: memory failed: no GPU named");
}

}  // namespace
}  // namespace barge::runner::gpu
