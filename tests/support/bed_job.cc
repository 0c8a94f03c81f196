#include "tests/support/bed_job.h"

#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "ssh/quote.h"
#include "tests/support/bed_hygiene.h"

namespace barge::testing {

namespace fs = std::filesystem;
using ssh::ShellQuote;

std::string ReadWholeFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string OnHost(const BedHost& h, const std::string& command, int* code) {
  const Bed& bed = GetBed();
  return RunShell("ssh -o BatchMode=yes -o ConnectTimeout=10 -o StrictHostKeyChecking=yes "
                  "-o UserKnownHostsFile=" + bed.known_hosts + " -i " + bed.key + " -p " +
                      std::to_string(h.port) + " " + bed.user + "@" + h.address + " " +
                      ShellQuote(command) + " 2>&1",
                  code);
}

std::string InHost(const BedHost& h, const std::string& command) {
  return RunShell(GetBed().raw.at("BED_SCRIPT") + " exec " + h.name + " sh -c " + ShellQuote(command) +
                  " 2>&1");
}

std::string JobContainers(const BedHost& h) {
  return RunShell("DOCKER_HOST=" + h.docker_host + " timeout 20 docker ps -aq --filter label=barge.job");
}

std::vector<int> WatchdogPids(const std::string& job_id) {
  const std::string name = "barge-watchdog-" + job_id;
  std::vector<int> pids;
  std::error_code ec;
  for (auto it = fs::directory_iterator("/proc", ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    const std::string pid = it->path().filename().string();
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string args = ReadWholeFile(it->path() / "cmdline");
    for (char& c : args) c = c == '\0' ? ' ' : c;
    if (args.find(name) == std::string::npos) continue;
    // "PID (COMM) STATE ...": a zombie has exited, the machine's PID 1
    // reaps late.
    const std::string stat = ReadWholeFile(it->path() / "stat");
    const size_t paren = stat.rfind(')');
    if (paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z') continue;
    pids.push_back(std::stoi(pid));
  }
  return pids;
}

bool WaitForNoWatchdog(const std::string& job_id, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!WatchdogPids(job_id).empty()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return true;
}

std::string JobIdIn(const std::string& err) {
  std::smatch m;
  if (std::regex_search(err, m, std::regex("barge: job ([0-9a-f]{8}) \\("))) return m[1];
  return "";
}

double WallSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec / 1e9;
}

double IsoSeconds(const std::string& iso) {
  std::tm tm{};
  const char* rest = strptime(iso.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (rest == nullptr) return -1;
  double frac = 0;
  if (*rest == '.') frac = std::stod(std::string("0") + std::string(rest).substr(0, 4));
  return static_cast<double>(timegm(&tm)) + frac;
}

JobDir::JobDir(const std::string& name)
    : dir_(fs::temp_directory_path() / ("barge-test-" + name)) {
  fs::remove_all(dir_);
  fs::create_directories(dir_ / "home");
}

JobDir::~JobDir() { fs::remove_all(dir_); }

void JobDir::Write(const std::string& yaml, const std::string& name) const {
  std::ofstream(dir_ / name) << yaml;
}

CliOutcome JobDir::Barge(const std::string& args) const {
  CliOutcome o;
  RunShell("cd " + ShellQuote(dir_.string()) + " && BARGE_HOME=home XDG_CONFIG_HOME=" + ShellQuote(SuiteConfigHome()) + " timeout -k 60 300 " +
               BARGE_BINARY + " " + args + " >out.txt 2>err.txt </dev/null",
           &o.code);
  o.out = ReadWholeFile(dir_ / "out.txt");
  o.err = ReadWholeFile(dir_ / "err.txt");
  return o;
}

pid_t JobDir::Start(const std::string& args, bool own_group) const {
  const std::string cmd = "cd " + ShellQuote(dir_.string()) + " && BARGE_HOME=home XDG_CONFIG_HOME=" + ShellQuote(SuiteConfigHome()) + " exec " +
                          BARGE_BINARY + " " + args + " >out.txt 2>err.txt </dev/null";
  pid_t pid = fork();
  if (pid == 0) {
    if (own_group) setpgid(0, 0);
    execl("/bin/sh", "sh", "-c", cmd.c_str(), nullptr);
    _exit(127);
  }
  return pid;
}

bool JobDir::WaitFor(const std::string& file, const std::string& text,
                     std::chrono::milliseconds limit) const {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (ReadWholeFile(dir_ / file).find(text) == std::string::npos) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

CliOutcome JobDir::Wait(pid_t pid, std::chrono::milliseconds limit) const {
  CliOutcome o;
  const auto end = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > end) {
      kill(pid, SIGTERM);
      o.err = "(terminated: still running after the test's limit)\n";
      const auto kill_at = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (waitpid(pid, &status, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() > kill_at) {
          kill(pid, SIGKILL);
          waitpid(pid, &status, 0);
          o.err = "(killed: still running 60 s after SIGTERM at the test's limit)\n";
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  o.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  o.out = ReadWholeFile(dir_ / "out.txt");
  o.err += ReadWholeFile(dir_ / "err.txt");
  return o;
}

std::string BedHostsYaml(size_t first, size_t n, const std::string& ssh_extra) {
  const Bed& bed = GetBed();
  std::ostringstream y;
  y << "hosts:\n";
  for (size_t i = first; i < first + n; ++i) y << "  - address: " << bed.hosts[i].address << "\n";
  y << "ssh:\n  user: " << bed.user << "\n  identity_file: " << bed.key
    << "\n  known_hosts: " << bed.known_hosts << "\n  connect_timeout: 10s\n" << ssh_extra;
  return y.str();
}

}  // namespace barge::testing
