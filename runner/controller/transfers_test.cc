// Transfers on its own (transfers.h): given the job's context, on scripted
// fake hosts (tests/support/part_world.h).
#include "runner/controller/transfers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "runner/controller/job_state.h"
#include "runner/remote/docker_commands.h"
#include "tests/support/part_world.h"

namespace barge::runner {
namespace transfers_test {

using std::chrono::milliseconds;
using std::chrono::seconds;

struct TransfersWorld {
  TransfersWorld() : world(PartWorld::Yaml()), transfers(&world.ctx()) {}
  PartWorld world;
  internal::Transfers transfers;

  // A local file of `bytes` bytes in the world's state directory.
  std::string LocalFile(size_t bytes) {
    const std::string path = (world.state_dir() / "payload.bin").string();
    std::ofstream(path, std::ios::binary) << std::string(bytes, 'x');
    return path;
  }
  // Each host's command: its job directory's "received".
  static std::string Receive(internal::HostState& hs) { return "cat > " + hs.job_dir + "/received"; }
};

int Count(const std::vector<std::string>& lines, const std::string& part) {
  return static_cast<int>(std::count_if(lines.begin(), lines.end(), [&](const std::string& l) {
    return l.find(part) != std::string::npos;
  }));
}

TEST(Transfers, AStreamedFileRunsTheCommandOnEveryTargetAndGivesEachHostsOutcome) {
  TransfersWorld w;
  ASSERT_TRUE(w.world.Connect());
  w.world.host("h2").On("/received", FakeReply{1, "", "cat: write error: No space left on device\n"});
  const std::string file = w.LocalFile(3 << 20);
  auto results = w.transfers.StreamFile(file, w.world.hosts().All(), &TransfersWorld::Receive,
                                        Phase::kUpload, "shipping the payload");
  internal::HostState* h1 = &w.world.host_state(0);
  internal::HostState* h2 = &w.world.host_state(1);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_TRUE(results.at(h1).ok());
  EXPECT_FALSE(results.at(h2).ok());
  EXPECT_EQ(results.at(h2).Reason(), "cat: write error: No space left on device");
  EXPECT_EQ(w.world.host("h1").lines(), std::vector<std::string>{"cat > " + h1->job_dir + "/received"});
  EXPECT_EQ(w.world.host("h2").lines(), std::vector<std::string>{"cat > " + h2->job_dir + "/received"});
  const auto& edges = w.world.recorder().edges;
  EXPECT_EQ(Count(edges, "upload began h"), 2);
  EXPECT_EQ(Count(edges, "upload ok h1"), 1);
  EXPECT_EQ(Count(edges, "upload failed h2: cat: write error: No space left on device"), 1);
  EXPECT_EQ(w.world.recorder().steps,
            (std::vector<std::string>{"upload began shipping the payload (2)", "upload ended"}));
}

TEST(Transfers, AStreamCountsTheBytesItSentAndUnreportedSaysNothingOfStepsOrPhases) {
  TransfersWorld w;
  ASSERT_TRUE(w.world.Connect());
  uint64_t sent = 5;
  auto results = w.transfers.StreamFile(w.LocalFile(3 << 20), w.world.hosts().All(), &TransfersWorld::Receive,
                                        Phase::kPush, "relaying", &sent, /*report=*/false);
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(sent, 5u + 2u * (3u << 20));  // added to what was there
  EXPECT_TRUE(w.world.recorder().steps.empty());
  EXPECT_EQ(Count(w.world.recorder().edges, "push "), 0);
}

TEST(Transfers, AFileThatCannotBeReadFailsEveryHostsPartAndNoHostGetsAnEmptyOne) {
  TransfersWorld w;
  ASSERT_TRUE(w.world.Connect());
  const std::string missing = (w.world.state_dir() / "gone.tar").string();
  auto results = w.transfers.StreamFile(missing, w.world.hosts().All(), &TransfersWorld::Receive,
                                        Phase::kUpload, "shipping the workdir");
  ASSERT_EQ(results.size(), 2u);
  for (const auto& [hs, o] : results) {
    EXPECT_FALSE(o.ok()) << hs->name;
    EXPECT_EQ(o.Reason(), "cannot read " + missing + ": No such file or directory") << hs->name;
  }
  EXPECT_TRUE(w.world.host("h1").lines().empty()) << "a host was sent a command to receive nothing";
  EXPECT_TRUE(w.world.host("h2").lines().empty());
  EXPECT_EQ(Count(w.world.recorder().edges, "upload failed h"), 2);
}

TEST(Transfers, AnInterruptEndsAStreamAndLeavesTheHostsThatDidNotAnswerOutOfTheResult) {
  TransfersWorld w;
  ASSERT_TRUE(w.world.Connect());
  w.world.host("h2").On("/received", FakeReply{.hang = true});
  w.world.host("h2").When("/received", [&] {
    w.world.loop().AddTimer(w.world.loop().Now() + seconds(2), [&] { w.world.ctx().interrupts = 1; });
  });
  const auto began = w.world.loop().Now();
  auto results = w.transfers.StreamFile(w.LocalFile(10), w.world.hosts().All(), &TransfersWorld::Receive,
                                        Phase::kUpload, "shipping");
  EXPECT_LT(w.world.loop().Now() - began, seconds(3));
  ASSERT_EQ(results.size(), 1u);
  EXPECT_TRUE(results.count(&w.world.host_state(0)));
  EXPECT_EQ(Count(w.world.recorder().edges, "upload failed h2: interrupted"), 1);
  EXPECT_EQ(w.world.recorder().steps.back(), "upload ended");
}

TEST(Transfers, AStreamThatNeverEndsGivesUpAfterAnHour) {
  TransfersWorld w;
  ASSERT_TRUE(w.world.Connect());
  w.world.host("h1").On("/received", FakeReply{.hang = true});
  const auto began = w.world.loop().Now();
  auto results = w.transfers.StreamFile(w.LocalFile(10), w.world.hosts().All(), &TransfersWorld::Receive,
                                        Phase::kUpload, "shipping");
  EXPECT_GE(w.world.loop().Now() - began, seconds(3600));
  EXPECT_LT(w.world.loop().Now() - began, seconds(3601));
  ASSERT_EQ(results.size(), 1u);
  EXPECT_TRUE(results.count(&w.world.host_state(1)));
  EXPECT_EQ(Count(w.world.recorder().edges, "upload failed h1: timed out"), 1);
}

TEST(Transfers, WrittenFilesGoThroughStdinNeverOnTheCommandLineWithOneStepEdgePerHost) {
  TransfersWorld w;
  ASSERT_TRUE(w.world.Connect());
  internal::HostState* h1 = &w.world.host_state(0);
  internal::HostState* h2 = &w.world.host_state(1);
  const std::string key = "secret-key-material";
  const std::string config = "secret-config-material";
  std::map<internal::HostState*, std::vector<std::pair<std::string, const std::string*>>> writes;
  writes[h1] = {{h1->job_dir + "/keys/id", &key}, {h1->job_dir + "/keys/config", &config}};
  writes[h2] = {{h2->job_dir + "/keys/id", &key}};
  w.world.host("h1").On("/keys/config", FakeReply{0, "", "", milliseconds(50)});
  Status s = w.transfers.WriteFiles(writes, "keys");
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(w.world.host("h1").lines(),
            (std::vector<std::string>{WriteSecretCommand(h1->job_dir, h1->job_dir + "/keys/id"),
                                      WriteSecretCommand(h1->job_dir, h1->job_dir + "/keys/config")}));
  EXPECT_EQ(w.world.host("h2").lines(),
            std::vector<std::string>{WriteSecretCommand(h2->job_dir, h2->job_dir + "/keys/id")});
  for (const std::string& l : w.world.fake().all_lines()) {
    EXPECT_EQ(l.find("material"), std::string::npos) << l;
  }
  // The host's upload ends once, when its last file is written (the hosts
  // begin in the order of the map, keyed by pointer: not checked).
  const auto& edges = w.world.recorder().edges;
  ASSERT_EQ(edges.size(), 4u);
  EXPECT_EQ(Count({edges[0], edges[1]}, "upload began h1"), 1);
  EXPECT_EQ(Count({edges[0], edges[1]}, "upload began h2"), 1);
  EXPECT_EQ(edges[2], "upload ok h2");
  EXPECT_EQ(edges[3], "upload ok h1");
  EXPECT_EQ(w.world.recorder().steps, (std::vector<std::string>{"upload began writing keys (2)", "upload ended"}));
}

TEST(Transfers, FailedWritesGiveOneErrorListingEveryHostsFirstReason) {
  TransfersWorld w;
  ASSERT_TRUE(w.world.Connect());
  internal::HostState* h1 = &w.world.host_state(0);
  internal::HostState* h2 = &w.world.host_state(1);
  const std::string value = "v";
  std::map<internal::HostState*, std::vector<std::pair<std::string, const std::string*>>> writes;
  writes[h1] = {{h1->job_dir + "/file-a", &value}, {h1->job_dir + "/file-b", &value}};
  writes[h2] = {{h2->job_dir + "/file-a", &value}};
  w.world.host("h1").On("/file-a", FakeReply{1, "", "first: read-only file system\n"});
  w.world.host("h1").On("/file-b", FakeReply{1, "", "second: read-only file system\n", milliseconds(50)});
  w.world.host("h2").On("/file-a", FakeReply{1, "", "not your directory\n"});
  Status s = w.transfers.WriteFiles(writes, "secrets");
  ASSERT_FALSE(s.ok());
  // One line per host, in the order of a map keyed by pointer.
  EXPECT_EQ(s.message().rfind("writing secrets failed:\n  ", 0), 0u) << s.message();
  EXPECT_NE(s.message().find("\n  h1: first: read-only file system"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("\n  h2: not your directory"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().size(), std::string("writing secrets failed:\n  h1: first: read-only file system\n  h2: not "
                                            "your directory").size())
      << s.message();
  EXPECT_EQ(Count(w.world.recorder().edges, "upload failed h1: first: read-only file system"), 1);
  EXPECT_EQ(Count(w.world.recorder().edges, "upload failed h2: not your directory"), 1);
}

TEST(Transfers, WritesThatDoNotFinishFailInTimeOrOnAnInterrupt) {
  TransfersWorld w;
  ASSERT_TRUE(w.world.Connect());
  internal::HostState* h1 = &w.world.host_state(0);
  const std::string value = "v";
  std::map<internal::HostState*, std::vector<std::pair<std::string, const std::string*>>> writes;
  writes[h1] = {{h1->job_dir + "/a", &value}};
  w.world.host("h1").On("/a", FakeReply{.hang = true});
  const auto began = w.world.loop().Now();
  Status s = w.transfers.WriteFiles(writes, "secrets");
  EXPECT_EQ(s.message(), "writing secrets to the hosts did not finish in time");
  // connect_timeout (10 s by default) + 60 s.
  EXPECT_GE(w.world.loop().Now() - began, seconds(70));
  EXPECT_LT(w.world.loop().Now() - began, seconds(71));

  w.world.host("h1").When("/a", [&] { w.world.ctx().interrupts = 1; });
  s = w.transfers.WriteFiles(writes, "secrets");
  EXPECT_EQ(s.message(), "interrupted while writing secrets");
}

}  // namespace transfers_test
}  // namespace barge::runner
