// What a unit test of one controller part builds it from (part_world.h).
#include "tests/support/part_world.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "runner/controller/entry_points.h"
#include "runner/controller/host_connector.h"
#include "runner/jobfile/job_file.h"
#include "runner/logs/log_sink.h"
#include "runner/remote/watchdog.h"
#include "runner/store/state_dir.h"

namespace barge::runner {

void PartRecorder::HostBegan(const HostPhase& p, TimePoint) {
  edges.push_back(std::string(ToString(p.phase)) + " began " + p.label());
}

void PartRecorder::HostEnded(const HostPhase& p, TimePoint, bool ok, std::string_view detail) {
  edges.push_back(std::string(ToString(p.phase)) + (ok ? " ok " : " failed ") + p.label() +
                  (detail.empty() ? "" : ": " + std::string(detail)));
}

void PartRecorder::JobEvent(std::string_view kind, const std::optional<std::string>& host,
                            std::string_view detail, TimePoint) {
  events.push_back(std::string(kind) + (host ? " " + *host : "") + ": " + std::string(detail));
}

void PartRecorder::StepBegan(Phase phase, std::string_view label, int count) {
  steps.push_back(std::string(ToString(phase)) + " began " + std::string(label) + " (" + std::to_string(count) + ")");
}

void PartRecorder::StepEnded(Phase phase) { steps.push_back(std::string(ToString(phase)) + " ended"); }

bool PartRecorder::Said(const std::string& part) const {
  return std::any_of(messages.begin(), messages.end(),
                     [&](const std::string& m) { return m.find(part) != std::string::npos; });
}

std::string PartRecorder::AllMessages() const {
  std::string out;
  for (const auto& m : messages) out += m + "\n";
  return out;
}

PartWorld::PartWorld(const std::string& yaml) {
  state_ = std::filesystem::temp_directory_path() /
           ("barge-part-test-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::filesystem::remove_all(state_);
  std::filesystem::create_directories(state_);
  LoadedJob loaded = ParseJobText(yaml, "job.yaml", state_.string());
  if (!loaded.errors.empty()) {
    ADD_FAILURE() << loaded.errors[0].ToString();
    return;
  }
  spec_ = std::move(loaded.spec);
  planner_ = std::make_unique<internal::Planner>(MakePlanInput(*spec_, "abcd1234"));
  if (Status s = planner_->Start(); !s.ok()) {
    ADD_FAILURE() << s.message();
    return;
  }
  options_.state_dir = state_.string();
  options_.echo = false;
  ctx_ = std::make_unique<internal::JobContext>(*spec_, planner_->facts().job_id, options_, &loop_, &fake_);
  ctx_->observer.Add(&recorder_);
  attempt_ = std::make_unique<internal::Attempt>(&loop_, &ctx_->redact);
}

PartWorld::~PartWorld() {
  if (attempt_) attempt_->commands.Cancel();
  if (ctx_) {
    ctx_->timers.CancelAll();
    ctx_->job_commands.Cancel();
  }
  attempt_.reset();
  hosts_.by_index.clear();
  hosts_.retired.clear();
  ctx_.reset();
  std::filesystem::remove_all(state_);
}

std::string PartWorld::Yaml(const std::string& extra, const std::string& hosts) {
  return "name: fake\nimage: img\ncommand: [train]\nhosts: " + hosts +
         "\nssh: {dead_after: 1s, engine_timeout: 1s, engine_misses: 2}\nstop_grace: 1s\n" + extra;
}

bool PartWorld::Connect() {
  std::vector<HostTarget> targets;
  for (size_t h = 0; h < plan().hosts.size(); ++h) {
    const cluster::Host& host = plan().hosts[h];
    auto state = std::make_unique<internal::HostState>();
    state->index = h;
    state->id = static_cast<int>(h) + 1;
    state->name = internal::HostName(host);
    state->inventory = host;
    state->docker = std::make_unique<DockerCommands>(DockerCommandOf(*spec_, host));
    state->job_dir = NewHostJobDir(plan().job_id);
    HostTarget t;
    t.host = host;
    t.ssh = SessionOptionsFor(*spec_, host);
    targets.push_back(std::move(t));
    hosts_.by_index[h] = std::move(state);
  }
  auto executors = fake_.Connect(targets, 8);
  bool all = true;
  for (size_t h = 0; h < executors.size(); ++h) {
    if (!executors[h].ok()) {
      all = false;
      continue;
    }
    hosts_.by_index[h]->exec = std::move(executors[h]).value();
  }
  return all;
}

void PartWorld::MakeNodes() {
  for (const cluster::NodePlan& n : plan().nodes) {
    auto node = std::make_unique<internal::NodeState>();
    node->plan = &n;
    node->host = hosts_.by_index.at(n.host_index).get();
    attempt_->nodes.push_back(std::move(node));
  }
}

bool PartWorld::OpenSink() {
  std::vector<LogSink::Node> nodes;
  for (const cluster::NodePlan& n : plan().nodes) {
    nodes.push_back({n.rank, n.role, internal::HostName(plan().hosts[n.host_index])});
  }
  const std::string run_dir = RunDir(state_.string(), plan().job_id);
  if (Status s = MakeDirs(run_dir); !s.ok()) {
    ADD_FAILURE() << s.message();
    return false;
  }
  Result<std::unique_ptr<LogSink>> sink = LogSink::Open(run_dir, nodes, false);
  if (!sink.ok()) {
    ADD_FAILURE() << sink.status().message();
    return false;
  }
  attempt_->sink = std::move(sink).value();
  return true;
}

bool PartWorld::RunUntil(const std::function<bool()>& done, std::chrono::milliseconds limit) {
  const auto until = loop_.Now() + limit;
  while (!done()) {
    if (loop_.Now() >= until) return false;
    loop_.Poll(std::chrono::milliseconds(20));
  }
  return true;
}

}  // namespace barge::runner
