// Secrets and private registries on the test bed, through the real CLI.
//
// Each value is a fresh random string, so finding it anywhere means it
// leaked: on a command line of any process on a host or on this machine
// while the job runs, in `barge plan`, in barge's own output, in the job
// store (the SQLite file and its WAL), in the log files, or in a per-host
// directory left behind. The container itself gets the values, which it
// proves by printing their SHA-256 (never the value) for the test to compare.
//
// The test never puts a value on a command line itself: values reach barge
// through a file and this process's environment, and are hashed from files.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <set>
#include <fstream>
#include <regex>
#include <thread>

#include "ssh/quote.h"
#include "tests/support/bed_job.h"

namespace fs = std::filesystem;
using barge::ssh::ShellQuote;
using barge::testing::BedHost;
using barge::testing::BedHostsYaml;
using barge::testing::CliOutcome;
using barge::testing::GetBed;
using barge::testing::JobDir;
using barge::testing::JobIdIn;
using barge::testing::OnHost;
using barge::testing::ReadWholeFile;
using barge::testing::RunShell;

namespace {

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

// SHA-256 of `bytes`, hashed from a file (the value is on no command line).
std::string Sha256(const JobDir& job, const std::string& bytes) {
  const fs::path file = job.path() / "hash-input";
  std::ofstream(file, std::ios::binary) << bytes;
  std::string out = RunShell("sha256sum " + ShellQuote(file.string()));
  fs::remove(file);
  return out.substr(0, 64);
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// The command lines of every process on this machine, NULs as spaces.
std::string LocalCommandLines() {
  std::string all;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = ReadWholeFile(entry.path() / "cmdline");
    for (char& c : cmdline) c = c == '\0' ? ' ' : c;
    all += cmdline + "\n";
  }
  return all;
}

// Reads the command line of every process on this machine every 50 ms on
// a thread of its own, from the start of Start() to Stop(): the bed's hosts
// share this machine's PID namespace, so one watcher sees barge, its
// children, every host's sshd and the commands it runs, and the hosts'
// dockerds. It reads /proc/PID/cmdline itself (no ps or grep, which would
// hold what they look for on their own command lines) and skips only this
// process. A process that lives less than one scan can be missed; the
// number of scans and of distinct command lines seen is reported so a
// watch that saw nothing cannot pass unnoticed.
class CommandLineWatch {
 public:
  explicit CommandLineWatch(std::vector<std::string> secrets) : secrets_(std::move(secrets)) {
    thread_ = std::thread([this] { Loop(); });
  }
  ~CommandLineWatch() { Stop(); }
  CommandLineWatch(const CommandLineWatch&) = delete;
  CommandLineWatch& operator=(const CommandLineWatch&) = delete;

  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  // Only after Stop().
  int scans() const { return scans_; }
  // Distinct command lines seen (any process).
  size_t seen() const { return seen_.size(); }
  // Whether some command line held `text`.
  bool Saw(const std::string& text) const {
    for (const std::string& line : seen_) {
      if (line.find(text) != std::string::npos) return true;
    }
    return false;
  }
  // "pid N: ARGS" for each process whose arguments held a secret, with the
  // value itself replaced by "<secret I>".
  const std::vector<std::string>& leaks() const { return leaks_; }

