#include "runner/remote/slurm.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <vector>

#include "ssh/quote.h"

namespace barge::runner::slurm {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

TEST(SlurmTimeLimit, IsRoundedUpToWholeMinutesInDaysHoursMinutes) {
  EXPECT_EQ(TimeLimit(seconds(30)), "0-00:01:00");
  EXPECT_EQ(TimeLimit(seconds(60)), "0-00:01:00");
  EXPECT_EQ(TimeLimit(seconds(61)), "0-00:02:00");
  EXPECT_EQ(TimeLimit(minutes(150)), "0-02:30:00");
  EXPECT_EQ(TimeLimit(minutes(60 * 24 * 3 + 5)), "3-00:05:00");
}

TEST(SlurmSalloc, AsksForTheJobsShapeWithItsIdInTheName) {
  SlurmSpec spec;
  spec.nodes = 4;
  spec.time = minutes(120);
  EXPECT_EQ(SallocLine(spec, "a1b2c3d4", "train"),
            "salloc --no-shell --job-name=barge-a1b2c3d4-train --nodes=4 --ntasks-per-node=1 "
            "--time=0-02:00:00 --exclusive");
  spec.partition = "gpu";
  spec.account = "ml";
  spec.qos = "high";
  spec.gpus_per_node = 8;
  spec.extra = {"--constraint=a100", "--comment=it's mine"};
  EXPECT_EQ(SallocLine(spec, "a1b2c3d4", "train"),
            "salloc --no-shell --job-name=barge-a1b2c3d4-train --nodes=4 --ntasks-per-node=1 "
            "--time=0-02:00:00 --partition=gpu --account=ml --qos=high --gpus-per-node=8 --exclusive "
            "--constraint=a100 '--comment=it'\\''s mine'");
}

TEST(SlurmSalloc, ASharedNodeAsksForItsShareOfCpusAndMemoryWithoutExclusive) {
  SlurmSpec spec;
  spec.nodes = 2;
  spec.time = minutes(30);
  spec.gpus_per_node = 1;
  spec.cpus_per_node = 8;
  spec.mem_per_node = "1.5g";
  spec.exclusive = false;
  EXPECT_EQ(SallocLine(spec, "a1b2c3d4", "train"),
            "salloc --no-shell --job-name=barge-a1b2c3d4-train --nodes=2 --ntasks-per-node=1 "
            "--time=0-00:30:00 --gpus-per-node=1 --cpus-per-task=8 --mem=1536M");
  spec.mem_per_node = "1000k";  // rounded up to whole MiB
  EXPECT_NE(SallocLine(spec, "a1b2c3d4", "train").find(" --mem=1M"), std::string::npos);
}

// salloc 22.05's own lines (as tests/data/slurm-22.05 holds them).
TEST(SlurmSalloc, TheJobIdIsReadFromSallocsPendingOrGrantedLine) {
  EXPECT_EQ(JobIdInSalloc(""), std::nullopt);
  EXPECT_EQ(JobIdInSalloc("salloc: error: invalid partition specified: nope\n"), std::nullopt);
  EXPECT_EQ(JobIdInSalloc("salloc: Pending job allocation 17\nsalloc: job 17 queued and waiting for resources\n"),
            "17");
  EXPECT_EQ(JobIdInSalloc("salloc: Granted job allocation 4\n"), "4");
}

TEST(SlurmSqueue, ReadsStateAndReasonAndAnEmptyAnswerIsAJobGone) {
  Result<QueueState> pending = ParseSqueue("PENDING|Priority\n");
  ASSERT_TRUE(pending.ok());
  EXPECT_EQ(pending->state, "PENDING");
  EXPECT_EQ(pending->reason, "Priority");
  Result<QueueState> gone = ParseSqueue("");
  ASSERT_TRUE(gone.ok());
  EXPECT_EQ(gone->state, "");
  EXPECT_FALSE(ParseSqueue("slurm_load_jobs error: Invalid job id specified\n").ok());
}

TEST(SlurmHostlist, MoreThanTheBoundInAllIsAnErrorThoughEachRangeIsUnder) {
  std::string list;
  for (int i = 0; i < 11; ++i) list += (i ? "," : "") + std::string("r") + std::to_string(i) + "n[0-9999]";
  Result<std::vector<std::string>> names = ExpandHostlist(list);
  ASSERT_FALSE(names.ok());
  EXPECT_NE(names.status().message().find("more than 100000 names"), std::string::npos) << names.status().message();
  ASSERT_TRUE(ExpandHostlist("n[0-99999]").ok());
  EXPECT_EQ(ExpandHostlist("n[0-99999]")->size(), 100000u);
  EXPECT_FALSE(ExpandHostlist("n[0-99999],m1").ok());
}

TEST(SlurmHostlist, ExpandsRangesListsAndZeroPadding) {
  Result<std::vector<std::string>> a = ExpandHostlist("h[1-3,7],gpu05");
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(*a, (std::vector<std::string>{"h1", "h2", "h3", "h7", "gpu05"}));
  Result<std::vector<std::string>> b = ExpandHostlist("n[08-10]-ib");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, (std::vector<std::string>{"n08-ib", "n09-ib", "n10-ib"}));
  Result<std::vector<std::string>> c = ExpandHostlist("h2");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, (std::vector<std::string>{"h2"}));
  EXPECT_FALSE(ExpandHostlist("h[1-3").ok());
  EXPECT_FALSE(ExpandHostlist("h[3-1]").ok());
  EXPECT_FALSE(ExpandHostlist("h[a-b]").ok());
}

