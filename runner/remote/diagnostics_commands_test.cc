// The diagnostics scripts run by a real /bin/sh against stand-in `docker`,
// `dmesg`, `journalctl` and `nvidia-smi` programs first on PATH, and the
// reading of their answers (Xid marks, caps, file names).
#include "runner/remote/diagnostics_commands.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <string>

namespace barge::runner::diagnostics {
namespace {

using std::chrono::seconds;

// A directory of stand-in programs, and a runner of a script under `sh`
// with that directory first on PATH.
class StandIns {
 public:
  StandIns() {
    char tmpl[] = "/tmp/barge-diag-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  ~StandIns() { std::system(("rm -rf " + dir_).c_str()); }
  void Add(const std::string& name, const std::string& body) {
    std::ofstream(dir_ + "/" + name) << "#!/bin/sh\n" << body << "\n";
    chmod((dir_ + "/" + name).c_str(), 0755);
  }
  std::string Run(const std::string& script) {
    std::ofstream(dir_ + "/script.sh") << script;
    std::string out;
    FILE* p = popen(("PATH=" + dir_ + ":$PATH sh " + dir_ + "/script.sh 2>&1").c_str(), "r");
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    pclose(p);
    return out;
  }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

// Whether `a` comes before `b` in `text` (both there).
bool InOrder(const std::string& text, const std::string& a, const std::string& b) {
  const size_t i = text.find(a);
  const size_t j = text.find(b);
  return i != std::string::npos && j != std::string::npos && i < j;
}

double Uptime() {
  double up = 0;
  std::ifstream("/proc/uptime") >> up;
  return up;
}

TEST(DiagnosticsCommands, ANodesScriptGivesItsInspectItsProcessesWithStateAndWaitChannelAndTheirStacks) {
  StandIns bin;
  bin.Add("docker", R"sh(case "$1" in
inspect) echo '[{"Name": "/'"$2"'", "State": {"Status": "exited", "ExitCode": 3}}]';;
top) echo "PID STAT WCHAN ELAPSED COMMAND"; echo "1 Ss do_wait 01:02 /sbin/init"; echo "$$ D futex_wait 00:10 python train.py";;
esac)sh");
  const std::string out = bin.Run(ContainerDiagnosticsScript(DockerCommands({"docker"}), "barge-ab12-1", seconds(5)));
  EXPECT_TRUE(InOrder(out, "=== docker inspect barge-ab12-1\n", "\"ExitCode\": 3")) << out;
  EXPECT_TRUE(InOrder(out, "\"ExitCode\": 3", "=== processes (docker top")) << out;
  EXPECT_NE(out.find("1 Ss do_wait 01:02 /sbin/init"), std::string::npos) << out;
  EXPECT_NE(out.find("D futex_wait 00:10 python train.py"), std::string::npos) << out;
  // One stack entry per process: the text, or why not (not root).
  EXPECT_TRUE(InOrder(out, "=== kernel stacks (/proc/PID/stack)\n", "-- pid 1\n")) << out;
  const size_t pid1 = out.find("-- pid 1\n");
  ASSERT_NE(pid1, std::string::npos);
  const std::string after = out.substr(pid1 + 9);
  EXPECT_FALSE(after.empty() || after.rfind("-- pid", 0) == 0) << "pid 1 has neither a stack nor a reason: " << out;
  EXPECT_EQ(out.find("(no process"), std::string::npos) << out;
}

TEST(DiagnosticsCommands, AStoppedContainerHasNoProcessesAndTheScriptSaysSo) {
  StandIns bin;
  bin.Add("docker", R"sh(case "$1" in
inspect) echo '[{"State": {"Status": "exited", "ExitCode": 137, "OOMKilled": true}}]';;
top) echo "Error response from daemon: container $2 is not running" >&2; exit 1;;
esac)sh");
  const std::string out = bin.Run(ContainerDiagnosticsScript(DockerCommands({"docker"}), "c1", seconds(5)));
  EXPECT_NE(out.find("\"OOMKilled\": true"), std::string::npos) << out;
  EXPECT_NE(out.find("container c1 is not running"), std::string::npos) << out;
  EXPECT_NE(out.find("(no process: the container does not run)"), std::string::npos) << out;
  EXPECT_EQ(out.find("-- pid"), std::string::npos) << out;
}

