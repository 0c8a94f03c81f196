// Diagnostics on its own (diagnostics.h): given the job's context and the
// attempt, on scripted fake hosts and the virtual clock
// (tests/support/part_world.h).
#include "runner/controller/diagnostics.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "runner/controller/job_state.h"
#include "runner/remote/diagnostics_commands.h"
#include "tests/support/part_world.h"
#include "tests/support/scoped_env.h"

namespace barge::runner {
namespace diagnostics_test {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kSecret[] = "hunter2-secret-value";

struct DiagWorld {
  explicit DiagWorld(const std::string& extra = "", const std::string& hosts = "[h1, h2]")
      : token("BARGE_DIAG_TEST_TOKEN", std::string(kSecret)),
        world(PartWorld::Yaml("secrets:\n  TOKEN: {env: BARGE_DIAG_TEST_TOKEN}\n" + extra, hosts)),
        diagnostics(&world.ctx(), &world.attempt()) {
    EXPECT_TRUE(world.Connect());
    world.MakeNodes();
    EXPECT_TRUE(world.OpenSink());
    for (auto& n : world.attempt().nodes) {
      n->run_attempted = true;
      n->phase = internal::NodePhase::kRunning;
    }
  }
  const std::string& Name(int rank) const { return world.plan().nodes.at(rank).container.name; }
  // Collects; the virtual time it took.
  milliseconds Collect(const std::string& why, std::string* dir) {
    const auto began = world.loop().Now();
    *dir = diagnostics.Collect(why);
    return std::chrono::duration_cast<milliseconds>(world.loop().Now() - began);
  }
  static std::string Read(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }

