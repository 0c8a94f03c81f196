// FakeConnector: the scripted hosts and their small Docker model.
#include "tests/support/fake_hosts.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <regex>
#include <utility>

namespace barge::runner {

using Clock = ssh::EventLoop::Clock;
using std::chrono::milliseconds;

// One command in flight on a fake host. Ends once: from a timer, from its
// container's end, or from the session's drop.
struct FakeHost::Cmd {
  ssh::CommandCallbacks cb;
  bool ended = false;
  bool abandoned = false;  // its Command was destroyed: deliver nothing
  std::vector<ssh::EventLoop::TimerId> timers;
  std::string exit_marker;  // a log stream that reports the exit
};

struct FakeHost::Container {
  std::string name;
  int rank = 0;
  bool running = true;
  int exit_code = 0;
  bool oom_killed = false;
  std::vector<std::weak_ptr<Cmd>> logs;   // ended with the container
  std::vector<std::weak_ptr<Cmd>> waits;  // ended with inspect JSON
};

namespace {

const std::regex kName(R"(barge-[A-Za-z0-9_.-]+-[0-9]+)");

std::vector<std::string> NamesIn(const std::string& line) {
  std::vector<std::string> out;
  for (auto it = std::sregex_iterator(line.begin(), line.end(), kName); it != std::sregex_iterator(); ++it) {
    out.push_back(it->str());
  }
  return out;
}

int RankOf(const std::string& name) { return std::stoi(name.substr(name.rfind('-') + 1)); }

std::string InspectJson(const std::string& name, int code, bool oom) {
  nlohmann::json c = {{"Id", "id-" + name},
                      {"Name", "/" + name},
                      {"State",
                       {{"Status", "exited"}, {"Running", false}, {"ExitCode", code}, {"OOMKilled", oom}, {"Error", ""}}}};
  return nlohmann::json::array({c}).dump() + "\n";
}

// What a FollowUntilExit stream prints once its container ended ("" for a
// plain log stream).
std::string ExitReport(const std::string& marker, const std::string& name, int code, bool oom) {
  if (marker.empty()) return "";
  return marker + " 0\n" + InspectJson(name, code, oom);
}

}  // namespace

// The Command handed to the controller.
class FakeCommand : public ssh::Command {
 public:
  FakeCommand(FakeHost* host, std::shared_ptr<FakeHost::Cmd> cmd, ssh::EventLoop* loop)
      : host_(host), cmd_(std::move(cmd)), loop_(loop) {}
  ~FakeCommand() override {
    cmd_->abandoned = true;
    for (auto t : cmd_->timers) loop_->CancelTimer(t);
  }
  void WriteStdin(std::string_view) override {}
  void CloseStdin() override {}
  bool done() const override { return cmd_->ended; }
  size_t stdin_pending() const override { return 0; }
  // A fake's output is delivered whole when it ends; nothing to hold back.
  void PauseOutput(bool) override {}

 private:
  FakeHost* host_;
  std::shared_ptr<FakeHost::Cmd> cmd_;
  ssh::EventLoop* loop_;
};

class FakeExecutor : public ssh::Executor {
 public:
  FakeExecutor(FakeHost* host, FakeConnector* owner) : host_(host), owner_(owner) {}
  Result<std::unique_ptr<ssh::Command>> Start(const std::string& line, ssh::CommandCallbacks cb) override;
  std::string label() const override { return host_->address_; }
  std::string reached_address() const override { return host_->reached_address_; }

  // Ends `cmd` from the loop (never from Start).
  static void End(const std::shared_ptr<FakeHost::Cmd>& cmd, FakeHost* host, ssh::ExitStatus st,
                  const std::string& out, const std::string& err) {
    if (cmd->ended) return;
    cmd->ended = true;
    host->live_.erase(cmd);
    if (cmd->abandoned) return;
    if (!out.empty() && cmd->cb.on_stdout) cmd->cb.on_stdout(out);
    if (!err.empty() && cmd->cb.on_stderr) cmd->cb.on_stderr(err);
    if (cmd->cb.on_exit) cmd->cb.on_exit(st);
  }

