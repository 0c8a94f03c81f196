// Jobs whose hosts are a Slurm allocation (`slurm:`), on the bed's real
// Slurm 22.05 cluster (tests/bed/slurm.sh: slurmctld here, a slurmd in each
// of h1..h3): queued behind another user's allocation, granted, run on the
// nodes over SSH exactly as listed hosts, and released (scancel) however the
// job ends; `barge down` of a queued job, of a running one and of one whose
// controller was killed; an allocation that Slurm ends under a running job;
// nodes reached as job steps (transport: srun), also with another user
// reading the steps' command lines.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <tuple>
#include <utility>

#include "tests/support/bed_job.h"

namespace {

using barge::testing::CliOutcome;
using barge::testing::GetBed;
using barge::testing::JobDir;
using barge::testing::JobIdIn;
using barge::testing::RunShell;

// The bed's Slurm configuration (tests/bed/slurm.sh writes slurm.env).
std::string SlurmConf() { return GetBed().dir + "/slurm/slurm.conf"; }

// A Slurm client command with the bed's configuration; stdout and stderr.
std::string Slurm(const std::string& command, int* code = nullptr) {
  return RunShell("SLURM_CONF=" + SlurmConf() + " " + command + " 2>&1", code);
}

// The same as the bed's other user (uid 65534), the way a colleague would.
std::string AsColleague(const std::string& command) {
  return RunShell("cd / && SLURM_CONF=" + SlurmConf() +
                  " setpriv --reuid=65534 --regid=65534 --clear-groups -- " + command + " 2>&1");
}

// The Slurm job id in barge's "Slurm job N submitted" line.
std::string SlurmIdIn(const std::string& err) {
  std::smatch m;
  if (std::regex_search(err, m, std::regex("Slurm job ([0-9]+) submitted"))) return m[1];
  return "";
}

// `command`'s answer once it is `want`, or its last after 20 s: an ended
// job stays in the queue (CG), and its nodes `completing`, while the
// nodes' epilog runs.
std::string Settled(const std::string& command, const std::string& want) {
  std::string got = Slurm(command);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (got != want && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    got = Slurm(command);
  }
  return got;
}

// The job's end state in the bed's jobcomp file ("" while it has none).
std::string EndState(const std::string& slurm_id) {
  std::string state = RunShell("sed -n 's/^JobId=" + slurm_id + " .* JobState=\\([A-Z_]*\\) .*/\\1/p' " +
                               GetBed().dir + "/slurm/jobcomp.txt 2>/dev/null | tail -n1");
  while (!state.empty() && state.back() == '\n') state.pop_back();
  return state;
}

bool WaitForEndState(const std::string& slurm_id, std::chrono::seconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (EndState(slurm_id).empty() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return !EndState(slurm_id).empty();
}

class SlurmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_GE(GetBed().hosts.size(), 3u) << "the Slurm tests need 3 namespace hosts";
    // Every node idle and responding (a node a test drained and resumed
    // shows "idle*" until slurmctld hears from its slurmd again).
    int code = -1;
    std::string nodes;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    do {
      nodes = Slurm("sinfo -h -N -o '%N %T'", &code);
      if (code == 0 && nodes == "h1 idle\nh2 idle\nh3 idle\n") break;
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    } while (std::chrono::steady_clock::now() < until);
    ASSERT_EQ(code, 0) << "the bed's Slurm does not answer (tests/bed/slurm.sh up):\n" << nodes;
    ASSERT_EQ(nodes, "h1 idle\nh2 idle\nh3 idle\n") << "Slurm's nodes are not all idle within 60 s";
    setenv("SLURM_CONF", SlurmConf().c_str(), 1);
  }
  void TearDown() override {
    // Nothing of a test may outlive it: its allocations and containers.
    for (const std::string& id : slurm_ids_) Slurm("scancel " + id);
    for (const auto& h : GetBed().hosts) {
      for (const std::string& id : jobs_) {
        EXPECT_EQ(barge::testing::RunShell("DOCKER_HOST=" + h.docker_host +
                                           " timeout 20 docker ps -aq --filter label=barge.job=" + id),
                  "")
            << "job " << id << " left containers on " << h.name;
        RunShell("DOCKER_HOST=" + h.docker_host + " timeout 20 docker ps -aq --filter label=barge.job=" + id +
                 " | xargs -r docker --host " + h.docker_host + " rm -f >/dev/null 2>&1");
      }
    }
    Slurm("scancel -u nobody");
  }

