// MPI jobs (`mpi:`) on the test bed, through the real CLI: an mpi4py
// allreduce under mpirun across three namespace hosts (the image
// barge/mpi:local, built offline by samples/build-mpi-image.sh and loaded
// into the hosts by tests/bed/load-image.sh from the bed's cache, once per
// ctest run: the fixture mpi_image), the same with an image whose USER is
// not root (barge/mpi-user:local, derived from it in each host's engine by
// tests/bed/derive-mpi-images.sh in the same fixture), a worker whose host
// key was swapped, an image without sshd, and one without the sshd user.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <regex>
#include <set>
#include <thread>

#include "runner/store/job_store.h"
#include "ssh/quote.h"
#include "tests/support/bed_job.h"

namespace fs = std::filesystem;
using barge::ssh::ShellQuote;
using barge::testing::BedHost;
using barge::testing::BedHostsYaml;
using barge::testing::CliOutcome;
using barge::testing::GetBed;
using barge::testing::InHost;
using barge::testing::JobDir;
using barge::testing::JobIdIn;
using barge::testing::ReadWholeFile;
using barge::testing::RunShell;
using barge::testing::WaitForNoWatchdog;

namespace {

constexpr const char* kImage = "barge/mpi:local";
// Derived from kImage by the fixture: USER mpiuser (uid 1000); root without
// the `sshd` user.
constexpr const char* kUserImage = "barge/mpi-user:local";
constexpr const char* kNoSshdUserImage = "barge/mpi-nosshd:local";

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// 32 random hex digits.
std::string RandomHex() {
  std::ifstream urandom("/dev/urandom", std::ios::binary);
  unsigned char bytes[16] = {};
  urandom.read(reinterpret_cast<char*>(bytes), sizeof bytes);
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

// Every distinct command line of every process on this machine, read from
// /proc every 50 ms on a thread of its own until Stop(). The bed's hosts
// share this machine's PID namespace, so this sees barge, every host's sshd
// and what it runs, the dockerds, and the containers' processes (mpirun,
// the ssh it starts, the in-container sshds).
class CommandLineWatch {
 public:
  CommandLineWatch() : thread_([this] { Loop(); }) {}
  ~CommandLineWatch() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  int scans() const { return scans_; }
  const std::set<std::string>& seen() const { return seen_; }

 private:
  void Loop() {
    const std::string self = std::to_string(getpid());
    while (!stop_) {
      std::error_code ec;
      for (auto it = fs::directory_iterator("/proc", ec); !ec && it != fs::directory_iterator();
           it.increment(ec)) {
        const std::string pid = it->path().filename().string();
        if (pid == self || pid.find_first_not_of("0123456789") != std::string::npos) continue;
        std::string args = ReadWholeFile(it->path() / "cmdline");
        if (args.empty()) continue;
        for (char& c : args) c = c == '\0' ? ' ' : c;
        seen_.insert(std::move(args));
      }
      ++scans_;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  std::atomic<bool> stop_{false};
  int scans_ = 0;
  std::set<std::string> seen_;
  std::thread thread_;
};

// Every file under `dir`, concatenated.
std::string AllFilesUnder(const fs::path& dir) {
  std::string all;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); it != fs::recursive_directory_iterator();
       ++it) {
    if (it->is_regular_file()) all += ReadWholeFile(it->path());
  }
  return all;
}

// The base64 body of an OpenSSH private key file (its lines between the
// armour), joined: what a leak of the key would contain.
std::string KeyBody(const std::string& pem) {
  std::string body;
  std::istringstream lines(pem);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("-----", 0) == 0) continue;
    body += line;
  }
  return body;
}

class MpiBedTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto& bed = GetBed();
    ASSERT_GE(bed.hosts.size(), 3u) << "the MPI tests need 3 namespace hosts";
    // The image is built and loaded by the ctest fixture mpi_image
    // (bed_mpi_image); without it these tests fail here, saying so.
    for (size_t i = 0; i < 3; ++i) {
      for (const char* image : {kImage, kUserImage, kNoSshdUserImage}) {
        int code = -1;
        std::string id = RunShell("DOCKER_HOST=" + ShellQuote(bed.hosts[i].docker_host) +
                                      " timeout 20 docker image inspect -f '{{.Id}}' " + image + " 2>&1",
                                  &code);
        ASSERT_EQ(code, 0) << image << " is not on " << bed.hosts[i].name << " (" << id
                           << "); run the test through ctest (fixture mpi_image), or "
                              "samples/build-mpi-image.sh, tests/bed/load-image.sh and "
                              "tests/bed/derive-mpi-images.sh";
      }
    }
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    job_ = std::make_unique<JobDir>(std::string("mpi-") + info->name());
  }
  void TearDown() override {
    if (!job_id_.empty()) {
      for (size_t i = 0; i < 3; ++i) {
        const BedHost& h = GetBed().hosts[i];
        const std::string docker = "DOCKER_HOST=" + h.docker_host + " timeout 20 docker ";
        std::string left = RunShell(docker + "ps -aq --filter label=barge.job=" + job_id_);
        EXPECT_EQ(left, "") << "a container of job " << job_id_ << " was left on " << h.name;
        if (!left.empty()) RunShell(docker + "rm -f " + left + " >/dev/null 2>&1");
      }
    }
    unsetenv("BARGE_TEST_MPI_TOKEN");
    job_.reset();
  }

  // A job on the first 3 namespace hosts running `head_command` under sh.
  std::string JobYaml(const std::string& name, const std::string& image,
                      const std::string& head_command, const std::string& extra = "") {
    return "name: " + name + "\nimage: " + image + "\nimage_pull: never\n" + BedHostsYaml(0, 3) +
           "container:\n  network: host\n  env: {MPI_TEST_ENV: from-container-env}\n"
           "mpi: {slots_per_node: 1}\nstop_grace: 3s\n" + extra + "command: |\n" + head_command;
  }

  std::unique_ptr<JobDir> job_;
  std::string job_id_;
};

// Each rank prints: its rank, its host name, the allreduce's sum, and what
// its environment holds of the rendezvous variables (BARGE_NODE_RANK),
// container.env, the image's ENV (PATH's first entry) and an env secret
// (its length only).
constexpr const char* kAllreduce = R"(  sleep 2
  exec mpirun --hostfile "$BARGE_MPI_HOSTFILE" -np 3 /usr/bin/python3 -c '
  import os, socket
  from mpi4py import MPI
  comm = MPI.COMM_WORLD
  rank = comm.Get_rank()
  total = comm.allreduce(rank + 1, op=MPI.SUM)
  e = os.environ
  path0 = e.get("PATH", "").split(":")[0]
  token = len(e.get("TOKEN", ""))
  node = e.get("BARGE_NODE_RANK")
  env = e.get("MPI_TEST_ENV")
  print(f"rank={rank} host={socket.gethostname()} sum={total} node={node} env={env} path0={path0} token_len={token}", flush=True)
  '
)";

