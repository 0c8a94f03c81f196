// PartWorld: what a unit test of one controller part (runner/controller/)
// builds the part from: a job spec from YAML text, the planner (the facts
// the plan is made from and the plan), the job's context on a virtual loop with scripted
// fake hosts (fake_hosts.h) and a recording observer, the host set and the
// attempt. A test gives the part only what its constructor takes, and fills
// the host set itself (Connect) without the Connections part.
//
// For tests only; the loop's thread only.
#pragma once

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/plan.h"
#include "runner/controller/attempt.h"
#include "runner/controller/host_set.h"
#include "runner/controller/job_context.h"
#include "runner/controller/job_observer.h"
#include "runner/controller/job_state.h"
#include "runner/controller/planner.h"
#include "runner/jobfile/job_spec.h"
#include "ssh/event_loop.h"
#include "tests/support/fake_hosts.h"

namespace barge::runner {

// Keeps barge's messages, job events and host phase edges, in order.
class PartRecorder : public JobObserver {
 public:
  void HostBegan(const HostPhase& p, TimePoint) override;
  void HostEnded(const HostPhase& p, TimePoint, bool ok, std::string_view detail) override;
  void JobEvent(std::string_view kind, const std::optional<std::string>& host, std::string_view detail,
                TimePoint) override;
  void Message(std::string_view line) override { messages.push_back(std::string(line)); }
  // Steps as "PHASE began LABEL (COUNT)" and "PHASE ended".
  void StepBegan(Phase phase, std::string_view label, int count) override;
  void StepEnded(Phase phase) override;
  // Whether a message contains `part`.
  bool Said(const std::string& part) const;
  std::string AllMessages() const;

  std::vector<std::string> edges, events, messages;
  std::vector<std::string> steps;
};

class PartWorld {
 public:
  // The job of `yaml` (a parse error fails the test and leaves spec()
  // unusable), job id "abcd1234", its state directory made under the
  // system's temporary directory and removed with the world.
  explicit PartWorld(const std::string& yaml);
  ~PartWorld();
  PartWorld(const PartWorld&) = delete;
  PartWorld& operator=(const PartWorld&) = delete;

  // A job file's text: hosts h1 h2 (or `hosts`), short SSH and engine
  // bounds, plus `extra`.
  static std::string Yaml(const std::string& extra = "", const std::string& hosts = "[h1, h2]");

  // A HostState per host of the plan, connected through the fake connector
  // (as the Connections part would, without it): its docker commands, a job
  // directory, and its executor. False when a host refused.
  bool Connect();
  // A NodeState per node of the plan in the attempt, on its host.
  void MakeNodes();
  // The attempt's log sink (attempt().sink): one file per node of the plan
  // under state_dir()/runs/<job id>/, not echoed. False (and a test
  // failure) when it cannot be opened.
  bool OpenSink();
  // Polls the loop until `done()` or `limit` of its (virtual) time passed.
  bool RunUntil(const std::function<bool()>& done, std::chrono::milliseconds limit = std::chrono::minutes(5));

  const JobSpec& spec() const { return *spec_; }
  FakeConnector& fake() { return fake_; }
  FakeHost& host(const std::string& address) { return fake_.host(address); }
  ssh::EventLoop& loop() { return loop_; }
  PartRecorder& recorder() { return recorder_; }
  internal::JobContext& ctx() { return *ctx_; }
  // The job's planner (its facts and the current plan), as the
  // controller's parts are given it.
  internal::Planner& planner() { return *planner_; }
  const cluster::PlanInput& input() const { return planner_->facts(); }
  const cluster::Plan& plan() const { return planner_->plan(); }
  internal::HostSet& hosts() { return hosts_; }
  internal::Attempt& attempt() { return *attempt_; }
  internal::HostState& host_state(size_t index) { return *hosts_.by_index.at(index); }
  const std::filesystem::path& state_dir() const { return state_; }

 private:
  std::filesystem::path state_;
  ssh::EventLoop loop_{ssh::EventLoop::TimeSource::kVirtual};
  FakeConnector fake_{&loop_};
  PartRecorder recorder_;
  std::optional<JobSpec> spec_;
  ControllerOptions options_;
  std::unique_ptr<internal::Planner> planner_;
  std::unique_ptr<internal::JobContext> ctx_;
  internal::HostSet hosts_;
  std::unique_ptr<internal::Attempt> attempt_;
};

}  // namespace barge::runner