  // The job file: `command` on 3 Slurm nodes, reached over SSH like listed hosts.
  // `slurm_extra`: more keys of its slurm: block.
  std::string Job(const std::string& name, const std::string& command, const std::string& slurm_extra = "",
                  int nodes = 3) const {
    const auto& bed = GetBed();
    return "name: " + name + "\nimage: " + bed.image + "\ncommand: " + command +
           "\nstop_grace: 1s\n"
           "slurm:\n  partition: gpu\n  nodes: " + std::to_string(nodes) + "\n  time: 5m\n" + slurm_extra +
           "ssh:\n  user: " + bed.user + "\n  identity_file: " + bed.key + "\n  known_hosts: " +
           bed.known_hosts + "\n  connect_timeout: 10s\n";
  }
  // Notes the barge and Slurm job ids `err` names (for TearDown).
  void Seen(const std::string& err) {
    if (std::string id = JobIdIn(err); !id.empty()) jobs_.push_back(id);
    if (std::string id = SlurmIdIn(err); !id.empty()) slurm_ids_.push_back(id);
  }
  // `barge run job.yaml` in `dir`, once its nodes run (within 60 s): its
  // pid and the barge and Slurm job ids it printed (pid -1 after a test
  // failure when it never got there).
  struct Running {
    pid_t pid = -1;
    std::string id;
    std::string slurm_id;
  };
  Running StartUntilRunning(JobDir& dir) {
    Running r;
    r.pid = dir.Start("run job.yaml");
    const bool running = dir.WaitFor("err.txt", "node(s); logs in", std::chrono::seconds(60));
    const std::string started = barge::testing::ReadWholeFile(dir.path() / "err.txt");
    Seen(started);
    r.id = JobIdIn(started);
    r.slurm_id = SlurmIdIn(started);
    if (!running || r.slurm_id.empty()) {
      ADD_FAILURE() << "the job's nodes did not run within 60 s:\n" << started;
      kill(r.pid, SIGKILL);
      dir.Wait(r.pid, std::chrono::seconds(10));
      r.pid = -1;
    }
    return r;
  }
  // A colleague's allocation of every node; its Slurm job id.
  std::string ColleagueTakesEveryNode() {
    const std::string out = AsColleague("salloc --no-shell -N3 -t 5 --exclusive --job-name=colleague");
    std::smatch m;
    EXPECT_TRUE(std::regex_search(out, m, std::regex("Granted job allocation ([0-9]+)"))) << out;
    return m.size() > 1 ? std::string(m[1]) : "";
  }

  std::vector<std::string> jobs_;
  std::vector<std::string> slurm_ids_;
};

TEST_F(SlurmTest, AThreeNodeJobQueuedBehindAnotherUsersAllocationRunsOnTheGrantedNodesThenReleasesThem) {
  const std::string colleague = ColleagueTakesEveryNode();
  ASSERT_FALSE(colleague.empty());
  JobDir dir("slurm-queued");
  dir.Write(Job("slurm-env", "[\"sh\", \"-c\", \"echo rank=$RANK world=$WORLD_SIZE master=$MASTER_ADDR "
                             "node=$BARGE_NODE_RANK\"]"));
  const pid_t pid = dir.Start("run job.yaml");
  // It waits in Slurm's queue, and says so.
  EXPECT_TRUE(dir.WaitFor("err.txt", "queued in gpu: ", std::chrono::seconds(30)))
      << barge::testing::ReadWholeFile(dir.path() / "err.txt");
  const std::string queued = barge::testing::ReadWholeFile(dir.path() / "err.txt");
  const std::string slurm_id = SlurmIdIn(queued);
  ASSERT_FALSE(slurm_id.empty()) << queued;
  slurm_ids_.push_back(slurm_id);
  EXPECT_EQ(Slurm("squeue -h -j " + slurm_id + " -o '%T %j'"),
            "PENDING barge-" + JobIdIn(queued) + "-slurm-env\n");
  // `barge ls` meanwhile (its output apart: the running barge writes to
  // the directory's out.txt and err.txt).
  const std::string ls = RunShell("cd " + dir.path().string() + " && BARGE_HOME=home " BARGE_BINARY " ls 2>&1");
  EXPECT_NE(ls.find("waiting (slurm " + slurm_id + ")"), std::string::npos) << ls;
  // The colleague's allocation ends: the job gets the nodes and runs.
  Slurm("scancel " + colleague);
  CliOutcome o = dir.Wait(pid, std::chrono::seconds(120));
  Seen(o.err);
  std::printf("barge run (stderr):\n%s\nstdout:\n%s\n", o.err.c_str(), o.out.c_str());
  ASSERT_EQ(o.code, 0) << o.err;
  const auto& hosts = GetBed().hosts;
  for (int rank = 0; rank < 3; ++rank) {
    const std::string role = rank == 0 ? "head" : "worker";
    const std::string line = "[" + std::to_string(rank) + " " + role + " " + hosts[rank].address + "] rank=" +
                             std::to_string(rank) + " world=3 master=" + hosts[0].address +
                             " node=" + std::to_string(rank);
    EXPECT_NE(o.out.find(line), std::string::npos) << "no line '" << line << "' in:\n" << o.out;
  }
  EXPECT_NE(o.err.find("Slurm job " + slurm_id + " granted 3 node(s): h1 (" + hosts[0].address + "), h2 (" +
                       hosts[1].address + "), h3 (" + hosts[2].address + ")"),
            std::string::npos)
      << o.err;
  EXPECT_NE(o.err.find("Slurm job " + slurm_id + " released"), std::string::npos) << o.err;
  // Released: Slurm knows it no more in its queue, and recorded what barge did.
  EXPECT_EQ(Settled("squeue -h -j " + slurm_id, ""), "");
  ASSERT_TRUE(WaitForEndState(slurm_id, std::chrono::seconds(30)));
  EXPECT_EQ(EndState(slurm_id), "CANCELLED");
  EXPECT_EQ(EndState(colleague), "CANCELLED");
  // The logs are kept like any job's, and show says which allocation it was.
  const std::string id = JobIdIn(o.err);
  CliOutcome logs = dir.Barge("logs " + id);
  EXPECT_NE(logs.out.find("rank=2 world=3 master=" + hosts[0].address), std::string::npos) << logs.out;
  CliOutcome show = dir.Barge("show " + id);
  EXPECT_NE(show.out.find("slurm:      job " + slurm_id + ", nodes h1,h2,h3, released"), std::string::npos)
      << show.out;
  EXPECT_NE(show.out.find("succeeded, exit code 0"), std::string::npos) << show.out;
}