TEST_F(MpiBedTest, AnAllreduceAcrossThreeHostsSumsEveryRankWithWorkersFirstAndTheKeysNowhereElse) {
  const auto& bed = GetBed();
  const std::string token = "mpitoken-" + RandomHex();
  setenv("BARGE_TEST_MPI_TOKEN", token.c_str(), 1);
  job_->Write(JobYaml("mpi-allreduce", kImage, kAllreduce,
                      "secrets: {TOKEN: {env: BARGE_TEST_MPI_TOKEN}}\n"));
  CommandLineWatch watch;
  const auto started = std::chrono::steady_clock::now();
  pid_t pid = job_->Start("run job.yaml");
  // The keys, read from the hosts' job directories while the job runs.
  std::vector<std::string> keys;
  ASSERT_TRUE(job_->WaitFor("err.txt", "barge: job ", std::chrono::seconds(120))) << ReadWholeFile(job_->path() / "err.txt");
  job_id_ = JobIdIn(ReadWholeFile(job_->path() / "err.txt"));
  ASSERT_FALSE(job_id_.empty());
  // Each host's job directory has a name drawn for it: found by its pattern.
  const std::string dir = "/tmp/barge-" + job_id_ + ".????????????/mpi/";
  keys.push_back(KeyBody(InHost(bed.hosts[0], "cat " + dir + "0/id_ed25519")));
  keys.push_back(KeyBody(InHost(bed.hosts[1], "cat " + dir + "1/ssh_host_ed25519_key")));
  keys.push_back(KeyBody(InHost(bed.hosts[2], "cat " + dir + "2/ssh_host_ed25519_key")));
  const std::string modes = InHost(bed.hosts[0], "stat -c %a " + dir + "0/id_ed25519 " + dir + "0/known_hosts");
  CliOutcome o = job_->Wait(pid, std::chrono::seconds(240));
  watch.Stop();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  ASSERT_EQ(o.code, 0) << o.err << o.out;
  std::cout << "[ measured ] the 3-host MPI job ran in " << secs << " s; " << watch.scans()
            << " scans of every process's arguments\n";

  // The right sum on every rank, each on its own host, each seeing the
  // worker's environment.
  for (int r = 0; r < 3; ++r) {
    const std::string expect = "rank=" + std::to_string(r) + " host=" + bed.hosts[r].name +
                               " sum=6 node=" + std::to_string(r) +
                               " env=from-container-env path0=/opt/mpi/bin token_len=" +
                               std::to_string(token.size());
    EXPECT_TRUE(Contains(o.out, expect)) << "missing: " << expect << "\n" << o.out;
  }

  // The keys: made (0600), never on any process's arguments, nowhere under
  // BARGE_HOME (store, logs), and gone from the hosts.
  EXPECT_EQ(modes, "600\n600\n");
  EXPECT_GT(watch.scans(), 20);
  const std::string home = AllFilesUnder(job_->path() / "home");
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_GT(keys[i].size(), 100u) << "key " << i << " was not read from its host";
    const std::string needle = keys[i].substr(40, 60);
    for (const std::string& args : watch.seen()) {
      EXPECT_FALSE(Contains(args, needle)) << "key " << i << " on a command line: " << args.substr(0, 200);
    }
    EXPECT_FALSE(Contains(home, needle)) << "key " << i << " under BARGE_HOME";
    EXPECT_FALSE(Contains(o.out + o.err, needle)) << "key " << i << " in barge's output";
  }
  EXPECT_FALSE(Contains(home, token)) << "the secret under BARGE_HOME";

  // Workers first: both workers' start began, and their sshd gate ended
  // ok, before the head's start began (the store's phase spans).
  auto store = barge::runner::JobStore::Open((job_->path() / "home").string());
  ASSERT_TRUE(store.ok()) << store.status().message();
  auto phases = (*store)->GetPhases(job_id_);
  ASSERT_TRUE(phases.ok()) << phases.status().message();
  std::map<std::pair<int, std::string>, barge::runner::PhaseRecord> by;
  for (const auto& p : *phases) {
    if (p.rank) by[{*p.rank, p.phase}] = p;
  }
  auto span = [&](int rank, const std::string& phase) -> const barge::runner::PhaseRecord* {
    auto it = by.find(std::make_pair(rank, phase));
    return it == by.end() ? nullptr : &it->second;
  };
  ASSERT_TRUE(span(0, "start") && span(1, "ready") && span(2, "ready"))
      << phases->size() << " phase spans";
  const auto head_start = span(0, "start")->began;
  for (int r : {1, 2}) {
    ASSERT_NE(span(r, "start"), nullptr);
    EXPECT_LT(span(r, "start")->began, head_start) << "worker " << r << " started after the head";
    ASSERT_TRUE(span(r, "ready")->ended.has_value());
    EXPECT_EQ(span(r, "ready")->outcome, "ok");
    EXPECT_LE(*span(r, "ready")->ended, head_start) << "worker " << r << " was not ready before the head";
  }

  // Nothing left: containers (TearDown), the job's directories, watchdogs.
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(InHost(bed.hosts[i], "ls -d /tmp/barge-" + job_id_ + ".* 2>/dev/null; true"), "")
        << "the job's directory was left on " << bed.hosts[i].name;
  }
  EXPECT_TRUE(WaitForNoWatchdog(job_id_, std::chrono::seconds(10)));
}

