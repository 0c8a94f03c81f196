// FakeConnector: scripted hosts for unit tests of the controller's logic
// (restarts, spares, preemption, on_worker_exit, no partial launch,
// interrupts in every phase), like ninja's FakeCommandRunner. For tests
// only: the bed tests stay the proof on real sshd and dockerd.
//
// Each fake host answers every command line the controller sends from
// rules (substring → reply; the last rule added that matches wins) and, for
// what no rule matches, from a small model of a Docker engine: `run -d`
// makes a running container whose life the test scripted by rank (how long
// it runs, its exit code, its output); `logs -f` streams the output and
// ends when it ends; `wait ...; inspect` ends when it ends and prints
// inspect JSON; `stop`, `kill` and `rm -f` end it; a `timeout -s KILL N`
// around a command that hangs ends with 137 after N s. Everything else
// succeeds at once with no output (the POSIX-shell probe and image inspect
// answer what a real host does).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "runner/controller/host_connector.h"
#include "ssh/event_loop.h"

namespace barge::runner {

struct FakeReply {
  int code = 0;
  std::string out = {};
  std::string err = {};
  std::chrono::milliseconds after{0};  // when it ends
  bool hang = false;                   // never ends by itself
};

// How a node's container behaves once `docker run` made it.
struct FakeNode {
  std::chrono::milliseconds runs_for{std::chrono::hours(1)};
  int exit_code = 0;
  bool oom_killed = false;
  std::vector<std::string> lines = {};  // printed at start, one per line
  // Line i is stamped 2026-11-24T10:00:00 + i / lines_per_stamp ns.
  int lines_per_stamp = 1;
  // A follow (`docker logs -f`) leaves out this many last lines, as Docker
  // 20.10's can when the container exits; a read without -f has them all.
  int follow_drops_last = 0;
};

class FakeConnector;

class FakeHost {
 public:
  FakeHost(FakeConnector* owner, std::string address) : owner_(owner), address_(std::move(address)) {}
  // Commands containing `substring` get `reply` (the last matching rule wins).
  void On(const std::string& substring, FakeReply reply) { rules_.push_back({substring, reply}); }
  // Preflight's section `name` answers `text` with `exit` (instead of the
  // model's answer).
  void Section(const std::string& name, std::string text, int exit = 0) {
    sections_[name] = {exit, std::move(text)};
  }
  // The first command containing `substring` to start here runs `fn`, from
  // the loop, right after it started (to inject a fault at a phase).
  void When(const std::string& substring, std::function<void()> fn) {
    triggers_.push_back({substring, std::move(fn)});
  }
  // Connecting fails with `why`.
  void RefuseConnect(const std::string& why) { refuse_ = why; }
  // The address its connection reached (Executor::reached_address): by
  // default a TEST-NET-1 address of its own, 192.0.2.N (N = 1, 2, ... in the
  // order hosts are first named); "" as for a host reached through a jump
  // host, which barge then asks (give it a rule for the address probe).
  void set_reached_address(std::string address) { reached_address_ = std::move(address); }
  const std::string& reached_address() const { return reached_address_; }
  // The session dies now: running commands end with an error, then the
  // controller's on_lost runs; later starts fail.
  void Drop(const std::string& why);
  // Every command line started here, in order.
  const std::vector<std::string>& lines() const { return lines_; }
  int connects() const { return connects_; }
  // Containers of this host that were started and are not removed.
  std::set<std::string> containers() const;
  std::set<std::string> running() const;

 private:
  friend class FakeConnector;
  friend class FakeExecutor;
  friend class FakeCommand;
  struct Container;
  struct Cmd;
  FakeConnector* owner_;
  std::string address_;
  std::vector<std::pair<std::string, FakeReply>> rules_;
  std::map<std::string, std::pair<int, std::string>> sections_;
  std::vector<std::pair<std::string, std::function<void()>>> triggers_;
  std::optional<std::string> refuse_;
  std::string reached_address_;
  std::optional<std::string> dropped_;
  std::function<void(const Status&)> on_lost_;
  std::vector<std::string> lines_;
  int connects_ = 0;
  std::map<std::string, std::shared_ptr<Container>> containers_;
  std::set<std::shared_ptr<Cmd>> live_;  // commands not yet ended
};

class FakeConnector : public HostConnector {
 public:
  explicit FakeConnector(ssh::EventLoop* loop) : loop_(loop) {}
  // The host named `address` (made on first use).
  FakeHost& host(const std::string& address);
  // The script of node `rank`'s container on every host.
  void SetNode(int rank, FakeNode node) { nodes_[rank] = std::move(node); }
  // Commands on the controller's machine (Local()) end like this.
  FakeHost& local() { return host("<local>"); }

  std::vector<Result<std::unique_ptr<ssh::Executor>>> Connect(const std::vector<HostTarget>& targets,
                                                              int parallelism) override;
  std::unique_ptr<ssh::Executor> Local() override;

  ssh::EventLoop* loop() const { return loop_; }
  // Every command line started on any host, as "HOST: LINE", in order.
  const std::vector<std::string>& all_lines() const { return all_lines_; }
  void Note(const std::string& host, const std::string& line) { all_lines_.push_back(host + ": " + line); }
  const FakeNode& node(int rank) {
    static const FakeNode kDefault;
    auto it = nodes_.find(rank);
    return it == nodes_.end() ? kDefault : it->second;
  }

 private:
  ssh::EventLoop* loop_;
  std::map<std::string, std::unique_ptr<FakeHost>> hosts_;
  std::map<int, FakeNode> nodes_;
  std::vector<std::string> all_lines_;
};

}  // namespace barge::runner
