// A running job that goes wrong, on the test bed (issue #42): a real
// PyTorch gloo job with one rank frozen mid all-reduce (a hang, found by
// the heartbeat files, restarted from the job's checkpoint), about 45 s.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <memory>
#include <regex>
#include <string>
#include <thread>

#include "tests/support/bed_job.h"

using barge::testing::BedHostsYaml;
using barge::testing::CliOutcome;
using barge::testing::GetBed;
using barge::testing::IsoSeconds;
using barge::testing::JobContainers;
using barge::testing::JobDir;
using barge::testing::RunShell;
using barge::testing::WallSeconds;

namespace {

class HealthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_GE(GetBed().hosts.size(), 3u) << "these tests need 3 namespace hosts";
    job_ = std::make_unique<JobDir>(std::string("health-") + ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  // No container of the job may be left on any host.
  void TearDown() override {
    for (size_t i = 0; i < 3; ++i) {
      const auto& h = GetBed().hosts[i];
      const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (!JobContainers(h).empty() && std::chrono::steady_clock::now() < end) {
        std::this_thread::sleep_for(std::chrono::milliseconds(250));
      }
      EXPECT_EQ(JobContainers(h), "") << "a container of the job was left on " << h.name;
      RunShell("DOCKER_HOST=" + h.docker_host + " docker ps -aq --filter label=barge.job | DOCKER_HOST=" +
               h.docker_host + " xargs -r docker rm -f >/dev/null 2>&1");
    }
    job_.reset();
  }
  nlohmann::json Show(const std::string& name) {
    CliOutcome o = job_->Barge("show --json " + name);
    EXPECT_EQ(o.code, 0) << o.err;
    try {
      return nlohmann::json::parse(o.out);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "barge show --json: " << e.what() << "\n" << o.out;
      return {};
    }
  }
  // The first event of `kind`, or a null object.
  static nlohmann::json FirstEvent(const nlohmann::json& show, const std::string& kind) {
    if (show.contains("events")) {
      for (const auto& e : show["events"]) {
        if (e["kind"] == kind) return e;
      }
    }
    return {};
  }
  // The host PID of the main process of rank `rank`'s container on bed host
  // `h` (the bed's hosts share this machine's PID namespace).
  static int MainPid(size_t h, int rank) {
    const std::string engine = "DOCKER_HOST=" + GetBed().hosts[h].docker_host + " docker ";
    const std::string pid = RunShell(engine + "ps -q --filter label=barge.rank=" + std::to_string(rank) + " | " +
                                     "DOCKER_HOST=" + GetBed().hosts[h].docker_host +
                                     " xargs -r docker inspect --format '{{.State.Pid}}'");
    return std::atoi(pid.c_str());
  }

  std::unique_ptr<JobDir> job_;
};

// The job: 3 ranks all-reduce 10 steps, half a second apart; rank 0 writes
// the step reached to its host's checkpoint directory, and a new attempt
// starts from there (broadcast to the others). Each rank touches its
// heartbeat file after every all-reduce.
std::string TorchJob(const std::string& image) {
  return "name: frozen\nimage: " + image + "\nimage_pull: never\n" + BedHostsYaml(0, 3) +
         "container:\n  network: host\n  volumes: ['/tmp/barge-health-ckpt:/ckpt']\n"
         "stop_grace: 2s\nlease: 10s\n"
         "progress: {heartbeat: {file: /tmp/beat, within: 12s}, every: 2s, on_hang: restart}\n"
         "restart: {max_restarts: 1, on: [hang], backoff: 1s}\n"
         "command:\n  - /usr/bin/python3\n  - -c\n  - |\n"
         "    import datetime, os, pathlib, time\n"
         "    import torch\n"
         "    import torch.distributed as dist\n"
         "    dist.init_process_group('gloo', init_method='env://', timeout=datetime.timedelta(seconds=120))\n"
         "    rank = dist.get_rank()\n"
         "    start = torch.tensor([0])\n"
         "    if rank == 0 and os.path.exists('/ckpt/step'):\n"
         "        start[0] = int(open('/ckpt/step').read())\n"
         "    dist.broadcast(start, 0)\n"
         "    print(f'from step {int(start)}', flush=True)\n"
         "    for step in range(int(start), 10):\n"
         "        t = torch.ones(1)\n"
         "        dist.all_reduce(t)\n"
         "        pathlib.Path('/tmp/beat').touch()\n"
         "        if rank == 0:\n"
         "            open('/ckpt/step.new', 'w').write(str(step + 1))\n"
         "            os.replace('/ckpt/step.new', '/ckpt/step')\n"
         "        print(f'step {step} sum {t.item():.0f}', flush=True)\n"
         "        time.sleep(0.5)\n"
         "    dist.barrier()\n"
         "    print('done', flush=True)\n";
}

// A rank frozen by SIGSTOP inside its container in the middle of the steps
// (the others then wait in their all-reduce, every rank alive): the hang
// is declared within heartbeat.within plus one period (plus the bed's
// slack) of the freeze, the job restarts (on_hang: restart) and completes
// from its checkpoint.
TEST_F(HealthTest, AFrozenGlooRankIsAHangWithinTheBoundPlusOnePeriodAndTheRestartCompletesFromTheCheckpoint) {
  const auto& bed = GetBed();
  ASSERT_EQ(bed.raw.count("BED_TORCH_IMAGE"), 1u) << "bring the bed up with BARGE_BED_TORCH=1";
  for (size_t i = 0; i < 3; ++i) {
    barge::testing::InHost(bed.hosts[i], "rm -rf /tmp/barge-health-ckpt && mkdir -p /tmp/barge-health-ckpt");
  }
  job_->Write(TorchJob(bed.raw.at("BED_TORCH_IMAGE")));
  const pid_t barge = job_->Start("run job.yaml");
  ASSERT_TRUE(job_->WaitFor("out.txt", "step 3 sum 3", std::chrono::seconds(90)))
      << barge::testing::ReadWholeFile(job_->path() / "err.txt");
  const int frozen = MainPid(1, 1);
  ASSERT_GT(frozen, 1);
  const double froze = WallSeconds();
  ASSERT_EQ(kill(frozen, SIGSTOP), 0);
  CliOutcome o = job_->Wait(barge, std::chrono::seconds(150));
  kill(frozen, SIGCONT);  // gone already, if all went well
  EXPECT_EQ(o.code, 0) << o.err << o.out;
  EXPECT_NE(o.out.find("done"), std::string::npos) << o.out;
  // The first attempt's 3 ranks started at 0, the second's where the
  // checkpoint said (step 4 or later: frozen after step 3).
  size_t from_zero = 0;
  for (size_t at = o.out.find("from step 0\n"); at != std::string::npos; at = o.out.find("from step 0\n", at + 1)) ++from_zero;
  EXPECT_EQ(from_zero, 3u) << o.out;
  EXPECT_TRUE(std::regex_search(o.out, std::regex("from step [4-9]\n"))) << o.out;
  EXPECT_NE(o.err.find("the job made no progress: no rank touched /tmp/beat for"), std::string::npos) << o.err;
  const nlohmann::json show = Show("frozen");
  const nlohmann::json hang = FirstEvent(show, "hang");
  ASSERT_FALSE(hang.is_null()) << show.dump(2);
  const double took = IsoSeconds(hang["at"]) - froze;
  EXPECT_LE(took, 12 + 2 + 1.5) << "heartbeat.within 12 s + every 2 s + slack";
  EXPECT_EQ(show["job"]["restart_count"], 1);
  // The first attempt's diagnostics bundle names the frozen rank: its
  // process is stopped (state T), the others wait in their all-reduce.
  EXPECT_TRUE(std::regex_search(o.err, std::regex("diagnostics: \\S+/diagnostics/attempt-0 \\(a process stopped or stuck: rank 1 \\(" +
                                                  bed.hosts[1].address + "\\)\\)")))
      << o.err;
  const std::string index = barge::testing::ReadWholeFile(job_->path() / "home" / "runs" / show["job"]["id"].get<std::string>() /
                                                          "diagnostics" / "attempt-0" / "index.txt");
  EXPECT_TRUE(std::regex_search(index, std::regex("  rank 1 \\(" + bed.hosts[1].address + "\\): pid [0-9]+ stopped \\(T")))
      << index;
  // Only rank 1 in the "look here first" list (the hang's own lines, under
  // "why:", name every rank).
  const size_t first = index.find("look here first:");
  ASSERT_NE(first, std::string::npos) << index;
  const std::string look = index.substr(first, index.find("\nfiles:", first) - first);
  EXPECT_EQ(look.find("  rank 0 ("), std::string::npos) << look;
  EXPECT_EQ(look.find("  rank 2 ("), std::string::npos) << look;
  std::printf("hang-table: frozen gloo rank | %.1f s (bound 12 s + 2 s) | restarted, completed from the checkpoint\n",
              took);
  std::printf("%s\n", o.err.c_str());
  for (size_t i = 0; i < 3; ++i) barge::testing::InHost(bed.hosts[i], "rm -rf /tmp/barge-health-ckpt");
}

}  // namespace