  barge::testing::ScopedEnv token;
  PartWorld world;
  internal::Diagnostics diagnostics;
};

bool Has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(Diagnostics, AFailedAttemptWritesAFilePerRankAndPerHostAndAnIndexAndNamesTheBundle) {
  DiagWorld w;
  internal::NodeState& worker = *w.world.attempt().nodes[1];
  worker.phase = internal::NodePhase::kExited;
  worker.exit_code = 3;
  worker.end_reason = "exit code 3";
  w.world.attempt().sink->Line(1, Stream::kStderr, "", "RuntimeError: CUDA error, token " + std::string(kSecret));
  w.world.attempt().sink->Line(1, Stream::kStdout, "", "step 41 loss nan");
  w.world.host("h2").On("inspect " + w.Name(1),
                        FakeReply{0, "=== docker inspect\n[{\"State\": {\"ExitCode\": 3, \"Env\": [\"TOKEN=" +
                                         std::string(kSecret) + "\"]}}]\n=== processes\nPID STAT WCHAN\n"});
  w.world.host("h1").On("inspect " + w.Name(0),
                        FakeReply{0, "=== processes\nPID STAT WCHAN ELAPSED COMMAND\n4242 Dl futex_wait 00:10 train\n"});
  w.world.host("h1").On("kernel log since the job began",
                        FakeReply{0, "=== kernel log\n[ 10.5] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=t, fallen off\n"
                                     "[ 10.6] eth0: link up\n"});
  std::string dir;
  const milliseconds took = w.Collect("node_failed: rank 1 (h2) exited with code 3", &dir);
  EXPECT_LT(took, seconds(1));
  const fs::path bundle = fs::path(w.world.state_dir()) / "runs" / "abcd1234" / "diagnostics" / "attempt-0";
  EXPECT_EQ(fs::path(dir), bundle);
  for (const char* f : {"index.txt", "rank-0-h1.txt", "rank-1-h2.txt", "host-h1.txt", "host-h2.txt"}) {
    EXPECT_TRUE(fs::is_regular_file(bundle / f)) << f;
    EXPECT_EQ(fs::status(bundle / f).permissions() & fs::perms::all, fs::perms::owner_read | fs::perms::owner_write) << f;
  }
  const std::string rank1 = DiagWorld::Read(bundle / "rank-1-h2.txt");
  EXPECT_TRUE(Has(rank1, "rank 1 (worker) on h2, container " + w.Name(1) + "\nas barge saw it: exited, exit code 3\n")) << rank1;
  EXPECT_TRUE(Has(rank1, "line(s) of output in this attempt\nRuntimeError: CUDA error, token [redacted]")) << rank1;
  EXPECT_TRUE(Has(rank1, "step 41 loss nan\n=== its host's answer: answered in 0.0 s\n")) << rank1;
  EXPECT_TRUE(Has(rank1, "\"ExitCode\": 3")) << rank1;
  const std::string rank0 = DiagWorld::Read(bundle / "rank-0-h1.txt");
  EXPECT_TRUE(Has(rank0, "4242 Dl futex_wait 00:10 train")) << rank0;
  const std::string host1 = DiagWorld::Read(bundle / "host-h1.txt");
  EXPECT_TRUE(Has(host1, std::string(diagnostics::kXidMark) + "[ 10.5] NVRM: Xid (PCI:0000:3b:00): 79")) << host1;
  EXPECT_TRUE(Has(host1, "\n[ 10.6] eth0: link up")) << host1;
  // No secret value in any file.
  for (const auto& e : fs::directory_iterator(bundle)) EXPECT_FALSE(Has(DiagWorld::Read(e.path()), kSecret)) << e.path();
  const std::string index = DiagWorld::Read(bundle / "index.txt");
  EXPECT_TRUE(Has(index, "why: node_failed: rank 1 (h2) exited with code 3\n")) << index;
  EXPECT_TRUE(Has(index, "host-h1.txt")) << index;
  EXPECT_TRUE(Has(index, "host h1: answered in 0.0 s, 1 Xid line(s) marked")) << index;
  EXPECT_TRUE(Has(index, "caps: 256.0 KiB a file, 4.0 MiB the bundle")) << index;
  // Rank 0's process in uninterruptible sleep is where to look first.
  EXPECT_TRUE(Has(index, "look here first: processes stopped (T), in uninterruptible sleep (D) or zombies (Z):\n"
                         "  rank 0 (h1): pid 4242 in uninterruptible sleep (Dl, in futex_wait): train\nfiles:"))
      << index;
  EXPECT_TRUE(w.world.recorder().Said("diagnostics: " + bundle.string() + " (a process stopped or stuck: rank 0 (h1))"))
      << w.world.recorder().AllMessages();
  // One question per node and one per host, each bounded.
  for (const char* h : {"h1", "h2"}) {
    ASSERT_EQ(w.world.host(h).lines().size(), 2u) << h;
    for (const std::string& l : w.world.host(h).lines()) EXPECT_EQ(l.rfind("timeout -s KILL 35 sh -c ", 0), 0u) << l;
  }
  EXPECT_TRUE(w.world.recorder().Said("diagnostics: " + bundle.string())) << w.world.recorder().AllMessages();
  ASSERT_EQ(w.world.recorder().events.size(), 1u);
  EXPECT_TRUE(Has(w.world.recorder().events[0], "diagnostics")) << w.world.recorder().events[0];
  EXPECT_TRUE(Has(w.world.recorder().events[0], bundle.string() + ": node_failed: rank 1 (h2)"))
      << w.world.recorder().events[0];
}

TEST(Diagnostics, AHostThatNeverAnswersIsWrittenAsSuchAndHoldsTheTeardownNoLongerThanTheBound) {
  DiagWorld w;
  w.world.host("h2").On("sh -c", FakeReply{.hang = true});
  w.world.host("h1").On("inspect " + w.Name(0), FakeReply{0, "PID STAT\n1 S\n", "", seconds(2)});
  std::string dir;
  const milliseconds took = w.Collect("hang: the job made no progress", &dir);
  EXPECT_GE(took, internal::Diagnostics::kBound);
  EXPECT_LE(took, internal::Diagnostics::kBound + milliseconds(200));
  const std::string rank0 = DiagWorld::Read(fs::path(dir) / "rank-0-h1.txt");
  EXPECT_TRUE(Has(rank0, "answered in 2.0 s\nPID STAT\n1 S\n")) << rank0;
  const std::string rank1 = DiagWorld::Read(fs::path(dir) / "rank-1-h2.txt");
  EXPECT_TRUE(Has(rank1, "=== its host's answer: no answer within 30 s\n(no answer within 30 s)\n")) << rank1;
  const std::string index = DiagWorld::Read(fs::path(dir) / "index.txt");
  EXPECT_TRUE(Has(index, "collected in 30.0 s (bound 30 s)")) << index;
  EXPECT_TRUE(Has(index, "host h2: no answer within 30 s")) << index;
}

TEST(Diagnostics, AnInterruptEndsTheWaitAtOnce) {
  DiagWorld w;
  w.world.host("h2").On("sh -c", FakeReply{.hang = true});
  w.world.loop().AddTimer(w.world.loop().Now() + seconds(3), [&w] { ++w.world.ctx().interrupts; });
  std::string dir;
  const milliseconds took = w.Collect("host_lost", &dir);
  EXPECT_LE(took, milliseconds(3300));
  EXPECT_TRUE(Has(DiagWorld::Read(fs::path(dir) / "index.txt"), "cut short by an interrupt"));
  // Interrupted before it began: nothing is asked or written.
  const size_t asked = w.world.fake().all_lines().size();
  EXPECT_EQ(w.diagnostics.Collect("again"), "");
  EXPECT_EQ(w.world.fake().all_lines().size(), asked);
}

TEST(Diagnostics, ALostHostIsNotAskedAndNodesWithoutAContainerAreLeftOut) {
  DiagWorld w("", "[{address: h1, nodes: 2}, h2]");
  w.world.host_state(1).lost = true;
  w.world.attempt().nodes[1]->run_attempted = false;
  std::string dir;
  w.Collect("host_lost: h2 is lost", &dir);
  EXPECT_TRUE(w.world.host("h2").lines().empty());
  // h1: rank 0's question and the host's.
  EXPECT_EQ(w.world.host("h1").lines().size(), 2u);
  EXPECT_FALSE(fs::exists(fs::path(dir) / "rank-1-h1.txt"));
  const std::string rank2 = DiagWorld::Read(fs::path(dir) / "rank-2-h2.txt");
  EXPECT_TRUE(Has(rank2, "=== its host's answer: not asked: the host is lost\n")) << rank2;
  EXPECT_TRUE(Has(DiagWorld::Read(fs::path(dir) / "host-h2.txt"), "host h2: not asked: the host is lost")) << dir;
  // No node had a container: no bundle.
  for (auto& n : w.world.attempt().nodes) n->run_attempted = false;
  EXPECT_EQ(w.diagnostics.Collect("x"), "");
}

TEST(Diagnostics, EachFileAndTheWholeBundleStayWithinTheirCaps) {
  DiagWorld w("", "[{address: h1, nodes: 10}, {address: h2, nodes: 10}]");
  // Every answer is 600 KB: each file is cut at the file cap, and the
  // bundle's cap leaves the last ones out.
  std::string lines;
  for (int i = 0; i < 6000; ++i) lines += "process line " + std::to_string(i) + " " + std::string(80, 'p') + "\n";
  w.world.host("h1").On("sh -c", FakeReply{0, lines});
  w.world.host("h2").On("sh -c", FakeReply{0, lines});
  std::string dir;
  w.Collect("node_failed: rank 3", &dir);
  uintmax_t total = 0;
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    const uintmax_t size = fs::file_size(e.path());
    EXPECT_LE(size, internal::Diagnostics::kFileCap) << e.path();
    total += size;
    ++files;
  }
  EXPECT_LE(total, internal::Diagnostics::kBundleCap);
  EXPECT_GT(total, internal::Diagnostics::kBundleCap - internal::Diagnostics::kIndexCap - internal::Diagnostics::kFileCap);
  EXPECT_LT(files, 1 + 20 + 2);
  const std::string rank0 = DiagWorld::Read(fs::path(dir) / "rank-0-h1.txt");
  EXPECT_TRUE(Has(rank0, "(cut at 262144 bytes: ")) << rank0.substr(rank0.size() - 200);
  const std::string index = DiagWorld::Read(fs::path(dir) / "index.txt");
  EXPECT_TRUE(Has(index, "left out (the bundle's cap of 4.0 MiB reached)")) << index;
  EXPECT_TRUE(Has(index, "host-h2.txt")) << index;
}

}  // namespace diagnostics_test
}  // namespace barge::runner