 private:
  void Loop() {
    const std::string self = std::to_string(getpid());
    while (!stop_) {
      std::error_code ec;
      for (auto it = fs::directory_iterator("/proc", ec); it != fs::directory_iterator(); it.increment(ec)) {
        if (ec) break;
        const std::string pid = it->path().filename().string();
        if (pid == self || pid.find_first_not_of("0123456789") != std::string::npos) continue;
        std::string args = ReadWholeFile(it->path() / "cmdline");
        if (args.empty()) continue;
        for (char& c : args) c = c == '\0' ? ' ' : c;
        bool leaked = false;
        for (size_t i = 0; i < secrets_.size(); ++i) {
          for (size_t at = args.find(secrets_[i]); at != std::string::npos; at = args.find(secrets_[i])) {
            args.replace(at, secrets_[i].size(), "<secret " + std::to_string(i) + ">");
            leaked = true;
          }
        }
        if (leaked) leaks_.push_back("pid " + pid + ": " + args);
        seen_.insert(std::move(args));
      }
      ++scans_;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  const std::vector<std::string> secrets_;
  std::atomic<bool> stop_{false};
  int scans_ = 0;
  std::set<std::string> seen_;
  std::vector<std::string> leaks_;
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

class SecretsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_GE(GetBed().hosts.size(), 2u) << "the secrets tests need 2 namespace hosts";
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    job_ = std::make_unique<JobDir>(std::string("secrets-") + info->name());
  }
  void TearDown() override {
    // Only this test's job: other engineers' jobs may run on the bed.
    if (!job_id_.empty()) {
      const auto& bed = GetBed();
      std::vector<BedHost> hosts = bed.hosts;
      hosts.push_back(bed.loopback);
      for (const BedHost& h : hosts) {
        const std::string docker = "DOCKER_HOST=" + h.docker_host + " timeout 20 docker ";
        std::string left = RunShell(docker + "ps -aq --filter label=barge.job=" + job_id_);
        EXPECT_EQ(left, "") << "a container of job " << job_id_ << " was left on " << h.name;
        if (!left.empty()) RunShell(docker + "rm -f " + left + " >/dev/null 2>&1");
      }
    }
    unsetenv("BARGE_TEST_SECRET_ENV");
    job_.reset();
  }

  std::unique_ptr<JobDir> job_;
  std::string job_id_;
};

TEST_F(SecretsTest, SecretsReachTheContainerAndNoCommandLinePlanStoreLogOrHostDirectory) {
  const auto& bed = GetBed();
  const std::string file_value = "filesecret-" + RandomHex() + "\n";  // a token file ends with one
  const std::string env_value = "envsecret-" + RandomHex();
  const std::string file_bare = file_value.substr(0, file_value.size() - 1);
  {
    std::ofstream token(job_->path() / "hf_token", std::ios::binary);
    token << file_value;
  }
  fs::permissions(job_->path() / "hf_token", fs::perms::owner_read | fs::perms::owner_write);
  setenv("BARGE_TEST_SECRET_ENV", env_value.c_str(), 1);

  // Each node prints the hashes of what it got, then waits for /tmp/go in
  // its own container, so that the test can look at the hosts meanwhile.
  const std::string yaml =
      "name: secrets\nimage: " + bed.image + "\n" + BedHostsYaml(0, 2) +
      "stop_grace: 2s\n"
      "secrets:\n"
      "  HF_TOKEN: {file: hf_token}\n"
      "  WANDB_API_KEY: {env: BARGE_TEST_SECRET_ENV}\n"
      "command:\n"
      "  - sh\n"
      "  - -c\n"
      "  - |\n"
      "    h() { sha256sum | cut -d ' ' -f 1; }\n"
      "    echo \"hf-file $(h < /run/secrets/HF_TOKEN)\"\n"
      "    echo \"hf-env $(printf %s \"$HF_TOKEN\" | h)\"\n"
      "    echo \"wandb-file $(h < /run/secrets/WANDB_API_KEY)\"\n"
      "    echo \"wandb-env $(printf %s \"$WANDB_API_KEY\" | h)\"\n"
      "    echo \"mounted $(stat -c %a /run/secrets/HF_TOKEN) $(grep -c ' /run/secrets/' /proc/mounts)\"\n"
      "    echo secrets-checked\n"
      "    while [ ! -e /tmp/go ]; do sleep 0.2; done\n";
  job_->Write(yaml);

  // The watch sees a value on a command line: a control that puts one
  // there itself, in a shell that lives 0.3 s (on a bed host, over ssh).
  {
    const std::string control = "control-" + RandomHex();
    CommandLineWatch seen({control});
    OnHost(bed.hosts[0], "sleep 0.3; : " + control);
    seen.Stop();
    EXPECT_FALSE(seen.leaks().empty()) << "the watch missed a value on a host's command line";
  }

  // From here to the end of teardown, every command line on this machine
  // and every bed host is watched.
  CommandLineWatch watch({file_bare, env_value});

  // The plan shows every command line, and no value.
  CliOutcome plan = job_->Barge("plan job.yaml");
  ASSERT_EQ(plan.code, 0) << plan.err;
  EXPECT_TRUE(Contains(plan.out, "--env-file /tmp/barge-")) << plan.out;
  EXPECT_TRUE(Contains(plan.out, "/secrets/HF_TOKEN:/run/secrets/HF_TOKEN:ro")) << plan.out;
  for (const std::string& v : {file_bare, env_value}) {
    EXPECT_FALSE(Contains(plan.out + plan.err, v)) << "a secret value is in barge plan's output";
  }

  pid_t pid = job_->Start("run job.yaml");
  const std::string marker1 = "[1 worker " + bed.hosts[1].address + "] secrets-checked";
  ASSERT_TRUE(job_->WaitFor("out.txt", marker1) && job_->WaitFor("out.txt", "[0 head "))
      << ReadWholeFile(job_->path() / "out.txt") << ReadWholeFile(job_->path() / "err.txt");
  ASSERT_TRUE(job_->WaitFor("out.txt", "[0 head " + bed.hosts[0].address + "] secrets-checked"));
  job_id_ = JobIdIn(ReadWholeFile(job_->path() / "err.txt"));
  ASSERT_EQ(job_id_.size(), 8u) << ReadWholeFile(job_->path() / "err.txt");
  // Each host's job directory has a name drawn for it (NewHostJobDir).
  const std::string glob = "/tmp/barge-" + job_id_ + ".????????????";

  // While it runs: no command line anywhere holds a value (the hosts'
  // process tables over plain OpenSSH, and every process here: barge and
  // its children).
  for (size_t i = 0; i < 2; ++i) {
    const BedHost& h = bed.hosts[i];
    std::string procs = OnHost(h, "ps -eo args; for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < \"$f\"; echo; done 2>/dev/null");
    // (The job's watchdog runs on every host for the whole job; its log
    // follower is an Engine API stream, no process.)
    EXPECT_TRUE(Contains(procs, "barge-watchdog-" + job_id_)) << "the process table was not read on " << h.name;
    for (const std::string& v : {file_bare, env_value}) {
      EXPECT_FALSE(Contains(procs, v)) << "a secret value is on a command line on " << h.name;
    }
    // On the host: a 0700 directory, 0600 files owned by the SSH user.
    std::string dir = OnHost(h, "ls -d " + glob);
    if (!dir.empty() && dir.back() == '\n') dir.pop_back();
    EXPECT_EQ(dir.find('\n'), std::string::npos) << "more than one directory of the job: " << dir;
    EXPECT_EQ(OnHost(h, "stat -c '%a %U' " + dir + " " + dir + "/secrets " + dir +
                            "/secrets/HF_TOKEN " + dir + "/secrets/WANDB_API_KEY " + dir + "/secrets/.env"),
              "700 " + bed.user + "\n700 " + bed.user + "\n600 " + bed.user + "\n600 " + bed.user +
                  "\n600 " + bed.user + "\n");
    // What the README warns about: Docker keeps a container's environment
    // in its configuration, visible to `docker inspect` on the host.
    std::string inspect = RunShell("DOCKER_HOST=" + h.docker_host +
                                   " docker inspect --format '{{json .Config.Env}}' $(DOCKER_HOST=" +
                                   h.docker_host + " docker ps -q --filter label=barge.job=" + job_id_ + ")");
    EXPECT_TRUE(Contains(inspect, "\"WANDB_API_KEY=" + env_value + "\"")) << "docker inspect";
  }
  const std::string local = LocalCommandLines();
  EXPECT_TRUE(Contains(local, "run job.yaml")) << "the local process table was not read";
  for (const std::string& v : {file_bare, env_value}) {
    EXPECT_FALSE(Contains(local, v)) << "a secret value is on a command line on this machine";
  }

  for (size_t i = 0; i < 2; ++i) {
    const BedHost& h = bed.hosts[i];
    RunShell("DOCKER_HOST=" + h.docker_host + " docker ps -q --filter label=barge.job=" + job_id_ +
             " | DOCKER_HOST=" + h.docker_host + " xargs -r -I {} docker exec {} touch /tmp/go");
  }
  CliOutcome o = job_->Wait(pid);
  ASSERT_EQ(o.code, 0) << o.out << o.err;

  // The containers got the values: the file byte for byte, the environment
  // without the file's trailing line break.
  for (const std::string& node : {"[0 head " + bed.hosts[0].address + "] ",
                                 "[1 worker " + bed.hosts[1].address + "] "}) {
    EXPECT_TRUE(Contains(o.out, node + "hf-file " + Sha256(*job_, file_value))) << o.out;
    EXPECT_TRUE(Contains(o.out, node + "hf-env " + Sha256(*job_, file_bare))) << o.out;
    EXPECT_TRUE(Contains(o.out, node + "wandb-file " + Sha256(*job_, env_value))) << o.out;
    EXPECT_TRUE(Contains(o.out, node + "wandb-env " + Sha256(*job_, env_value))) << o.out;
    EXPECT_TRUE(Contains(o.out, node + "mounted 600 2")) << o.out;
  }

  // Nothing barge printed or kept holds a value: its output, the store (the
  // database and its WAL), the log files, `barge show`.
  CliOutcome show = job_->Barge("show --json " + job_id_);
  EXPECT_EQ(show.code, 0) << show.err;
  const std::string kept = AllFilesUnder(job_->path() / "home");
  EXPECT_TRUE(Contains(kept, "hf-file ")) << "the log files were not read";
  EXPECT_TRUE(Contains(kept, "secrets:\n  HF_TOKEN: {file: hf_token}")) << "the store was not read";
  for (const std::string& v : {file_bare, env_value}) {
    EXPECT_FALSE(Contains(o.out + o.err, v)) << "a secret value is in barge's output";
    EXPECT_FALSE(Contains(kept, v)) << "a secret value is in the store or the log files";
    EXPECT_FALSE(Contains(show.out, v)) << "a secret value is in barge show";
  }

  // The per-host directory, secrets included, is gone.
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(OnHost(bed.hosts[i], "ls -d " + glob + " >/dev/null 2>&1 && echo left || echo gone"), "gone\n")
        << bed.hosts[i].name;
  }