TEST_F(SlurmTest, DownOfAQueuedJobCancelsItsAllocationAndNothingRuns) {
  const std::string colleague = ColleagueTakesEveryNode();
  ASSERT_FALSE(colleague.empty());
  slurm_ids_.push_back(colleague);
  JobDir dir("slurm-down-queued");
  dir.Write(Job("slurm-dq", "[\"sleep\", \"60\"]"));
  const pid_t pid = dir.Start("run job.yaml");
  ASSERT_TRUE(dir.WaitFor("err.txt", "queued in gpu: ", std::chrono::seconds(30)))
      << barge::testing::ReadWholeFile(dir.path() / "err.txt");
  const std::string queued = barge::testing::ReadWholeFile(dir.path() / "err.txt");
  const std::string id = JobIdIn(queued), slurm_id = SlurmIdIn(queued);
  Seen(queued);
  CliOutcome down = dir.Barge("down " + id);
  EXPECT_EQ(down.code, 0) << down.out << down.err;
  CliOutcome o = dir.Wait(pid, std::chrono::seconds(60));
  EXPECT_EQ(o.code, 130) << o.err;
  EXPECT_EQ(o.err.find("node(s); logs in"), std::string::npos) << "it ran:\n" << o.err;
  ASSERT_TRUE(WaitForEndState(slurm_id, std::chrono::seconds(30)));
  EXPECT_EQ(EndState(slurm_id), "CANCELLED");
  EXPECT_EQ(Settled("squeue -h -j " + slurm_id, ""), "");
  CliOutcome show = dir.Barge("show " + id);
  EXPECT_NE(show.out.find("cancelled"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("job " + slurm_id + ", never granted, released"), std::string::npos) << show.out;
}

TEST_F(SlurmTest, DownOfARunningJobRemovesItsContainersAndReleasesItsAllocation) {
  JobDir dir("slurm-down-running");
  dir.Write(Job("slurm-dr", "[\"sleep\", \"120\"]"));
  const auto [pid, id, slurm_id] = StartUntilRunning(dir);
  ASSERT_NE(pid, -1);
  EXPECT_EQ(Slurm("squeue -h -j " + slurm_id + " -o %T"), "RUNNING\n");
  CliOutcome down = dir.Barge("down " + id);
  EXPECT_EQ(down.code, 0) << down.out << down.err;
  CliOutcome o = dir.Wait(pid, std::chrono::seconds(60));
  EXPECT_EQ(o.code, 130) << o.err;
  ASSERT_TRUE(WaitForEndState(slurm_id, std::chrono::seconds(30)));
  EXPECT_EQ(EndState(slurm_id), "CANCELLED");
  for (const auto& h : GetBed().hosts) EXPECT_EQ(barge::testing::JobContainers(h), "") << h.name;
}

// What Slurm granted an allocation on its one node, from Slurm itself
// (`scontrol -o show job -d`, read here, not through barge): how many
// CPUs, its memory in MiB and its GRES GPU indices ("" for none).
struct Grant {
  int cpus = 0;
  long long mem_mb = 0;
  std::string gpus;
};
Grant GrantOf(const std::string& slurm_id) {
  const std::string line = Slurm("scontrol -o show job -d " + slurm_id);
  std::smatch m;
  Grant g;
  if (!std::regex_search(line, m,
                         std::regex(" Nodes=h[0-9]+ CPU_IDs=([0-9,-]+) Mem=([0-9]+)(?: GRES=[^ ]*\\(IDX:([0-9,-]+)\\))?"))) {
    ADD_FAILURE() << "no per-node details in: " << line;
    return g;
  }
  const std::string ids = m[1];
  for (size_t at = 0; at <= ids.size();) {
    const size_t comma = std::min(ids.find(',', at), ids.size());
    const std::string part = ids.substr(at, comma - at);
    const size_t dash = part.find('-');
    g.cpus += dash == std::string::npos ? 1 : std::stoi(part.substr(dash + 1)) - std::stoi(part) + 1;
    at = comma + 1;
  }
  g.mem_mb = std::stoll(m[2]);
  g.gpus = m[3];
  return g;
}

// The engine-side GPU stand-in (tests/bed/gpu-standin.sh) on bed host
// `host` while this lives: its engine accepts --gpus and DeviceRequests
// with no GPU. Each switch restarts that host's dockerd, so Slurm's job
// steps are pointed at the new one again (slurm.sh rebind).
class GpuStandIn {
 public:
  explicit GpuStandIn(std::string host) : host_(std::move(host)) {
    int code = -1;
    said_ = RunShell(kScript + " on " + host_ + " 2>&1 && " + kSlurmScript + " rebind 2>&1", &code);
    ok_ = code == 0;
  }
  ~GpuStandIn() {
    int code = -1;
    const std::string off = RunShell(kScript + " off " + host_ + " 2>&1 && " + kSlurmScript + " rebind 2>&1", &code);
    EXPECT_EQ(code, 0) << off;
  }
  GpuStandIn(const GpuStandIn&) = delete;
  GpuStandIn& operator=(const GpuStandIn&) = delete;
  bool ok() const { return ok_; }
  const std::string& said() const { return said_; }

 private:
  inline static const std::string kScript = BARGE_SOURCE_DIR "/tests/bed/gpu-standin.sh";
  inline static const std::string kSlurmScript = BARGE_SOURCE_DIR "/tests/bed/slurm.sh";
  std::string host_;
  std::string said_;
  bool ok_ = false;
};

// exclusive: false. Two jobs on one node at once (Slurm places both on h1,
// one of its two cores and one of its two GRES GPUs each): each container
// is held to what Slurm granted it, compared with Slurm's own record of the
// grant. The first job asks for neither CPUs nor memory: Slurm grants one
// CPU and DefMemPerCPU (512 MiB), so a container given the request rather
// than the grant would run unlimited. Limits are read inside the container
// from its cgroup (v1 or v2); the GPUs from the engine's DeviceRequests.
TEST_F(SlurmTest, TwoJobsShareANodeEachContainerHeldToWhatSlurmGrantedIt) {
  const GpuStandIn gpus("h1");
  ASSERT_TRUE(gpus.ok()) << gpus.said();
  const std::string on_h1 = "  exclusive: false\n  gpus_per_node: 1\n  extra: [--nodelist=h1]\n";
  const std::string show =
      "[\"sh\", \"-c\", \"if [ -f /sys/fs/cgroup/cpu.max ]; then read q p < /sys/fs/cgroup/cpu.max; "
      "m=$(cat /sys/fs/cgroup/memory.max); else q=$(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us); "
      "p=$(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us); m=$(cat /sys/fs/cgroup/memory/memory.limit_in_bytes); fi; "
      "echo share cpu=$q/$p mem=$m; sleep 120\"]";
  JobDir first("slurm-share-1");
  // The stand-in gives the containers an nvidia-smi, not the host.
  const std::string no_driver = "health: {gpus: off}\n";
  first.Write(Job("slurm-sh1", show, on_h1, 1) + no_driver);
  const Running a = StartUntilRunning(first);
  ASSERT_NE(a.pid, -1);
  JobDir second("slurm-share-2");
  second.Write(Job("slurm-sh2", show, on_h1 + "  cpus_per_node: 1\n  mem_per_node: 200m\n", 1) + no_driver);
  const Running b = StartUntilRunning(second);
  ASSERT_NE(b.pid, -1);
  EXPECT_EQ(Slurm("squeue -h -j " + a.slurm_id + "," + b.slurm_id + " -o '%T %N'"), "RUNNING h1\nRUNNING h1\n");
  const Grant ga = GrantOf(a.slurm_id), gb = GrantOf(b.slurm_id);
  // The grant the first job did not ask for: Slurm's defaults.
  EXPECT_EQ(ga.cpus, 1);
  EXPECT_EQ(ga.mem_mb, 512);
  EXPECT_EQ(gb.mem_mb, 200);
  ASSERT_NE(ga.gpus, "");
  ASSERT_NE(gb.gpus, "");
  EXPECT_NE(ga.gpus, gb.gpus) << "Slurm gave both the same GPU";
  const auto& h1 = GetBed().hosts[0];
  for (const auto& [dir, job, grant] : {std::tuple{&first, &a, ga}, std::tuple{&second, &b, gb}}) {
    const std::string want = "share cpu=" + std::to_string(grant.cpus * 100000) + "/100000 mem=" +
                             std::to_string(grant.mem_mb * 1024 * 1024) + "\n";
    EXPECT_TRUE(dir->WaitFor("out.txt", want, std::chrono::seconds(10)))
        << "want " << want << "in:\n" << barge::testing::ReadWholeFile(dir->path() / "out.txt");
    // The engine's own record of the container's GPUs: its GRES index.
    EXPECT_EQ(RunShell("DOCKER_HOST=" + h1.docker_host + " docker inspect -f "
                       "'{{range .HostConfig.DeviceRequests}}{{json .DeviceIDs}}{{end}}' "
                       "$(DOCKER_HOST=" + h1.docker_host + " docker ps -q --filter label=barge.job=" + job->id + ")"),
              "[\"" + grant.gpus + "\"]\n")
        << "job " << job->id;
  }
  for (const auto& [dir, job] : {std::pair{&first, &a}, std::pair{&second, &b}}) {
    CliOutcome down = dir->Barge("down " + job->id);
    EXPECT_EQ(down.code, 0) << down.out << down.err;
    EXPECT_EQ(dir->Wait(job->pid, std::chrono::seconds(60)).code, 130);
  }
}

// The issue's "controller SIGKILLed mid-job": ended through `barge down` of
// the orphaned job (its recorded nodes and Slurm job), not by waiting for
// the allocation's time limit (over a minute in Slurm's granularity).
TEST_F(SlurmTest, DownOfAJobWhoseControllerWasKilledRemovesItsContainersAndCancelsItsAllocation) {
  JobDir dir("slurm-killed");
  dir.Write(Job("slurm-kill", "[\"sleep\", \"120\"]"));
  const auto [pid, id, slurm_id] = StartUntilRunning(dir);
  ASSERT_NE(pid, -1);
  std::this_thread::sleep_for(std::chrono::seconds(1));
  kill(pid, SIGKILL);
  dir.Wait(pid, std::chrono::seconds(10));
  // The allocation and the containers outlive the controller ...
  EXPECT_EQ(Slurm("squeue -h -j " + slurm_id + " -o %T"), "RUNNING\n");
  size_t running = 0;
  for (const auto& h : GetBed().hosts) running += !barge::testing::JobContainers(h).empty();
  EXPECT_EQ(running, 3u);
  // ... until barge down, from the store's record of both.
  CliOutcome down = dir.Barge("down " + id);
  EXPECT_EQ(down.code, 0) << down.out << down.err;
  EXPECT_NE(down.out.find("Slurm job " + slurm_id + " cancelled"), std::string::npos) << down.out;
  for (const auto& h : GetBed().hosts) EXPECT_EQ(barge::testing::JobContainers(h), "") << h.name;
  ASSERT_TRUE(WaitForEndState(slurm_id, std::chrono::seconds(30)));
  EXPECT_EQ(EndState(slurm_id), "CANCELLED");
}

// salloc --no-shell leaves the allocation to its caller: without barge's
// scancel it would run on, idle, until its 5-minute limit.
TEST_F(SlurmTest, AFailedHeadEndsItsAllocationThroughScancelAsTheJobEnds) {
  JobDir dir("slurm-failed-head");
  dir.Write(Job("slurm-fail", "[\"sh\", \"-c\", \"exit 3\"]", "", 1));
  CliOutcome o = dir.Barge("run job.yaml");
  const auto ended_at = std::chrono::steady_clock::now();
  Seen(o.err);
  EXPECT_EQ(o.code, 3) << o.err;
  const std::string slurm_id = SlurmIdIn(o.err);
  ASSERT_FALSE(slurm_id.empty()) << o.err;
  EXPECT_NE(o.err.find("Slurm job " + slurm_id + " released"), std::string::npos) << o.err;
  ASSERT_TRUE(WaitForEndState(slurm_id, std::chrono::seconds(10))) << "the allocation outlived the job";
  EXPECT_LT(std::chrono::steady_clock::now() - ended_at, std::chrono::seconds(10));
  EXPECT_EQ(EndState(slurm_id), "CANCELLED");
  for (const auto& h : GetBed().hosts) EXPECT_EQ(barge::testing::JobContainers(h), "") << h.name;
}

TEST_F(SlurmTest, AnAllocationThatSlurmEndsUnderARunningJobStopsTheJobWithin30Seconds) {
  JobDir dir("slurm-ended");
  dir.Write(Job("slurm-end", "[\"sleep\", \"120\"]"));
  const auto [pid, id, slurm_id] = StartUntilRunning(dir);
  ASSERT_NE(pid, -1);
  // An admin's scancel (the same as a time limit or a preemption to barge),
  // with the nodes' epilog off: barge's own watch of the allocation.
  const std::string off = GetBed().dir + "/slurm/epilog.off";
  RunShell("touch " + off);
  const auto cancelled_at = std::chrono::steady_clock::now();
  Slurm("scancel " + slurm_id);
  CliOutcome o = dir.Wait(pid, std::chrono::seconds(60));
  const auto took = std::chrono::steady_clock::now() - cancelled_at;
  RunShell("rm -f " + off);
  EXPECT_EQ(o.code, 125) << o.err;
  EXPECT_LT(took, std::chrono::seconds(30)) << o.err;
  EXPECT_NE(o.err.find("Slurm ended allocation " + slurm_id + " (CANCELLED"), std::string::npos) << o.err;
  for (const auto& h : GetBed().hosts) EXPECT_EQ(barge::testing::JobContainers(h), "") << h.name;
}

}  // namespace