TEST(DiagnosticsCommands, AHungDockerStepIsKilledAtTheStepBoundAndTheOtherSectionsStillAnswer) {
  StandIns bin;
  bin.Add("docker", R"sh(case "$1" in inspect) exec sleep 30;; top) echo "PID STAT WCHAN ELAPSED COMMAND";; esac)sh");
  const auto began = std::chrono::steady_clock::now();
  const std::string out = bin.Run(ContainerDiagnosticsScript(DockerCommands({"docker"}), "c1", seconds(1)));
  EXPECT_LT(std::chrono::steady_clock::now() - began, seconds(10));
  EXPECT_TRUE(InOrder(out, "=== docker inspect c1", "=== processes")) << out;
  EXPECT_NE(out.find("=== kernel stacks"), std::string::npos) << out;
}

TEST(DiagnosticsCommands, AHostsScriptKeepsTheKernelLinesSinceTheJobBeganAndAsksNvidiaSmiOnlyWithGpus) {
  StandIns bin;
  const double up = Uptime();
  ASSERT_GT(up, 8);
  // The job began halfway since boot: a line a quarter in is before it.
  char before[64], after[64];
  std::snprintf(before, sizeof before, "[%12.6f]", up / 4);
  std::snprintf(after, sizeof after, "[%12.6f]", up * 3 / 4);
  bin.Add("dmesg", std::string("echo '") + before + " old line before the job'\necho '" + after +
                       " NVRM: Xid (PCI:0000:01:00): 79, pid=12, name=python, GPU has fallen off the bus.'\n"
                       "echo '" + after + " eth0: link down'");
  bin.Add("nvidia-smi", "echo '==============NVSMI LOG=============='; echo \"args: $*\"");
  bin.Add("docker", "echo " + bin.dir());
  const int64_t began = static_cast<int64_t>(std::time(nullptr)) - static_cast<int64_t>(up / 2);
  const std::string with = bin.Run(HostDiagnosticsScript(DockerCommands({"docker"}), bin.dir() + "/job", began, true, seconds(5)));
  EXPECT_TRUE(InOrder(with, "=== kernel log since the job began", "(dmesg, from ")) << with;
  EXPECT_EQ(with.find("old line before the job"), std::string::npos) << with;
  EXPECT_NE(with.find("eth0: link down"), std::string::npos) << with;
  int xids = 0;
  const std::string marked = MarkXidLines(with, &xids);
  EXPECT_EQ(xids, 1);
  EXPECT_NE(marked.find(std::string(kXidMark) + after + " NVRM: Xid (PCI:0000:01:00): 79"), std::string::npos) << marked;
  EXPECT_TRUE(InOrder(with, "=== nvidia-smi -q\n", "args: -q")) << with;
  EXPECT_TRUE(InOrder(with, "=== disk (df -h", "Filesystem")) << with;
  EXPECT_TRUE(InOrder(with, "=== memory (free -m, /proc/pressure)", "Mem")) << with;

  EXPECT_EQ(with.find("(no kernel line since then)"), std::string::npos) << with;

  // The job began after every line: the section says so.
  const std::string without = bin.Run(HostDiagnosticsScript(DockerCommands({"docker"}), "",
                                                            static_cast<int64_t>(std::time(nullptr)) + 5, false, seconds(5)));
  EXPECT_TRUE(InOrder(without, "(dmesg, from ", "(no kernel line since then)\n=== disk")) << without;
  EXPECT_EQ(without.find("eth0: link down"), std::string::npos) << without;
  EXPECT_EQ(without.find("nvidia-smi"), std::string::npos) << without;
  EXPECT_NE(without.find("Filesystem"), std::string::npos) << without;
}

TEST(DiagnosticsCommands, AnUnreadableKernelLogIsSaidToBeUnreadableNotEmpty) {
  StandIns bin;
  bin.Add("dmesg", "echo 'dmesg: read kernel buffer failed: Operation not permitted' >&2; exit 1");
  bin.Add("journalctl", "echo 'Hint: You are currently not seeing messages from other users and the system.'");
  bin.Add("docker", "exit 1");
  const std::string out = bin.Run(HostDiagnosticsScript(DockerCommands({"docker"}), "/nonexistent/job", 0, false, seconds(5)));
  EXPECT_NE(out.find("unreadable: dmesg: read kernel buffer failed: Operation not permitted"), std::string::npos) << out;
  // The job's directory not made: its parent's disk.
  EXPECT_NE(out.find("Filesystem"), std::string::npos) << out;
}