TEST(SlurmCommands, QuoteWhatTheyAreGiven) {
  EXPECT_EQ(ScancelLine("12"), "scancel 12");
  EXPECT_EQ(SrunLine("12", "h2"),
            "srun --jobid=12 --overlap --nodes=1 --ntasks=1 --nodelist=h2 --chdir=/ --unbuffered --quiet /bin/sh -c "
            "'IFS= read -r barge_line || { echo barge: no command line on standard input >&2; exit 125; }; "
            "barge_line=$(printf %b. \"$barge_line\"); eval \"unset barge_line;${barge_line%.}\"'");
  EXPECT_EQ(ShowNodesLine("h[1-3]"), "scontrol -o show node 'h[1-3]'");
  EXPECT_EQ(DrainCommand("h2", "barge: GPU 1: Xid 79"),
            "scontrol update nodename=h2 state=drain reason='barge: GPU 1: Xid 79'");
}

// `shell -c kSrunStepProgram` with `input` on a pipe as its stdin, as
// srun's task gets it: its stdout and stderr together; *code is its exit
// code (128+N after signal N, as the shell of the pipeline says it, its
// "Terminated" left out).
std::string RunStepProgramIn(const std::string& shell, const std::string& input, int* code) {
  *code = -1;
  char path[] = "/tmp/barge-srun-stdin-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return "<no temporary file>";
  close(fd);
  std::ofstream(path, std::ios::binary) << input;
  std::string out;
  const std::string command = "(cat " + std::string(path) + " | " + shell + " -c " +
                              ssh::ShellQuote(kSrunStepProgram) + " 2>&1) 2>/dev/null";
  if (FILE* p = popen(command.c_str(), "r")) {
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    const int status = pclose(p);
    if (WIFEXITED(status)) *code = WEXITSTATUS(status);
  }
  unlink(path);
  return out;
}

// The shells a node's /bin/sh may be, of those this machine has.
std::vector<std::string> StepShells() {
  std::vector<std::string> shells;
  for (const char* shell : {"/bin/dash", "/bin/bash", "/bin/busybox sh"}) {
    const std::string command = shell;
    if (access(command.substr(0, command.find(' ')).c_str(), X_OK) == 0) shells.push_back(command);
  }
  return shells;
}