  // Start-up (the secret files written through `cat >` on each host), the
  // run (the watchdogs) and teardown: no command line held a value.
  watch.Stop();
  std::printf("watched %d scans, %zu distinct command lines\n", watch.scans(), watch.seen());
  EXPECT_TRUE(watch.Saw(" run job.yaml")) << "the watch never saw barge";
  EXPECT_TRUE(watch.Saw("barge-watchdog-" + job_id_)) << "the watch never saw a host's watchdog";
  EXPECT_GE(watch.scans(), 20);
  for (const std::string& leak : watch.leaks()) ADD_FAILURE() << "a secret on a command line: " << leak;
}

TEST_F(SecretsTest, BargeMasksSecretValuesInItsOwnMessagesButNotInTheContainersOutput) {
  const auto& bed = GetBed();
  const std::string value = "masked-" + RandomHex();
  setenv("BARGE_TEST_SECRET_ENV", value.c_str(), 1);
  // The head prints the secret itself (its own output is not altered), then
  // never becomes ready: barge's timeout message quotes the head's last
  // lines, and the failing teardown hook's stderr holds the value too.
  const std::string yaml =
      "name: masked\nimage: " + bed.image + "\n" + BedHostsYaml(0, 1) +
      "stop_grace: 1s\n"
      "secrets:\n"
      "  TOKEN: {env: BARGE_TEST_SECRET_ENV, as_env: false}\n"
      "command: [\"sh\", \"-c\", \"echo token is $(cat /run/secrets/TOKEN); sleep 300\"]\n"
      "roles:\n"
      "  head: {ready: {command: \"false\", timeout: 3s}}\n"
      "teardown:\n"
      "  host_command: \"cat \\\"$BARGE_JOB_DIR/secrets/TOKEN\\\" >&2; exit 3\"\n";
  job_->Write(yaml);
  CliOutcome o = job_->Barge("run job.yaml");
  job_id_ = JobIdIn(o.err);
  EXPECT_EQ(o.code, 125) << o.err;
  // The container's own line, on barge's stdout and in its log file: as it was.
  EXPECT_TRUE(Contains(o.out, "token is " + value)) << o.out;
  EXPECT_TRUE(Contains(AllFilesUnder(job_->path() / "home" / "runs"), "stdout token is " + value));
  // barge's own messages: masked.
  EXPECT_TRUE(Contains(o.err, "its last lines:\n  | token is [redacted]")) << o.err;
  EXPECT_TRUE(Contains(o.err, "teardown host_command for " + bed.hosts[0].address +
                                  " failed: [redacted]"))
      << o.err;
  EXPECT_FALSE(Contains(o.err, value)) << o.err;
  // The store keeps the masked failure.
  CliOutcome show = job_->Barge("show --json " + job_id_);
  EXPECT_TRUE(Contains(show.out, "token is [redacted]")) << show.out;
  EXPECT_FALSE(Contains(show.out, value)) << show.out;
  std::string store = ReadWholeFile(job_->path() / "home" / "barge.db") +
                      ReadWholeFile(job_->path() / "home" / "barge.db-wal");
  EXPECT_FALSE(Contains(store, value)) << "the value is in the job store";
}

TEST_F(SecretsTest, TheWatchdogRemovesTheSecretsWhenTheControllerIsKilled) {
  const auto& bed = GetBed();
  setenv("BARGE_TEST_SECRET_ENV", ("orphaned-" + RandomHex()).c_str(), 1);
  job_->Write("name: orphaned\nimage: " + bed.image + "\n" + BedHostsYaml(0, 1) +
              "lease: 4s\n"
              "secrets: {TOKEN: {env: BARGE_TEST_SECRET_ENV}}\n"
              "command: [\"sh\", \"-c\", \"echo up; sleep 300\"]\n");
  pid_t pid = job_->Start("run job.yaml");
  ASSERT_TRUE(job_->WaitFor("out.txt", "] up")) << ReadWholeFile(job_->path() / "err.txt");
  job_id_ = JobIdIn(ReadWholeFile(job_->path() / "err.txt"));
  ASSERT_EQ(job_id_.size(), 8u);
  const std::string check =
      "ls /tmp/barge-" + job_id_ + ".????????????/secrets/TOKEN >/dev/null 2>&1 && echo left || echo gone";
  EXPECT_EQ(OnHost(bed.hosts[0], check), "left\n");
  kill(pid, SIGKILL);
  job_->Wait(pid, std::chrono::seconds(5));
  // The lease (4 s) lapses, the watchdog (every 2 s) removes the container
  // and the job's directory.
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::string state = OnHost(bed.hosts[0], check);
  while (state != "gone\n" && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    state = OnHost(bed.hosts[0], check);
  }
  EXPECT_EQ(state, "gone\n") << "the watchdog left the secret on " << bed.hosts[0].name;
  const std::string docker = "DOCKER_HOST=" + bed.hosts[0].docker_host + " docker ";
  for (int i = 0; i < 20 && RunShell(docker + "ps -aq --filter label=barge.job=" + job_id_) != ""; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

// A registry v2 (Debian's docker-registry) on 127.0.0.1 with htpasswd auth,
// started by the test and stopped at its end. The loopback bed host drives
// this machine's dockerd, which may use a plain-HTTP registry on loopback.
class Registry {
 public:
  // docker-registry takes its port from its configuration, not a socket
  // handed to it: a port found free may be taken before it binds. So a
  // registry that exits at start (the port was taken) is started again on
  // another port, up to 5 times.
  Registry(const fs::path& dir, const std::string& user, const std::string& password)
      : dir_(dir) {
    const fs::path password_file = dir_ / "registry-password";
    std::ofstream(password_file) << password;
    // -i: the password from stdin, never on htpasswd's command line.
    RunShell("htpasswd -Bin " + user + " < " + ShellQuote(password_file.string()) + " > " +
             ShellQuote((dir_ / "htpasswd").string()));
    fs::remove(password_file);
    for (int attempt = 0; attempt < 5 && !Answers(); ++attempt) Start();
  }
  ~Registry() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  std::string server() const { return "127.0.0.1:" + std::to_string(port_); }
  bool Answers() const {
    return RunShell("curl -s -o /dev/null -w '%{http_code}' http://" + server() + "/v2/") == "401";
  }
  const fs::path& dir() const { return dir_; }

 private:
  // Starts docker-registry on a port free a moment ago and waits (at most
  // 10 s) until it answers or exits.
  void Start() {
    port_ = FreePort();
    std::ofstream(dir_ / "registry.yml")
        << "version: 0.1\nlog: {level: error}\n"
        << "storage: {filesystem: {rootdirectory: " << (dir_ / "registry-data").string() << "}}\n"
        << "http: {addr: 127.0.0.1:" << port_ << "}\n"
        << "auth: {htpasswd: {realm: barge-test, path: " << (dir_ / "htpasswd").string() << "}}\n";
    pid_ = fork();
    if (pid_ == 0) {
      const std::string log = (dir_ / "registry.log").string();
      freopen(log.c_str(), "a", stdout);
      freopen(log.c_str(), "a", stderr);
      execlp("docker-registry", "docker-registry", "serve", (dir_ / "registry.yml").c_str(), nullptr);
      _exit(127);
    }
    for (int i = 0; i < 100 && !Answers(); ++i) {
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) {  // exited: the port was taken
        pid_ = -1;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (!Answers()) {  // neither answers nor exited: stop it, a later try starts anew
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }

  static int FreePort() {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    socklen_t len = sizeof a;
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    close(fd);
    return ntohs(a.sin_port);
  }

  fs::path dir_;
  int port_ = 0;
  pid_t pid_ = -1;
};

std::string LoopbackHostYaml() {
  const auto& bed = GetBed();
  return "hosts:\n  - {address: " + bed.loopback.address + ", port: " +
         std::to_string(bed.loopback.port) + "}\nssh:\n  user: " + bed.user +
         "\n  identity_file: " + bed.key + "\n  known_hosts: " + bed.known_hosts + "\n";
}

TEST_F(SecretsTest, ARegistryLoginPullsAPrivateImageAndLeavesNoCredentialBehind) {
  // scripts/install-deps.sh installs them; without them this test fails.
  ASSERT_EQ(RunShell("for c in docker-registry htpasswd curl; do command -v $c >/dev/null || echo $c; done"), "")
      << "needs docker-registry (Debian package docker-registry), htpasswd (apache2-utils) and "
         "curl on this machine: run scripts/install-deps.sh";
  const auto& bed = GetBed();
  const std::string password = "regpass-" + RandomHex();
  Registry registry(job_->path(), "ci", password);
  ASSERT_TRUE(registry.Answers()) << ReadWholeFile(job_->path() / "registry.log");
  {
    std::ofstream(job_->path() / "password", std::ios::binary) << password << "\n";
  }
  // A private image: the bed's image pushed there (with a login of the
  // test's own), then removed from the engine, so only a pull brings it back.
  const std::string image = registry.server() + "/barge/private:" + RandomHex().substr(0, 8);
  const std::string config = ShellQuote((job_->path() / "test-docker-config").string());
  const std::string docker = "DOCKER_HOST=" + bed.loopback.docker_host + " docker --config " + config;
  int code = 0;
  std::string pushed =
      RunShell(docker + " login --username=ci --password-stdin " + registry.server() + " < " +
                   ShellQuote((job_->path() / "password").string()) + " 2>&1 && " + docker + " tag " +
                   bed.image + " " + image + " && " + docker + " push " + image + " 2>&1 && " +
                   docker + " rmi " + image + " 2>&1",
               &code);
  ASSERT_EQ(code, 0) << pushed;
  const std::string user_config_before = OnHost(bed.loopback, "cat ~/.docker/config.json 2>/dev/null");

  job_->Write("name: private\nimage: " + image + "\nimage_pull: always\n" + LoopbackHostYaml() +
              "command: [\"echo\", \"the private image runs\"]\n"
              "registry: {server: " + registry.server() + ", username: ci, password: {file: password}}\n");
  // From here on (plan, login, pull, run, logout, teardown, and the failed
  // login below) no command line holds the password.
  CommandLineWatch watch({password});
  CliOutcome plan = job_->Barge("plan job.yaml");
  EXPECT_TRUE(Contains(plan.out, "login --username=ci --password-stdin " + registry.server())) << plan.out;
  EXPECT_FALSE(Contains(plan.out, password));
  CliOutcome o = job_->Barge("run job.yaml");
  job_id_ = JobIdIn(o.err);
  EXPECT_EQ(o.code, 0) << o.out << o.err;
  EXPECT_TRUE(Contains(o.out, "the private image runs")) << o.out << o.err;
  EXPECT_TRUE(Contains(o.err, "logged in to " + registry.server() + " as ci on 1 host(s)")) << o.err;
  EXPECT_FALSE(Contains(o.out + o.err + AllFilesUnder(job_->path() / "home"), password));
  // The login lived in the job's directory, which is gone; the host user's
  // own Docker config is as it was.
  EXPECT_EQ(OnHost(bed.loopback, "ls -d /tmp/barge-" + job_id_ + ".* >/dev/null 2>&1 && echo left || echo gone"),
            "gone\n");
  EXPECT_EQ(OnHost(bed.loopback, "cat ~/.docker/config.json 2>/dev/null"), user_config_before);

  // A wrong password: the registry's own reason, per host, and nothing starts.
  {
    std::ofstream(job_->path() / "password", std::ios::binary) << "wrong-" << password << "\n";
  }
  CliOutcome bad = job_->Barge("run job.yaml");
  EXPECT_EQ(bad.code, 125);
  EXPECT_TRUE(Contains(bad.err, "registry login to " + registry.server() +
                                    " as ci failed; nothing was started:\n  " + bed.loopback.address +
                                    ": "))
      << bad.err;
  EXPECT_TRUE(Contains(bad.err, "401 Unauthorized")) << bad.err;
  const std::string bad_id = JobIdIn(bad.err);
  EXPECT_EQ(bad_id, "") << "nothing should have started";
  watch.Stop();
  std::printf("watched %d scans, %zu distinct command lines; saw the login: %s\n", watch.scans(),
              watch.seen(), watch.Saw("login --username=ci --password-stdin") ? "yes" : "no");
  EXPECT_TRUE(watch.Saw(" run job.yaml")) << "the watch never saw barge";
  EXPECT_GE(watch.scans(), 10);
  for (const std::string& leak : watch.leaks()) ADD_FAILURE() << "the password on a command line: " << leak;
  RunShell("DOCKER_HOST=" + bed.loopback.docker_host + " docker rmi " + image + " >/dev/null 2>&1");
}

}  // namespace