namespace {

// transport: srun on nodes that refuse SSH: every bed host's sshd is
// stopped for the test (and started again after it, failure included).
class SlurmSrunTest : public SlurmTest {
 protected:
  void SetUp() override {
    SlurmTest::SetUp();
    for (const auto& h : GetBed().hosts) {
      RunShell("kill $(cat " + GetBed().dir + "/" + h.name + "/sshd.pid) 2>/dev/null");
    }
  }
  void TearDown() override {
    const std::string script = GetBed().raw.at("BED_SCRIPT");
    for (const auto& h : GetBed().hosts) {
      RunShell(script + " exec " + h.name + " /usr/sbin/sshd -f " + GetBed().dir + "/" + h.name +
               "/sshd_config -E " + GetBed().dir + "/" + h.name + "/sshd.log");
    }
    SlurmTest::TearDown();
  }
};

TEST_F(SlurmSrunTest, AJobReachesItsNodesAsJobStepsWhenTheyRefuseSsh) {
  const auto& bed = GetBed();
  int code = -1;
  RunShell("timeout 5 ssh -i " + bed.key + " -o UserKnownHostsFile=" + bed.known_hosts +
               " -o ConnectTimeout=3 -o BatchMode=yes " + bed.user + "@" + bed.hosts[1].address + " true",
           &code);
  ASSERT_EQ(code, 255) << "the node still accepts SSH";
  JobDir dir("slurm-srun");
  dir.Write(Job("slurm-steps", "[\"sh\", \"-c\", \"echo rank=$RANK world=$WORLD_SIZE master=$MASTER_ADDR\"]",
                "  transport: srun\n"));
  CliOutcome o = dir.Barge("run job.yaml");
  Seen(o.err);
  std::printf("barge run (stderr):\n%s\nstdout:\n%s\n", o.err.c_str(), o.out.c_str());
  ASSERT_EQ(o.code, 0) << o.err;
  for (int rank = 0; rank < 3; ++rank) {
    const std::string line = "[" + std::to_string(rank) + " " + (rank == 0 ? "head" : "worker") + " " +
                             bed.hosts[rank].address + "] rank=" + std::to_string(rank) +
                             " world=3 master=" + bed.hosts[0].address;
    EXPECT_NE(o.out.find(line), std::string::npos) << "no line '" << line << "' in:\n" << o.out;
  }
  // The engines were driven by the docker CLI in job steps, said once.
  EXPECT_NE(o.err.find("the docker CLI is used there"), std::string::npos) << o.err;
  EXPECT_EQ(o.out.find("slurmstepd"), std::string::npos) << "Slurm's messages in the job's output:\n" << o.out;
  const std::string slurm_id = SlurmIdIn(o.err);
  ASSERT_TRUE(WaitForEndState(slurm_id, std::chrono::seconds(30)));
  EXPECT_EQ(EndState(slurm_id), "CANCELLED");
  for (const auto& h : bed.hosts) EXPECT_EQ(barge::testing::JobContainers(h), "") << h.name;
}

// The same with the steps started on slurm.login over SSH (the bed's
// loopback host, whose sshd sets SLURM_CONF): each step's command line
// reaches srun, and through it the node, on the SSH channel's stdin.
TEST_F(SlurmSrunTest, AJobReachesItsNodesAsJobStepsStartedOnTheLoginHost) {
  const auto& bed = GetBed();
  JobDir dir("slurm-srun-login");
  dir.Write(Job("slurm-steps-login", "[\"sh\", \"-c\", \"echo rank=$RANK world=$WORLD_SIZE\"]",
                "  transport: srun\n  login: " + bed.user + "@" + bed.loopback.address + ":" +
                    std::to_string(bed.loopback.port) + "\n"));
  unsetenv("SLURM_CONF");
  CliOutcome o = dir.Barge("run job.yaml");
  setenv("SLURM_CONF", SlurmConf().c_str(), 1);
  Seen(o.err);
  std::printf("barge run (stderr):\n%s\n", o.err.c_str());
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.err.find("submitted from " + bed.loopback.address), std::string::npos) << o.err;
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_NE(o.out.find("] rank=" + std::to_string(rank) + " world=3"), std::string::npos) << o.out;
  }
  for (const auto& h : bed.hosts) EXPECT_EQ(barge::testing::JobContainers(h), "") << h.name;
}

