// A running job that goes wrong, on the test bed (issue #42): a real
// PyTorch gloo job with one rank frozen mid all-reduce (a hang, found by
// the heartbeat files, restarted from the job's checkpoint), about 45 s;
// a rank frozen while the others go on, a hang traced to its host and
// written to that host's failure record only (issue #44), about 22 s, and
// ranks that all go silent together, a hang no host's record keeps, about
// 15 s;
// and a rank whose container's CPU is cut (a straggler, named with its
// host), about 15 s.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

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

  // The last `n` lines of `out` that start with `prefix`.
  static std::string LastLinesOf(const std::string& out, const std::string& prefix, size_t n) {
    std::vector<std::string> lines;
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);) {
      if (line.rfind(prefix, 0) == 0) lines.push_back(line);
    }
    std::string last;
    for (size_t i = lines.size() > n ? lines.size() - n : 0; i < lines.size(); ++i) last += lines[i] + "\n";
    return last;
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

// The failure record's hang entries on `h`'s engine ("hang JOBNAME DETAIL"
// lines), asked from this machine.
std::string HangEntriesOn(const barge::testing::BedHost& h) {
  return RunShell("DOCKER_HOST=" + h.docker_host +
                  " timeout 20 docker ps -a --filter label=barge.fault=hang --format "
                  "'{{.Label \"barge.fault\"}} {{.Label \"barge.hold.name\"}} {{.Label \"barge.fault.detail\"}}'");
}

