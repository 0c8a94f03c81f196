#include "runner/ui/live_hosts.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "runner/remote/hosts_view.h"

namespace barge::runner::ui {
namespace {

Hold Listed(const std::string& name, const std::string& job, long long since) {
  Hold h;
  h.id = "id-" + name;
  h.name = name;
  h.job_id = job;
  h.job_name = "name of " + job;
  h.user = "ann";
  h.machine = "laptop";
  h.since = since;
  h.lease = 600;
  h.expires = since + 600;
  h.format = 2;
  return h;
}

// What `barge hosts --json` prints (HostsJson) reads back whole: the
// page and the command line show the same listing.
TEST(UiLiveHosts, TheJsonOfBargeHostsReadsBackHoldsLeasesTicketsAndContainers) {
  const long long now = 1714564800;
  HostView v;
  v.host = "h1";
  v.now = now;
  v.holds = {Listed("barge-hold-gpu-1", "a1", now - 60), Listed("barge-lease-a1." + std::to_string(now - 5), "a1", now - 60),
             Listed("barge-ticket-c1", "c1", now - 30), Listed("barge-lease-c1." + std::to_string(now - 5), "c1", now - 30),
             Listed("barge-ticket-b1", "b1", now - 40), Listed("barge-lease-b1." + std::to_string(now - 5), "b1", now - 40)};
  v.holds[0].gpus = "1";
  ApplyEngineLeases(&v.holds);
  v.containers = {{"cid", "barge-a1-0", "a1", "head", "0", "Up 1 minute"}};
  HostView gone;
  gone.host = "h2";
  gone.error = "connect: refused";
  Result<std::vector<LiveHost>> back = ParseHostsJson(HostsJson({v, gone}).dump(2));
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->size(), 2u);
  const LiveHost& h = (*back)[0];
  EXPECT_EQ(h.host, "h1");
  EXPECT_EQ(h.error, "");
  ASSERT_EQ(h.holds.size(), 6u);
  EXPECT_EQ(h.holds[0].name, "barge-hold-gpu-1");
  EXPECT_EQ(h.holds[0].job, "a1");
  EXPECT_EQ(h.holds[0].job_name, "name of a1");
  EXPECT_EQ(h.holds[0].user, "ann");
  EXPECT_EQ(h.holds[0].machine, "laptop");
  EXPECT_EQ(h.holds[0].gpus, "1");
  EXPECT_EQ(h.holds[0].since, "2024-05-01T11:59:00Z");
  EXPECT_FALSE(h.holds[0].stale_at.empty());
  EXPECT_FALSE(h.holds[0].stale);
  EXPECT_FALSE(h.holds[0].ticket);
  EXPECT_TRUE(h.holds[1].lease);
  // b1 began to wait before c1: first in the queue.
  EXPECT_TRUE(h.holds[2].ticket);
  EXPECT_EQ(h.holds[2].queue_position, 2);
  EXPECT_EQ(h.holds[4].queue_position, 1);
  EXPECT_EQ(h.holds[0].queue_position, std::nullopt);
  ASSERT_EQ(h.containers.size(), 1u);
  EXPECT_EQ(h.containers[0].name, "barge-a1-0");
  EXPECT_EQ(h.containers[0].rank, "0");
  EXPECT_EQ(h.containers[0].status, "Up 1 minute");
  EXPECT_EQ((*back)[1].error, "connect: refused");
  EXPECT_FALSE(ParseHostsJson("barge: no such file").ok());
  EXPECT_FALSE(ParseHostsJson("{}").ok());
}

TEST(UiLiveHosts, AHostsFailureRecordReadsBackWithWhetherItIsOut) {
  HostView v = ParseHostView(
      "h1", "now 2000\n"
            "hold\tf1\tbarge-fault-1900-j1-1-0\t\ttrain\talice\tbox\t\t1900\t\t\t\tengine\tj1\t\tno answer\n"
            "hold\tf2\tbarge-fault-1960-j3-1-0\t\teval\tbob\tbox2\t1\t1960\t\t\t\tgpu_health\tj3\tGPU-u1\tXid 79\n"
            "hold\tf3\tbarge-fault-1970-j4-1-0\t\teval\tbob\tbox2\t\t1970\t\t\t\thost_lost\tj4\t\tlost\n");
  v.rule.allowed = 1;
  Result<std::vector<LiveHost>> back = ParseHostsJson(HostsJson({v}).dump());
  ASSERT_TRUE(back.ok()) << back.status().message();
  const LiveRecord& r = (*back)[0].record;
  EXPECT_TRUE(r.out);
  EXPECT_EQ(r.counted, 2);
  EXPECT_EQ(r.allowed, 1);
  EXPECT_EQ(r.window_s, 24 * 3600);
  EXPECT_EQ(r.gpus_out, std::vector<int>{1});
  ASSERT_EQ(r.entries.size(), 3u);
  EXPECT_EQ(r.entries[1].kind, "gpu_health");  // newest first
  EXPECT_EQ(r.entries[1].gpu, 1);
  EXPECT_EQ(r.entries[1].job, "j3");
  EXPECT_EQ(r.entries[1].user, "bob");
  EXPECT_EQ(r.entries[1].detail, "Xid 79");
  EXPECT_EQ(r.entries[2].gpu, std::nullopt);
  EXPECT_TRUE((*back)[0].holds.empty()) << "a record entry is not a hold";
}

class LiveHostsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/barge-live-hosts-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  // A stand-in for barge: a shell script.
  std::string Script(const std::string& body) {
    const std::string path = dir_ + "/barge";
    std::ofstream(path) << "#!/bin/sh\n" << body;
    chmod(path.c_str(), 0700);
    return path;
  }
  std::string dir_;
};