// transport: srun with another user (uid 65534) of the nodes who reads each
// step's srun command line on the submit host in /proc, as any user may,
// and makes every job directory it names first, in the step's node's /tmp.
// A stand-in `srun` first on the controller's PATH (this machine is the
// submit host) has that user look before it starts the real srun, so the
// other user always wins the race it would otherwise have to run for as
// long as the step takes to start; it writes what it read, and each
// directory it made, to other-user.txt.
class SlurmSrunOtherUserTest : public SlurmSrunTest {
 protected:
  void SetUp() override {
    SlurmSrunTest::SetUp();
    path_ = std::getenv("PATH");
    std::string real = RunShell("command -v srun");
    while (!real.empty() && real.back() == '\n') real.pop_back();
    ASSERT_FALSE(real.empty()) << "no srun on PATH";
    std::filesystem::create_directories(bin_.path() / "bin");
    const std::string stand_in = (bin_.path() / "bin" / "srun").string();
    std::ofstream(stand_in)
        << "#!/bin/sh\nnode=\nfor a in \"$@\"; do case $a in --nodelist=*) node=${a#--nodelist=} ;; esac; done\n"
        << GetBed().raw.at("BED_SCRIPT") << " exec \"$node\" setpriv --reuid=65534 --regid=65534 --clear-groups -- "
        << "/bin/sh -c '\n"
           "  seen=$(tr \"\\0\" \" \" </proc/$1/cmdline)\n"
           "  printf \"%s\\n\" \"$seen\"\n"
           "  for d in $(printf \"%s\\n\" \"$seen\" | grep -o \"/tmp/barge-[0-9a-f]*\\.[a-z0-9]*\" | sort -u); do\n"
           "    mkdir -m 700 \"$d\" && echo \"made $d\"\n"
           "  done' sh $$ </dev/null >>" << (bin_.path() / "other-user.txt").string() << " 2>&1\n"
        << "exec " << real << " \"$@\"\n";
    ASSERT_EQ(chmod(stand_in.c_str(), 0755), 0);
    setenv("PATH", ((bin_.path() / "bin").string() + ":" + path_).c_str(), 1);
  }
  void TearDown() override {
    setenv("PATH", path_.c_str(), 1);
    for (const auto& h : GetBed().hosts) {
      barge::testing::InHost(h, "find /tmp -maxdepth 1 -name 'barge-*' -user 65534 -exec rm -rf {} +");
    }
    SlurmSrunTest::TearDown();
  }
  std::string OtherUserSaw() const { return barge::testing::ReadWholeFile(bin_.path() / "other-user.txt"); }