TEST(SrunSteps, TheLineGoesOnStdinAsOneLineOfPrintableAsciiWithOctalEscapes) {
  EXPECT_EQ(SrunStdinLine("mkdir -m 700 /tmp/barge-1a2b3c4d.abcdefghijkl"),
            "mkdir -m 700 /tmp/barge-1a2b3c4d.abcdefghijkl\n");
  EXPECT_EQ(SrunStdinLine("a\\b\n\tc\r \xc3\xa9\x7f%s\\c"),
            "a\\0134b\\0012\\0011c\\0015 \\0303\\0251\\0177%s\\0134c\n");
  EXPECT_EQ(SrunStdinLine(""), "\n");
}

TEST(SrunSteps, TheFirstLineOfStdinRunsAsTheLineAndWhatFollowsIsItsStdin) {
  const std::string word = "it's $(touch X) `id` ; && \\c \\0101 %s %b \n\t\r ~ * héllo ✓ \x7f\n\n";
  const std::string line = ssh::ShellJoin({"printf", "%s", word}) + " && printf '|' && cat && exit 7";
  const std::string rest = "the caller's stdin\\n, line 1\nline 2 \\ \n";
  const std::string heredoc = "# a comment first\ncat <<'EOF'\n  two spaces,\ta tab, a \\ and $HOME\nEOF\nexit 3\n\n";
  ASSERT_FALSE(StepShells().empty());
  for (const std::string& shell : StepShells()) {
    SCOPED_TRACE(shell);
    int code = -1;
    EXPECT_EQ(RunStepProgramIn(shell, SrunStdinLine(line) + rest, &code), word + "|" + rest);
    EXPECT_EQ(code, 7);
    EXPECT_EQ(RunStepProgramIn(shell, SrunStdinLine(heredoc), &code), "  two spaces,\ta tab, a \\ and $HOME\n");
    EXPECT_EQ(code, 3);
    // The shell that runs the line is the step's task: a signal that ends
    // it ends the step.
    RunStepProgramIn(shell, SrunStdinLine("kill -TERM $$; sleep 5"), &code);
    EXPECT_EQ(code, 128 + SIGTERM);
    // The program's own variable is gone before the line runs.
    EXPECT_EQ(RunStepProgramIn(shell, SrunStdinLine("echo \"[${barge_line-unset}]\""), &code), "[unset]\n");
    EXPECT_EQ(code, 0);
  }
}

TEST(SrunSteps, AStepWithNoLineOnStdinSaysSoAndExits125) {
  for (const std::string& shell : StepShells()) {
    SCOPED_TRACE(shell);
    int code = -1;
    EXPECT_NE(RunStepProgramIn(shell, "", &code).find("barge: no command line on standard input"),
              std::string::npos);
    EXPECT_EQ(code, 125);
  }
}

}  // namespace
}  // namespace barge::runner::slurm

