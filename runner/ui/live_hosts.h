// The hosts page's live part: what the hosts themselves list (holds,
// leases, tickets, barge containers), asked by running `barge hosts --json`
// (the same code and the same one round trip per host as on the command
// line) as a child process. So server threads still never touch libssh, and
// a slow or unreachable host costs one child, killed at a deadline.
#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/time_point.h"

namespace barge::runner::ui {

// One entry of a host's listing, as `barge hosts --json` gives it.
struct LiveHold {
  std::string name;  // barge-hold-host, barge-hold-gpu-0, barge-lease-JOB.T, barge-ticket-JOB
  std::string job;
  std::string job_name;
  std::string user;
  std::string machine;
  std::string gpus;
  std::string since;     // ISO-8601 UTC, the host's clock
  std::string stale_at;  // "" when never
  bool stale = false;
  bool lease = false;
  bool ticket = false;
  std::optional<int> queue_position;  // a live ticket's place, from 1
};

struct LiveContainer {
  std::string name;
  std::string job;
  std::string role;
  std::string rank;
  std::string status;
};

// One entry of a host's failure record (runner/remote/host_record.h).
struct LiveFault {
  std::string at;  // ISO-8601 UTC, the host's clock
  std::string kind;
  std::string job;
  std::string job_name;
  std::string user;
  std::string machine;
  std::optional<int> gpu;
  std::string detail;
};

// The host's failure record and how it is judged.
struct LiveRecord {
  bool out = false;  // out of every job's choice
  int counted = 0;   // host-caused failures inside the window
  int allowed = 0;
  long long window_s = 0;
  std::vector<int> gpus_out;
  std::vector<LiveFault> entries;
};

struct LiveHost {
  std::string host;
  std::string error;  // could not be asked: why ("" when it answered)
  std::vector<LiveHold> holds;
  std::vector<LiveContainer> containers;
  LiveRecord record;
};

// The JSON `barge hosts --json` prints (HostsJson), read back.
[[nodiscard]] Result<std::vector<LiveHost>> ParseHostsJson(const std::string& text);

struct LiveHostsReading {
  TimePoint at{};                // when the hosts were asked
  std::string command;           // "barge hosts --json ...", for the page
  std::vector<LiveHost> hosts;   // as far as it answered
  std::string error;             // "" when it printed its JSON; else what went wrong
};

// Where the live reading comes from: `barge_binary hosts --json job_file`
// or `... --hosts hosts_list` (one of them), run with BARGE_HOME=state_dir.
struct LiveHostsSource {
  std::string barge_binary;
  std::string state_dir;
  std::string job_file;
  std::string hosts_list;
  std::chrono::seconds deadline{90};
  // A reading younger than this is shown again rather than asked anew.
  std::chrono::seconds max_age{5};
};

// Thread-safe: server threads share one.
class LiveHosts {
 public:
  explicit LiveHosts(LiveHostsSource source) : source_(std::move(source)) {}
  // Whether `barge ui` was given hosts to ask (a job file or --hosts).
  bool enabled() const { return !source_.job_file.empty() || !source_.hosts_list.empty(); }
  // The latest reading: asked anew when the last one is older than
  // max_age, unless another thread is asking now (then the last one, or
  // nullopt before the first; never a second child at once). Blocks while
  // this thread asks, at most the source's deadline.
  std::optional<LiveHostsReading> Read();

 private:
  LiveHostsReading Ask() const;
  const LiveHostsSource source_;
  std::mutex asking_;  // held while a child runs
  std::mutex last_mutex_;
  std::optional<LiveHostsReading> last_;
};

}  // namespace barge::runner::ui