TEST_F(LiveHostsTest, RunsBargeHostsJsonWithTheStoreAndReadsWhatItPrintsEvenWhenAHostFailed) {
  LiveHostsSource src;
  src.barge_binary = Script(
      "echo \"$@\" > \"$BARGE_HOME/args\"\n"
      "echo '[{\"host\": \"h1\", \"holds\": [], \"containers\": []}, {\"host\": \"h2\", \"error\": \"down\", "
      "\"holds\": [], \"containers\": []}]'\n"
      "echo 'barge: h2: down' >&2\nexit 125\n");
  src.state_dir = dir_;
  src.hosts_list = "h1,h2";
  src.max_age = std::chrono::seconds(60);
  LiveHosts live(src);
  ASSERT_TRUE(live.enabled());
  std::optional<LiveHostsReading> r = live.Read();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->error, "");
  EXPECT_EQ(r->command, "barge hosts --json --hosts h1,h2");
  ASSERT_EQ(r->hosts.size(), 2u);
  EXPECT_EQ(r->hosts[1].error, "down");
  std::string args;
  std::getline(std::ifstream(dir_ + "/args"), args);
  EXPECT_EQ(args, "hosts --json --hosts h1,h2");
  // Younger than max_age: shown again, not asked again.
  std::filesystem::remove(dir_ + "/args");
  ASSERT_TRUE(live.Read());
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/args"));
}

TEST_F(LiveHostsTest, AFailureOrAHangIsSaidAndTheChildIsStoppedAtTheDeadline) {
  LiveHostsSource src;
  src.barge_binary = Script("echo 'barge: job.yaml:3: hosts: a list' >&2\nexit 125\n");
  src.state_dir = dir_;
  src.job_file = "/x/job.yaml";
  std::optional<LiveHostsReading> r = LiveHosts(src).Read();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->command, "barge hosts --json /x/job.yaml");
  EXPECT_EQ(r->error, "exit 125: barge: job.yaml:3: hosts: a list");
  EXPECT_TRUE(r->hosts.empty());

  src.barge_binary = Script("sleep 30 &\nwait\n");
  src.deadline = std::chrono::seconds(1);
  const auto t0 = std::chrono::steady_clock::now();
  r = LiveHosts(src).Read();
  ASSERT_TRUE(r);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
  EXPECT_EQ(r->error, "no answer within 1 s (stopped)");

  LiveHostsSource none;
  EXPECT_FALSE(LiveHosts(none).enabled());
  EXPECT_FALSE(LiveHosts(none).Read());
}

}  // namespace
}  // namespace barge::runner::ui