  JobDir bin_{"srun-other-user"};
  std::string path_;
};

TEST_F(SlurmSrunOtherUserTest, AnotherUserWhoReadsEachStepsSrunCommandLineFindsNoJobDirectoryToMakeFirst) {
  JobDir dir("slurm-srun-other-user");
  dir.Write(Job("slurm-steps-seen",
                "[\"sh\", \"-c\", \"echo rank=$RANK; if [ $RANK = 0 ]; then sleep 1; exit 3; fi\"]",
                "  transport: srun\n"));
  CliOutcome o = dir.Barge("run job.yaml");
  Seen(o.err);
  const std::string saw = OtherUserSaw();
  std::printf("barge run (stderr):\n%s\nwhat the other user read:\n%s\n", o.err.c_str(), saw.c_str());
  // Every step went through the stand-in, and the other user read each
  // one's whole command line.
  size_t steps = 0;
  for (size_t at = saw.find("--jobid="); at != std::string::npos; at = saw.find("--jobid=", at + 1)) ++steps;
  EXPECT_GE(steps, 6u) << saw;
  EXPECT_NE(saw.find("--nodelist=h3"), std::string::npos) << saw;
  // None named a job directory, so none was made first, and the job ran on
  // every node and ended with its head's exit code.
  const std::string id = JobIdIn(o.err);
  ASSERT_FALSE(id.empty()) << o.err;
  EXPECT_EQ(saw.find("/tmp/barge-" + id), std::string::npos) << saw;
  EXPECT_EQ(saw.find("made "), std::string::npos) << saw;
  EXPECT_EQ(o.code, 3) << o.err;
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_NE(o.out.find("] rank=" + std::to_string(rank) + "\n"), std::string::npos) << o.out;
  }
  for (const auto& h : GetBed().hosts) {
    EXPECT_EQ(barge::testing::InHost(h, "ls -d /tmp/barge-" + id + ".* 2>/dev/null"), "") << h.name;
    EXPECT_EQ(barge::testing::JobContainers(h), "") << h.name;
  }
}

}  // namespace