TEST_F(MpiBedTest, MpirunToANodeWhoseHostKeyWasSwappedFailsNamingThatNode) {
  const auto& bed = GetBed();
  // The head waits before mpirun; meanwhile node 1's host key file on its
  // host gets another key's content (sshd reads its host key again for
  // every connection).
  job_->Write(JobYaml("mpi-swapped", kImage, R"(  sleep 5
  exec mpirun --hostfile "$BARGE_MPI_HOSTFILE" -np 3 /bin/true
)"));
  pid_t pid = job_->Start("run job.yaml");
  ASSERT_TRUE(job_->WaitFor("err.txt", "starting the head", std::chrono::seconds(120)))
      << ReadWholeFile(job_->path() / "err.txt");
  job_id_ = JobIdIn(ReadWholeFile(job_->path() / "err.txt"));
  ASSERT_FALSE(job_id_.empty());
  const std::string key = "$(ls -d /tmp/barge-" + job_id_ + ".????????????)/mpi/1/ssh_host_ed25519_key";
  const std::string other = "/tmp/barge-swap-" + job_id_;
  InHost(bed.hosts[1], "ssh-keygen -q -t ed25519 -N '' -f " + other + " && cat " + other + " > " +
                           key + "; rm -f " + other + " " + other + ".pub");
  CliOutcome o = job_->Wait(pid, std::chrono::seconds(180));
  EXPECT_NE(o.code, 0) << o.err << o.out;
  const std::string all = o.out + o.err;
  EXPECT_TRUE(Contains(all, "Host key verification failed")) << all;
  EXPECT_TRUE(Contains(all, bed.hosts[1].address)) << "the node is not named:\n" << all;
  EXPECT_TRUE(Contains(all, "job failed") || Contains(all, "head ended: exit code")) << all;
}

TEST_F(MpiBedTest, AnImageWithoutSshdFailsPreflightNamingOpensshServer) {
  const auto& bed = GetBed();
  job_->Write(JobYaml("mpi-nosshd", bed.image, "  mpirun true\n"));
  CliOutcome o = job_->Barge("run job.yaml");
  EXPECT_EQ(o.code, 125) << o.err;
  EXPECT_TRUE(Contains(o.err, "image " + bed.image + " has no /usr/sbin/sshd, which every worker of "
                              "an MPI job runs (install the openssh-server package in the image)"))
      << o.err;
  EXPECT_TRUE(Contains(o.err, "nothing was started")) << o.err;
}

// Each rank prints its rank, host, the allreduce's sum and the user it runs
// as (`id -un`).
constexpr const char* kAllreduceUser = R"(  sleep 2
  exec mpirun --hostfile "$BARGE_MPI_HOSTFILE" -np 3 /usr/bin/python3 -c '
  import socket, subprocess
  from mpi4py import MPI
  comm = MPI.COMM_WORLD
  rank = comm.Get_rank()
  total = comm.allreduce(rank + 1, op=MPI.SUM)
  user = subprocess.run(["id", "-un"], capture_output=True, text=True).stdout.strip()
  print(f"rank={rank} host={socket.gethostname()} sum={total} user={user}", flush=True)
  '
)";