 private:
  void At(const std::shared_ptr<FakeHost::Cmd>& cmd, milliseconds after, std::function<void()> fn) {
    cmd->timers.push_back(owner_->loop()->AddTimer(owner_->loop()->Now() + after, std::move(fn)));
  }
  void Reply(const std::shared_ptr<FakeHost::Cmd>& cmd, const FakeReply& r,
             std::optional<int> bound_s);
  static void EndContainer(FakeHost* host, const std::shared_ptr<FakeHost::Container>& c, int code);

  FakeHost* host_;
  FakeConnector* owner_;
};

void FakeExecutor::Reply(const std::shared_ptr<FakeHost::Cmd>& cmd, const FakeReply& r,
                         std::optional<int> bound_s) {
  FakeHost* host = host_;
  if (bound_s && (r.hang || r.after > std::chrono::seconds(*bound_s))) {
    At(cmd, std::chrono::seconds(*bound_s), [cmd, host] {
      ssh::ExitStatus st;
      st.code = 137;
      End(cmd, host, st, "", "");
    });
    return;
  }
  if (r.hang) return;
  At(cmd, r.after, [cmd, host, r] {
    ssh::ExitStatus st;
    st.code = r.code;
    End(cmd, host, st, r.out, r.err);
  });
}

void FakeExecutor::EndContainer(FakeHost* host, const std::shared_ptr<FakeHost::Container>& c,
                                int code) {
  if (!c->running) return;
  c->running = false;
  c->exit_code = code;
  for (auto& w : c->logs) {
    if (auto cmd = w.lock()) End(cmd, host, ssh::ExitStatus{0, "", ""}, ExitReport(cmd->exit_marker, c->name, c->exit_code, c->oom_killed), "");
  }
  for (auto& w : c->waits) {
    if (auto cmd = w.lock()) End(cmd, host, ssh::ExitStatus{0, "", ""}, InspectJson(c->name, code, c->oom_killed), "");
  }
  c->logs.clear();
  c->waits.clear();
}

Result<std::unique_ptr<ssh::Command>> FakeExecutor::Start(const std::string& line,
                                                          ssh::CommandCallbacks cb) {
  if (host_->dropped_) return Status::Error(host_->address_ + ": connection lost: " + *host_->dropped_);
  host_->lines_.push_back(line);
  owner_->Note(host_->address_, line);
  for (auto& [part, fn] : host_->triggers_) {
    if (fn && line.find(part) != std::string::npos) {
      owner_->loop()->AddTimer(owner_->loop()->Now(), std::move(fn));
      fn = nullptr;
    }
  }
  auto cmd = std::make_shared<FakeHost::Cmd>();
  cmd->cb = std::move(cb);
  host_->live_.insert(cmd);
  auto handle = std::make_unique<FakeCommand>(host_, cmd, owner_->loop());

  std::optional<int> bound;
  static const std::regex kTimeout(R"(^timeout -s KILL ([0-9]+) )");
  std::smatch m;
  if (std::regex_search(line, m, kTimeout)) bound = std::stoi(m[1]);

  // A rule wins over the model.
  for (auto it = host_->rules_.rbegin(); it != host_->rules_.rend(); ++it) {
    if (line.find(it->first) != std::string::npos) {
      Reply(cmd, it->second, bound);
      return std::unique_ptr<ssh::Command>(std::move(handle));
    }
  }
  FakeHost* host = host_;
  auto ok = [&](std::string out) {
    FakeReply r;
    r.out = std::move(out);
    Reply(cmd, r, bound);
  };
  const std::vector<std::string> names = NamesIn(line);
  if (line.find("@@barge{") != std::string::npos) {
    // A preflight script (runner/remote/preflight_script.h): a POSIX shell, every
    // check passing, every image there, the engine not asked.
    static const std::regex kSection(R"(bs (\w+);)");
    std::string out = "barge-posix-42\n";
    for (auto it = std::sregex_iterator(line.begin(), line.end(), kSection); it != std::sregex_iterator(); ++it) {
      const std::string name = (*it)[1];
      if (name == "engine") continue;
      out += "@@barge{ " + name + "\n";
      if (auto set = host->sections_.find(name); set != host->sections_.end()) {
        out += set->second.second + "\n@@barge} " + name + " " + std::to_string(set->second.first) + "\n";
        continue;
      }
      if (name.rfind("image", 0) == 0) out += "sha256:0123456789abcdef0123456789abcdef /var/lib/docker/overlay2/x/diff\n";
      if (name == "gpu") out += "GPU 0: fake\n";
      // The GPU health gate (runner/remote/gpu_health.h): 16 healthy GPUs
      // (more than any test's inventory), the kernel log readable.
      if (name == "gpuq") {
        out += "fields full\n";
        for (int i = 0; i < 16; ++i) {
          out += std::to_string(i) + ", GPU-fake-" + std::to_string(i) + ", Fake GPU, 1.0, 1024, 0, [N/A], Disabled, 00000000:" +
                 (i < 10 ? "0" : "") + std::to_string(i) + ":00.0\n";
        }
      }
      if (name == "gpuxid") out += "uptime 100.0\nsource dmesg\n";
      if (name == "hold") out += "took barge-hold-host\n";
      out += "\n@@barge} " + name + " 0\n";
    }
    ok(out);
  } else if (line.find("docker run -d ") != std::string::npos && !names.empty()) {
    auto c = std::make_shared<FakeHost::Container>();
    c->name = names.front();
    c->rank = RankOf(c->name);
    const FakeNode& script = owner_->node(c->rank);
    c->oom_killed = script.oom_killed;
    host_->containers_[c->name] = c;
    ssh::EventLoop* loop = owner_->loop();
    At(cmd, milliseconds(0), [loop, host, c, script] {
      // Its life begins once `docker run` has answered.
      loop->AddTimer(loop->Now() + script.runs_for,
                     [host, c, code = script.exit_code] { EndContainer(host, c, code); });
    });
    ok("id-" + c->name + "\n");
  } else if (line.find("docker logs ") != std::string::npos && !names.empty()) {
    // With an exit marker (DockerCommands::FollowUntilExit) it ends with
    // the marker, inspect's code and its output.
    static const std::regex kMarker("(@@barge-exit-[0-9a-f]+)");
    std::smatch mk;
    if (std::regex_search(line, mk, kMarker)) cmd->exit_marker = mk[1];
    auto it = host_->containers_.find(names.front());
    if (it == host_->containers_.end()) {
      FakeReply r{1, "", "Error: No such container: " + names.front() + "\n"};
      if (!cmd->exit_marker.empty()) {
        r = FakeReply{0, cmd->exit_marker + " 1\nError: No such object: " + names.front() + "\n",
                      "Error: No such container: " + names.front() + "\n"};
      }
      Reply(cmd, r, bound);
    } else {
      // Honours -f (and the node's follow_drops_last) and --since.
      const FakeNode& script = owner_->node(it->second->rank);
      const bool follow = line.find("docker logs -f ") != std::string::npos;
      static const std::regex kSince(R"(--since ([0-9TZ:.-]+))");
      std::smatch since;
      const bool has_since = std::regex_search(line, since, kSince);
      std::string out;
      const size_t n = script.lines.size() -
                       (follow ? std::min<size_t>(script.lines.size(), script.follow_drops_last) : 0);
      for (size_t i = 0; i < n; ++i) {
        char stamp[40];
        std::snprintf(stamp, sizeof stamp, "2026-11-24T10:00:00.%09dZ",
                      static_cast<int>(i) / std::max(1, script.lines_per_stamp));
        if (has_since && std::string(stamp) < since[1].str()) continue;
        out += std::string(stamp) + " " + script.lines[i] + "\n";
      }
      if (!out.empty()) {
        At(cmd, milliseconds(0), [cmd, out] {
          if (!cmd->ended && !cmd->abandoned && cmd->cb.on_stdout) cmd->cb.on_stdout(out);
        });
      }
      if (it->second->running) {
        it->second->logs.push_back(cmd);
      } else {
        ok(ExitReport(cmd->exit_marker, it->second->name, it->second->exit_code, it->second->oom_killed));
      }
    }
  } else if (line.find("docker wait ") != std::string::npos && !names.empty()) {
    auto it = host_->containers_.find(names.front());
    if (it == host_->containers_.end()) {
      FakeReply r{1, "", "Error: No such container: " + names.front() + "\n"};
      Reply(cmd, r, bound);
    } else if (it->second->running) {
      it->second->waits.push_back(cmd);
    } else {
      ok(InspectJson(it->second->name, it->second->exit_code, it->second->oom_killed));
    }
  } else if ((line.find("docker stop ") != std::string::npos ||
              line.find("docker kill ") != std::string::npos) && !names.empty()) {
    const bool term = line.find("docker stop ") != std::string::npos || line.find("TERM") != std::string::npos;
    At(cmd, milliseconds(0), [host, names, term] {
      for (const auto& n : names) {
        auto it = host->containers_.find(n);
        if (it != host->containers_.end()) EndContainer(host, it->second, term ? 143 : 137);
      }
    });
    ok("");
  } else if (line.find("docker rm -f ") != std::string::npos && !names.empty()) {
    At(cmd, milliseconds(0), [host, names] {
      for (const auto& n : names) {
        auto it = host->containers_.find(n);
        if (it == host->containers_.end()) continue;
        EndContainer(host, it->second, 137);
        host->containers_.erase(it);
      }
    });
    ok("");
  } else if (line.find("ps -aq --filter label=barge.job=") != std::string::npos) {
    // RemoveLabelled: every container of the job goes.
    const std::string job = line.substr(line.find("barge.job=") + 10, 8);
    std::string out;
    for (auto it = host_->containers_.begin(); it != host_->containers_.end();) {
      if (it->first.find("-" + job + "-") == std::string::npos) {
        ++it;
        continue;
      }
      out += "id-" + it->first + "\n";
      EndContainer(host, it->second, 137);
      it = host_->containers_.erase(it);
    }
    ok(out);
  } else if (line.find("image inspect") != std::string::npos) {
    ok("sha256:0123456789abcdef0123456789abcdef\n");
  } else if (line.find("echo barge-posix-") != std::string::npos) {
    ok("barge-posix-42\n");
  } else {
    ok("");
  }
  return std::unique_ptr<ssh::Command>(std::move(handle));
}

void FakeHost::Drop(const std::string& why) {
  if (dropped_) return;
  dropped_ = why;
  auto live = live_;
  for (const auto& cmd : live) {
    ssh::ExitStatus st;
    st.error = address_ + ": connection lost: " + why;
    FakeExecutor::End(cmd, this, st, "", "");
  }
  if (on_lost_) on_lost_(Status::Error(address_ + ": connection lost: " + why));
}

std::set<std::string> FakeHost::containers() const {
  std::set<std::string> out;
  for (const auto& [name, c] : containers_) out.insert(name);
  return out;
}

std::set<std::string> FakeHost::running() const {
  std::set<std::string> out;
  for (const auto& [name, c] : containers_) {
    if (c->running) out.insert(name);
  }
  return out;
}

FakeHost& FakeConnector::host(const std::string& address) {
  auto& h = hosts_[address];
  if (!h) {
    h = std::make_unique<FakeHost>(this, address);
    h->reached_address_ = "192.0.2." + std::to_string(hosts_.size());
  }
  return *h;
}

std::vector<Result<std::unique_ptr<ssh::Executor>>> FakeConnector::Connect(
    const std::vector<HostTarget>& targets, int) {
  std::vector<Result<std::unique_ptr<ssh::Executor>>> out;
  for (const HostTarget& t : targets) {
    FakeHost& h = host(t.host.address);
    ++h.connects_;
    if (h.refuse_) {
      out.emplace_back(Status::Error(t.host.address + ": " + *h.refuse_));
      continue;
    }
    h.dropped_.reset();
    h.on_lost_ = t.on_lost;
    out.emplace_back(std::unique_ptr<ssh::Executor>(std::make_unique<FakeExecutor>(&h, this)));
  }
  return out;
}

std::unique_ptr<ssh::Executor> FakeConnector::Local() {
  return std::make_unique<FakeExecutor>(&local(), this);
}

}  // namespace barge::runner