namespace {

// An array through Slurm: each member asks for an allocation of its own, at
// most `parallel` of them at once, so Slurm's queue decides who runs when.
TEST_F(SlurmTest, AnArrayOfSixMembersRunsThroughSlurmAtMostTwoAtOnce) {
  JobDir dir("slurm-array");
  std::string job = Job("slurm-sweep", "[\"sh\", \"-c\", \"echo seed=$seed; sleep 2\"]");
  job.replace(job.find("  nodes: 3\n"), 11, "  nodes: 1\n");
  dir.Write(job + "array: {matrix: {seed: [1, 2, 3, 4, 5, 6]}}\nparallel: 2\n");
  // Slurm's own view while it runs: never more than 2 of the array's
  // allocations at once, pending or running (a released one stays listed,
  // completing, while the nodes' epilog runs: not counted).
  std::atomic<bool> done = false;
  std::atomic<int> most = 0;
  std::thread watch([&] {
    while (!done) {
      const std::string q = Slurm("squeue -h -t PENDING,RUNNING -o %j");
      int n = 0;
      for (size_t at = q.find("-slurm-sweep-"); at != std::string::npos; at = q.find("-slurm-sweep-", at + 1)) ++n;
      most = std::max(most.load(), n);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });
  CliOutcome o = dir.Barge("run job.yaml");
  done = true;
  watch.join();
  std::printf("barge run (stderr):\n%s\nstdout:\n%s\n", o.err.c_str(), o.out.c_str());
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.err.find("6 member(s), 6 to run, at most 2 at once, a Slurm allocation of 1 node(s) each"),
            std::string::npos)
      << o.err;
  EXPECT_NE(o.err.find("succeeded 6"), std::string::npos) << o.err;
  EXPECT_EQ(most.load(), 2) << "allocations of the array seen at once in squeue";
  for (int seed = 1; seed <= 6; ++seed) {
    EXPECT_NE(o.out.find("] seed=" + std::to_string(seed) + "\n"), std::string::npos) << o.out;
  }
  // Every member's allocation was released: none is left in the queue, and
  // each ended CANCELLED (barge's scancel).
  EXPECT_EQ(Settled("squeue -h -o %j | grep -c slurm-sweep", "0\n"), "0\n");
  int members = 0;
  const std::regex member_job("attempt 1: job ([0-9a-f]{8}) on slurm");
  for (auto it = std::sregex_iterator(o.err.begin(), o.err.end(), member_job); it != std::sregex_iterator(); ++it) {
    ++members;
    const std::string name = "Name=barge-" + (*it)[1].str() + "-slurm-sweep-";
    EXPECT_EQ(RunShell("grep -c '" + name + "[0-5] JobState=CANCELLED' " + GetBed().dir + "/slurm/jobcomp.txt"),
              "1\n")
        << name;
  }
  EXPECT_EQ(members, 6) << o.err;
  CliOutcome ls = dir.Barge("ls");
  EXPECT_NE(ls.out.find("6 members"), std::string::npos) << ls.out;
}

}  // namespace