TEST_F(MpiBedTest, AnImageWhoseUserIsNotRootRunsTheAllreduceWithItsKeyFilesReadableOnlyThroughA0700Parent) {
  const auto& bed = GetBed();
  job_->Write(JobYaml("mpi-nonroot", kUserImage, kAllreduceUser));
  const auto started = std::chrono::steady_clock::now();
  pid_t pid = job_->Start("run job.yaml");
  ASSERT_TRUE(job_->WaitFor("err.txt", "barge: job ", std::chrono::seconds(120)))
      << ReadWholeFile(job_->path() / "err.txt");
  job_id_ = JobIdIn(ReadWholeFile(job_->path() / "err.txt"));
  ASSERT_FALSE(job_id_.empty());
  // Written before the job line: the parent 0700, each node's directory
  // 0755, its files 0644 (the key files owned by the SSH login user, root).
  // Each host's job directory has a name of its own (NewHostJobDir).
  auto mpi_dir = [&](const BedHost& h) {
    std::string d = InHost(h, "ls -d /tmp/barge-" + job_id_ + ".????????????");
    while (!d.empty() && d.back() == '\n') d.pop_back();
    return d + "/mpi";
  };
  const std::string head_dir = mpi_dir(bed.hosts[0]), worker_dir = mpi_dir(bed.hosts[1]);
  const std::string head_modes = InHost(bed.hosts[0], "stat -c '%a %U %n' " + head_dir + " " + head_dir + "/0 " +
                                                          head_dir + "/0/id_ed25519");
  const std::string worker_modes = InHost(bed.hosts[1], "stat -c '%a %U %n' " + worker_dir + " " + worker_dir +
                                                            "/1 " + worker_dir + "/1/ssh_host_ed25519_key");
  CliOutcome o = job_->Wait(pid, std::chrono::seconds(240));
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  ASSERT_EQ(o.code, 0) << o.err << o.out;
  std::cout << "[ measured ] the 3-host MPI job as a non-root user ran in " << secs << " s\n";
  EXPECT_NE(head_dir, worker_dir);
  EXPECT_EQ(head_modes, "700 root " + head_dir + "\n755 root " + head_dir + "/0\n644 root " + head_dir +
                            "/0/id_ed25519\n");
  EXPECT_EQ(worker_modes, "700 root " + worker_dir + "\n755 root " + worker_dir + "/1\n644 root " + worker_dir +
                              "/1/ssh_host_ed25519_key\n");
  EXPECT_TRUE(Contains(o.err, "3 node(s) whose image runs as a non-root user")) << o.err;
  for (int r = 0; r < 3; ++r) {
    const std::string expect =
        "rank=" + std::to_string(r) + " host=" + bed.hosts[r].name + " sum=6 user=mpiuser";
    EXPECT_TRUE(Contains(o.out, expect)) << "missing: " << expect << "\n" << o.out;
  }
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(InHost(bed.hosts[i], "ls -d /tmp/barge-" + job_id_ + ".* 2>/dev/null; true"), "")
        << "the job's directory was left on " << bed.hosts[i].name;
  }
  EXPECT_TRUE(WaitForNoWatchdog(job_id_, std::chrono::seconds(10)));
}

TEST_F(MpiBedTest, AWorkerImageRunningAsRootWithoutTheSshdUserFailsSayingHowToAddIt) {
  job_->Write(JobYaml("mpi-nosshduser", kNoSshdUserImage, "  mpirun true\n"));
  CliOutcome o = job_->Barge("run job.yaml");
  job_id_ = JobIdIn(o.err);
  EXPECT_NE(o.code, 0) << o.err << o.out;
  EXPECT_TRUE(Contains(o.out + o.err,
                       "barge: this image has no 'sshd' user in /etc/passwd, which sshd needs "
                       "(openssh-server's install adds it: useradd -r -d /run/sshd -s "
                       "/usr/sbin/nologin sshd)"))
      << o.err << o.out;
  if (!job_id_.empty()) {
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(InHost(GetBed().hosts[i], "ls -d /tmp/barge-" + job_id_ + ".* 2>/dev/null; true"), "");
    }
  }
}

}  // namespace