// Three ranks print a step every half second for 12 s, then wait silently
// (as ranks that reached a collective the frozen one never joins would);
// rank 1's process is frozen (SIGSTOP) after its third step. With
// progress.within 6s (pattern '^step') the hang is declared once no rank
// has stepped for 6 s: rank 1's host went quiet about 10 s before the
// others, more than the bound,
// so the hang is traced to it (issue #44): the error and the hang event
// name it, and its engine gets a `hang` entry in its failure record; the
// other two hosts' engines get none.
TEST_F(HealthTest, ARankFrozenWhileTheOthersGoOnIsAHangTracedToItsHostWhoseFailureRecordAloneKeepsIt) {
  const auto& bed = GetBed();
  const std::string frozen_host = bed.hosts[1].address;
  job_->Write("name: hostquiet\nimage: " + bed.image + "\n" + BedHostsYaml(0, 3) +
              "stop_grace: 1s\nprogress: {pattern: '^step', within: 6s, every: 1s}\n"
              "command: [sh, -c, 'i=0; while [ $i -lt 24 ]; do echo step $i; i=$((i+1)); sleep 0.5; done; "
              "exec sleep 3600']\n");
  const pid_t barge = job_->Start("run job.yaml");
  ASSERT_TRUE(job_->WaitFor("out.txt", "[1 worker " + frozen_host + "] step 2\n", std::chrono::seconds(60)))
      << barge::testing::ReadWholeFile(job_->path() / "err.txt");
  const int frozen = MainPid(1, 1);
  ASSERT_GT(frozen, 1);
  ASSERT_EQ(kill(frozen, SIGSTOP), 0);
  CliOutcome o = job_->Wait(barge, std::chrono::seconds(90));
  kill(frozen, SIGCONT);
  EXPECT_EQ(o.code, 123) << o.err;
  EXPECT_NE(o.out.find("step 23"), std::string::npos) << "the other ranks did not go on:\n" << o.out;
  EXPECT_TRUE(std::regex_search(o.err, std::regex("no rank printed a line matching /\\^step/ for [0-9]+s \\(progress:\\)")))
      << o.err;
  EXPECT_NE(o.err.find("traced to " + frozen_host + ": its ranks went quiet "), std::string::npos) << o.err;
  const nlohmann::json hang = FirstEvent(Show("hostquiet"), "hang");
  ASSERT_FALSE(hang.is_null());
  EXPECT_EQ(hang["host"], frozen_host) << hang.dump();
  // Written in the background on the host: polled.
  std::string entries;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while ((entries = HangEntriesOn(bed.hosts[1])).empty() && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  EXPECT_EQ(entries.rfind("hang hostquiet traced to " + frozen_host + ": its ranks went quiet ", 0), 0u) << entries;
  EXPECT_EQ(HangEntriesOn(bed.hosts[0]), "");
  EXPECT_EQ(HangEntriesOn(bed.hosts[2]), "");
  std::printf("%s\nrecord on %s: %s\n", o.err.c_str(), frozen_host.c_str(), entries.c_str());
}

// The same ranks all going silent together after their steps (a hang of
// the whole job): the hang names no host, and no host's record gets an
// entry.
TEST_F(HealthTest, RanksThatAllGoSilentTogetherAreAHangOfTheWholeJobThatNoHostsRecordKeeps) {
  const auto& bed = GetBed();
  job_->Write("name: allquiet\nimage: " + bed.image + "\n" + BedHostsYaml(0, 3) +
              "stop_grace: 1s\nprogress: {pattern: '^step', within: 4s, every: 1s}\n"
              "command: [sh, -c, 'i=0; while [ $i -lt 10 ]; do echo step $i; i=$((i+1)); sleep 0.5; done; "
              "exec sleep 3600']\n");
  CliOutcome o = job_->Barge("run job.yaml");
  EXPECT_EQ(o.code, 123) << o.err;
  EXPECT_NE(o.err.find("the job made no progress: no rank printed a line matching /^step/ for"), std::string::npos)
      << o.err;
  EXPECT_EQ(o.err.find("traced to"), std::string::npos) << o.err;
  EXPECT_EQ(o.err.find("recorded on the host"), std::string::npos) << o.err;
  // A write would be in the background: give it the time the traced test's took.
  std::this_thread::sleep_for(std::chrono::seconds(3));
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(HangEntriesOn(bed.hosts[i]), "") << bed.hosts[i].address;
}

// Three ranks step through a fixed amount of work, each timing its own
// steps (progress.stragglers.time: the seconds a rank prints, not the
// lines' arrival at the controller, which batches and evens them out);
// rank 2's container gets a twentieth of a CPU (docker update --cpus
// 0.05): barge names it, with its host, as a straggler (a line, an event,
// the job's status). The ranks step until barge is interrupted.
TEST_F(HealthTest, ARankWhoseContainerCpuIsCutIsNamedAsAStragglerWithItsHost) {
  const auto& bed = GetBed();
  ASSERT_EQ(bed.raw.count("BED_TORCH_IMAGE"), 1u) << "bring the bed up with BARGE_BED_TORCH=1";
  job_->Write("name: slow\nimage: " + bed.raw.at("BED_TORCH_IMAGE") + "\nimage_pull: never\n" + BedHostsYaml(0, 3) +
              "stop_grace: 1s\n"
              "progress: {pattern: '^step [0-9]+', stragglers: {factor: 2, steps: 3, time: 'took ([0-9.]+) s'}, "
              "every: 1s}\n"
              "command:\n  - /usr/bin/python3\n  - -c\n  - |\n"
              "    import time\n"
              "    n = 0\n"
              "    while True:\n"
              "        t = time.monotonic()\n"
              "        sum(range(3000000))\n"
              "        n += 1\n"
              "        print(f'step {n} took {time.monotonic() - t:.3f} s', flush=True)\n");
  const pid_t barge = job_->Start("run job.yaml");
  // Rank 2's own steps (its container exists by then: the head's steps
  // come before the workers start).
  const auto& h3 = bed.hosts[2];
  const bool stepping = job_->WaitFor("out.txt", "[2 worker " + h3.address + "] step 5 took", std::chrono::seconds(60));
  const std::string engine = "DOCKER_HOST=" + h3.docker_host + " timeout 20 docker ";
  // Before the cut no rank stands out (the steps are alike).
  const std::string before_cut = barge::testing::ReadWholeFile(job_->path() / "err.txt");
  const std::string cut = stepping ? RunShell(engine + "ps -q --filter label=barge.rank=2 | DOCKER_HOST=" +
                                                  h3.docker_host + " xargs -r docker update --cpus 0.05 2>&1")
                                     : "";
  const std::string quota =
      RunShell(engine + "ps -q --filter label=barge.rank=2 | DOCKER_HOST=" + h3.docker_host +
               " xargs -r docker inspect --format '{{.HostConfig.NanoCpus}}' 2>&1");
  const bool named = stepping && job_->WaitFor("err.txt", "straggler: rank 2 (" + h3.address + ")",
                                               std::chrono::seconds(60));
  kill(barge, SIGINT);
  CliOutcome o = job_->Wait(barge, std::chrono::seconds(60));
  ASSERT_TRUE(stepping) << o.err << o.out;
  EXPECT_EQ(before_cut.find("straggler:"), std::string::npos) << before_cut;
  EXPECT_EQ(quota, "50000000\n") << "docker update --cpus 0.05 on rank 2's container: " << cut;
  EXPECT_TRUE(named) << o.err << "\nrank 2's last lines:\n" << LastLinesOf(o.out, "[2 ", 8);
  EXPECT_EQ(o.err.find("straggler: rank 0"), std::string::npos) << o.err;
  EXPECT_EQ(o.err.find("straggler: rank 1"), std::string::npos) << o.err;
  const nlohmann::json show = Show("slow");
  const nlohmann::json straggler = FirstEvent(show, "straggler");
  ASSERT_FALSE(straggler.is_null()) << show.dump(2);
  EXPECT_EQ(straggler["host"], h3.address);
  EXPECT_NE(straggler["detail"].get<std::string>().find("rank 2 (" + h3.address + ")"), std::string::npos);
  bool status_said = false;
  for (const auto& e : show["events"]) {
    status_said |= e["kind"] == "running" && e["detail"] == "3 node(s); straggling: rank 2 (" + h3.address + ")";
  }
  EXPECT_TRUE(status_said) << show.dump(2);
  std::printf("%s\n", o.err.c_str());
}

}  // namespace