namespace {

// A node whose own state fails preflight (here: the job asks for GPUs and
// the nodes' engines have no NVIDIA runtime) is named with the command an
// operator runs to drain it; barge drains nothing itself, and the command
// it prints works.
TEST_F(SlurmTest, AnUnusableNodeIsNamedWithTheDrainCommandAnOperatorRuns) {
  JobDir dir("slurm-drain");
  std::string job = Job("slurm-gpu", "[\"true\"]");
  job.replace(job.find("  nodes: 3\n"), 11, "  nodes: 2\n");
  dir.Write(job + "container: {gpus: all}\n");
  CliOutcome o = dir.Barge("run job.yaml");
  Seen(o.err);
  std::printf("barge run (stderr):\n%s\n", o.err.c_str());
  EXPECT_EQ(o.code, 125) << o.err;
  const std::regex drain("node (h[12]) \\([0-9.]+\\) is unusable \\(preflight: GPUs requested but unavailable[^\\n]*"
                         "to take it out of Slurm's service: (scontrol update nodename=h[12] state=drain "
                         "reason='barge [0-9a-f]{8}: [^'\\n]*')\\n");
  std::vector<std::string> commands;
  for (auto it = std::sregex_iterator(o.err.begin(), o.err.end(), drain); it != std::sregex_iterator(); ++it) {
    commands.push_back((*it)[2]);
  }
  ASSERT_EQ(commands.size(), 2u) << o.err;
  EXPECT_EQ(Settled("sinfo -h -N -o '%N %T'", "h1 idle\nh2 idle\nh3 idle\n"), "h1 idle\nh2 idle\nh3 idle\n")
      << "barge drained a node itself";
  // The operator's command, as printed, drains the node.
  int code = -1;
  const std::string ran = Slurm(commands[0], &code);
  EXPECT_EQ(code, 0) << ran;
  const std::string node = commands[0].substr(commands[0].find("nodename=") + 9, 2);
  const std::string state = Slurm("sinfo -h -n " + node + " -o %T");
  Slurm("scontrol update nodename=" + node + " state=resume");
  EXPECT_TRUE(state == "drained\n" || state == "draining\n") << state;
}

}  // namespace

namespace {

// slurm.login: this machine's Slurm commands unused; salloc, squeue and
// scancel run over SSH on the bed's loopback host (its sshd sets
// SLURM_CONF, as a submit host's /etc/slurm would), with its own port.
TEST_F(SlurmTest, SallocSqueueAndScancelRunOverSshOnTheLoginHost) {
  const auto& bed = GetBed();
  JobDir dir("slurm-login");
  dir.Write(Job("slurm-login", "[\"sh\", \"-c\", \"echo rank=$RANK world=$WORLD_SIZE\"]",
                "  login: " + bed.user + "@" + bed.loopback.address + ":" + std::to_string(bed.loopback.port) +
                    "\n"));
  // No Slurm configuration for barge itself: only the login host has one
  // (this machine has no /etc/slurm/slurm.conf).
  unsetenv("SLURM_CONF");
  CliOutcome o = dir.Barge("run job.yaml");
  setenv("SLURM_CONF", SlurmConf().c_str(), 1);
  Seen(o.err);
  std::printf("barge run (stderr):\n%s\n", o.err.c_str());
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.err.find("submitted from " + bed.loopback.address), std::string::npos) << o.err;
  EXPECT_NE(o.out.find("] rank=2 world=3"), std::string::npos) << o.out;
  const std::string slurm_id = SlurmIdIn(o.err);
  ASSERT_TRUE(WaitForEndState(slurm_id, std::chrono::seconds(30)));
  EXPECT_EQ(EndState(slurm_id), "CANCELLED");
}

}  // namespace

namespace {

// The defence that outlives the controller: a controller SIGKILLed, then
// the allocation ended by Slurm (an admin's scancel here; its time limit
// alike): the nodes' epilog (samples/slurm/epilog.sh, the bed's Epilog=)
// removes the job's containers, found by their barge.slurm_job label.
TEST_F(SlurmTest, TheNodesEpilogRemovesTheContainersOfAnAllocationThatEndsAfterItsControllerDied) {
  JobDir dir("slurm-epilog");
  dir.Write(Job("slurm-epi", "[\"sleep\", \"300\"]"));
  const auto [pid, id, slurm_id] = StartUntilRunning(dir);
  ASSERT_NE(pid, -1);
  const auto& hosts = GetBed().hosts;
  // Every node's container runs, labelled with its allocation's id.
  auto labelled = [&] {
    size_t n = 0;
    for (const auto& h : hosts) {
      n += RunShell("DOCKER_HOST=" + h.docker_host + " docker ps -q --filter label=barge.slurm_job=" + slurm_id) !=
           "";
    }
    return n;
  };
  const auto running_by = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (labelled() < 3 && std::chrono::steady_clock::now() < running_by) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  ASSERT_EQ(labelled(), 3u) << "the nodes' containers do not carry their allocation's id";
  kill(pid, SIGKILL);
  dir.Wait(pid, std::chrono::seconds(10));
  Slurm("scancel " + slurm_id);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  size_t left = 3;
  while (left > 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    left = 0;
    for (const auto& h : hosts) left += !barge::testing::JobContainers(h).empty();
  }
  EXPECT_EQ(left, 0u) << "containers outlived their allocation by 30 s";
  // The store still says where the job was: down finds nothing left to do
  // on the hosts and its allocation already gone.
  CliOutcome down = dir.Barge("down " + id);
  EXPECT_EQ(down.code, 0) << down.out << down.err;
}

}  // namespace