namespace barge::runner::slurm {
namespace {

std::string Captured(const std::string& name) {
  std::ifstream in(std::string(BARGE_SOURCE_DIR) + "/tests/data/slurm-22.05/" + name, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  EXPECT_FALSE(s.str().empty()) << "missing capture " << name;
  return s.str();
}

TEST(SlurmCaptured, SallocsRealLinesNameTheJob) {
  EXPECT_EQ(JobIdInSalloc(Captured("salloc-granted.txt")), "3");
  EXPECT_EQ(JobIdInSalloc(Captured("salloc-pending-cancelled.txt")), "4");
}

TEST(SlurmCaptured, ARunningAllocationsNodesAndGpuIndicesAreRead) {
  Result<JobInfo> info = ParseShowJob(Captured("show-job-d-running.txt"));
  ASSERT_TRUE(info.ok()) << info.status().message();
  EXPECT_EQ(info->state, "RUNNING");
  EXPECT_EQ(info->reason, "None");
  EXPECT_EQ(info->partition, "gpu");
  EXPECT_EQ(info->node_list, "h[1-3]");
  ASSERT_EQ(info->nodes.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(info->nodes[i].name, "h" + std::to_string(i + 1));
    EXPECT_EQ(info->nodes[i].gpus, (std::vector<int>{0, 1}));
  }
}

TEST(SlurmCaptured, TwoAllocationsSharingANodeEachHaveTheirOwnGpuCpuAndMemory) {
  Result<JobInfo> a = ParseShowJob(Captured("show-job-d-shared-a.txt"));
  Result<JobInfo> b = ParseShowJob(Captured("show-job-d-shared-b.txt"));
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_TRUE(b.ok()) << b.status().message();
  ASSERT_EQ(a->nodes.size(), 1u);
  ASSERT_EQ(b->nodes.size(), 1u);
  EXPECT_EQ(a->nodes[0].name, "h1");
  EXPECT_EQ(b->nodes[0].name, "h1");
  EXPECT_EQ(a->nodes[0].gpus, std::vector<int>{0});
  EXPECT_EQ(b->nodes[0].gpus, std::vector<int>{1});
  EXPECT_EQ(a->nodes[0].cpus, 1);
  EXPECT_EQ(b->nodes[0].cpus, 1);
  EXPECT_EQ(a->nodes[0].mem_mb, 200);
  EXPECT_EQ(b->nodes[0].mem_mb, 300);
  EXPECT_EQ(JobIdInSalloc(Captured("salloc-shared.txt")), "3");
}

TEST(SlurmCaptured, APendingAllocationHasNoNodesYetAndItsReason) {
  Result<JobInfo> info = ParseShowJob(Captured("show-job-d-pending.txt"));
  ASSERT_TRUE(info.ok()) << info.status().message();
  EXPECT_EQ(info->state, "PENDING");
  EXPECT_EQ(info->reason, "Resources");
  EXPECT_TRUE(info->nodes.empty());
}

TEST(SlurmCaptured, NodeAddressesAreReadByName) {
  Result<std::map<std::string, std::string>> addr = ParseNodeAddresses(Captured("show-node.txt"));
  ASSERT_TRUE(addr.ok()) << addr.status().message();
  EXPECT_EQ(*addr, (std::map<std::string, std::string>{{"h1", "10.77.0.2"}, {"h2", "10.77.0.3"}, {"h3", "10.77.0.4"}}));
}

TEST(SlurmShowJob, PerNodeDetailsGiveEachNodeItsOwnGpus) {
  // -d's details as Slurm writes them when nodes differ (the kernel of the
  // captured form, each group with its own GRES).
  Result<JobInfo> info = ParseShowJob(
      "JobId=9 JobName=x JobState=RUNNING Reason=None Partition=gpu NodeList=n[01-02],m7 NumNodes=3   "
      "Nodes=n01 CPU_IDs=0-1 Mem=0 GRES=gpu:2(IDX:0-1)   Nodes=n02 CPU_IDs=0,4-6 Mem=2048 GRES=gpu:1(IDX:3)   "
      "Nodes=m7 CPU_IDs=0 Mem=0 GRES=gpu:a100:2(IDX:4,6) MinCPUsNode=1 MinMemoryNode=0\n");
  ASSERT_TRUE(info.ok()) << info.status().message();
  ASSERT_EQ(info->nodes.size(), 3u);
  EXPECT_EQ(info->nodes[0].gpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(info->nodes[0].cpus, 2);
  EXPECT_EQ(info->nodes[0].mem_mb, 0);
  EXPECT_EQ(info->nodes[1].gpus, (std::vector<int>{3}));
  EXPECT_EQ(info->nodes[1].cpus, 4);
  EXPECT_EQ(info->nodes[1].mem_mb, 2048);
  EXPECT_EQ(info->nodes[2].name, "m7");
  EXPECT_EQ(info->nodes[2].gpus, (std::vector<int>{4, 6}));
  EXPECT_EQ(info->nodes[2].cpus, 1);
  EXPECT_FALSE(ParseShowJob("slurm_load_jobs error: Invalid job id specified\n").ok());
}

}  // namespace
}  // namespace barge::runner::slurm