TEST(DiagnosticsCommands, StoppedStuckAndZombieProcessesAreFoundInTheProcessesSectionOnly) {
  const std::string answer =
      "=== docker inspect c\n[{\"State\": {\"Status\": \"running\"}}]\n"
      "4000 T x 00:01 not a process line: the inspect section\n"
      "=== processes (docker top: host PID, state, wait channel, elapsed, command)\n"
      "PID                 STAT                WCHAN               ELAPSED             COMMAND\n"
      "4242                Tl                  do_signal_stop      00:12               /usr/bin/python3 -c import torch\n"
      "4243                Sl                  futex_wait_queue    00:12               /usr/bin/python3 worker\n"
      "4244                D                   nfs_wait            01:00               cat /mnt/data\n"
      "4245                Z                   -                   00:03               [sh] <defunct>\n"
      "=== kernel stacks (/proc/PID/stack)\n-- pid 4242\n4246 T x 00:01 not either\n";
  EXPECT_EQ(StuckProcesses(answer),
            (std::vector<std::string>{"pid 4242 stopped (Tl, in do_signal_stop): /usr/bin/python3 -c import torch",
                                      "pid 4244 in uninterruptible sleep (D, in nfs_wait): cat /mnt/data",
                                      "pid 4245 a zombie (Z): [sh] <defunct>"}));
  EXPECT_TRUE(StuckProcesses("=== processes\nPID STAT WCHAN ELAPSED COMMAND\n1 Ss do_wait 00:01 sh\n").empty());
}

TEST(DiagnosticsCommands, TheContainerNameIsQuotedOnTheLine) {
  const std::string s = ContainerDiagnosticsScript(DockerCommands({"sudo", "-n", "docker"}), "c'; rm -rf /", seconds(5));
  EXPECT_NE(s.find("$D_T sudo -n docker inspect 'c'\\''; rm -rf /'"), std::string::npos) << s;
  EXPECT_NE(s.find("D_T='timeout -s KILL 5'"), std::string::npos) << s;
}

TEST(DiagnosticsCommands, OnlyLinesInTheDriversXidFormatAreMarked) {
  const std::string log =
      "[  100.000001] NVRM: Xid (PCI:0000:3b:00): 48, pid=1, name=x, DBE\n"
      "[  101.000000] python[77]: segfault at 0 NVRM: Xid (PCI:0000:3b:00): 79, \n"
      "Dec 07 host kernel: nothing\n"
      "[  102.5] host kernel: NVRM: Xid (PCI:0000:3b:00.0): 31, pid=2, name=y, MMU Fault";
  int n = -1;
  const std::string marked = MarkXidLines(log, &n);
  EXPECT_EQ(n, 2);
  EXPECT_EQ(marked, std::string(kXidMark) + "[  100.000001] NVRM: Xid (PCI:0000:3b:00): 48, pid=1, name=x, DBE\n" +
                        "[  101.000000] python[77]: segfault at 0 NVRM: Xid (PCI:0000:3b:00): 79, \n"
                        "Dec 07 host kernel: nothing\n" +
                        std::string(kXidMark) + "[  102.5] host kernel: NVRM: Xid (PCI:0000:3b:00.0): 31, pid=2, name=y, MMU Fault");
}

TEST(DiagnosticsCommands, TextPastItsCapIsCutAtALineEndWithANoteAndStaysWithinTheCap) {
  EXPECT_EQ(CapText("short\n", 100), "short\n");
  std::string big;
  for (int i = 0; i < 1000; ++i) big += "line " + std::to_string(i) + " of the output\n";
  const std::string cut = CapText(big, 4096);
  EXPECT_LE(cut.size(), 4096u);
  EXPECT_EQ(cut.rfind(big.substr(0, 1000), 0), 0u);
  const size_t note = cut.rfind("(cut at 4096 bytes: ");
  ASSERT_NE(note, std::string::npos) << cut;
  EXPECT_EQ(cut[note - 1], '\n');
  EXPECT_NE(cut.substr(0, note - 1).rfind(" of the output"), std::string::npos);
  EXPECT_EQ(cut.substr(note - 15, 15), " of the output\n");
}

TEST(DiagnosticsCommands, NamesBecomeFileNamesWithoutSlashesOrDots) {
  EXPECT_EQ(FileNamePart("gpu-01.example.com"), "gpu-01.example.com");
  EXPECT_EQ(FileNamePart("user@h/../x y"), "user_h_.._x_y");
  EXPECT_EQ(FileNamePart(".."), "_..");
  EXPECT_EQ(FileNamePart("[::1]:22"), "___1__22");
}

}  // namespace
}  // namespace barge::runner::diagnostics
