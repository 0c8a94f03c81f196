// Helpers for tests that run the real barge CLI against the test bed: a
// scratch directory per test with its own BARGE_HOME, the CLI run in the
// foreground or the background, and independent checks on the bed's hosts
// over plain OpenSSH and their dockerds.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/bed_env.h"

namespace barge::testing {

struct CliOutcome {
  int code = -1;
  std::string out;
  std::string err;
};

std::string ReadWholeFile(const std::filesystem::path& p);

// Runs `command` on bed host `h` over plain OpenSSH (an independent check);
// stdout and stderr together.
std::string OnHost(const BedHost& h, const std::string& command, int* code = nullptr);

// Runs `command` (sh) inside namespace host `h`'s namespaces, as root on
// this machine (tests/bed/bed.sh exec); stdout and stderr together.
std::string InHost(const BedHost& h, const std::string& command);

// IDs of every barge-labelled container on `h`'s dockerd, one per line ("" =
// none), asked from this machine (not over SSH).
std::string JobContainers(const BedHost& h);

// PIDs of the live watchdog processes of job `job_id` on any bed host (the
// hosts share this machine's PID namespace): processes whose command line
// holds "barge-watchdog-<job_id>" and are not zombies. Read from /proc
// directly, so no grep of the test's own matches; other jobs' watchdogs
// (other tests, other engineers) are not counted.
std::vector<int> WatchdogPids(const std::string& job_id);

// Waits until job `job_id` has no live watchdog process; false after `limit`.
bool WaitForNoWatchdog(const std::string& job_id, std::chrono::milliseconds limit);

// The job id barge printed on stderr ("barge: job 1a2b3c4d (NAME): ..."),
// or "".
std::string JobIdIn(const std::string& err);

// Wall-clock seconds since the epoch, with milliseconds.
double WallSeconds();
// "2026-11-22T06:21:28.368Z" (the store's JSON times) as WallSeconds.
double IsoSeconds(const std::string& iso);

// A test's scratch directory (removed at destruction) holding job files and
// BARGE_HOME=home.
class JobDir {
 public:
  explicit JobDir(const std::string& name);
  ~JobDir();
  JobDir(const JobDir&) = delete;
  JobDir& operator=(const JobDir&) = delete;

  const std::filesystem::path& path() const { return dir_; }
  void Write(const std::string& yaml, const std::string& name = "job.yaml") const;
  // `barge ARGS` in the directory, stdin from /dev/null, to completion. A
  // barge still running after 300 s gets SIGTERM (it tears its job down),
  // and SIGKILL 60 s later: a hung job fails its test, not the next ones.
  CliOutcome Barge(const std::string& args) const;
  // `barge ARGS` in the background (stdout to out.txt, stderr to err.txt);
  // returns its pid. Wait() reaps it. With `own_group`, barge leads a process
  // group of its own, as a shell's foreground job does: kill(-pid, SIGINT)
  // is then what Ctrl-C at its terminal sends.
  pid_t Start(const std::string& args, bool own_group = false) const;
  // Polls until `file` (out.txt, err.txt) holds `text`; false after `limit`.
  bool WaitFor(const std::string& file, const std::string& text,
               std::chrono::milliseconds limit = std::chrono::seconds(60)) const;
  // Waits for `pid` (at most `limit`, then SIGTERM, so that barge tears its
  // job down, and SIGKILL 60 s later) and returns what it printed and its
  // exit code.
  CliOutcome Wait(pid_t pid, std::chrono::milliseconds limit = std::chrono::seconds(180)) const;

 private:
  std::filesystem::path dir_;
};

// hosts: (the namespace hosts `first`..`first+n-1`) and ssh: blocks.
std::string BedHostsYaml(size_t first, size_t n, const std::string& ssh_extra = "");

}  // namespace barge::testing
