// The controller's logic on fake hosts (fake_hosts.h): launch order, no
// partial launch, faults, restarts with spares, preemption, on_worker_exit,
// timeouts and interrupts in every phase, in seconds. The bed tests
// (runner/*_bed_test.cc) prove the same on real sshd and dockerd.
#include "runner/controller/controller.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "runner/console/exit_codes.h"
#include "runner/jobfile/job_file.h"
#include "runner/remote/docker_commands.h"
#include "runner/remote/reservation.h"
#include "runner/store/job_store.h"
#include "runner/controller/signature.h"
#include "tests/support/fake_hosts.h"
#include "tests/support/http_receiver.h"
#include "tests/support/scoped_env.h"

namespace barge::runner {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Keeps every host phase edge and job event, in order.
class Recorder : public JobObserver {
 public:
  void HostBegan(const HostPhase& p, TimePoint) override {
    edges.push_back(std::string(ToString(p.phase)) + " began " + p.label());
  }
  void HostEnded(const HostPhase& p, TimePoint, bool ok, std::string_view detail) override {
    edges.push_back(std::string(ToString(p.phase)) + (ok ? " ok " : " failed ") + p.label());
    if (!ok) failures.push_back(p.label() + ": " + std::string(detail));
  }
  void JobEvent(std::string_view kind, const std::optional<std::string>& host, std::string_view detail,
                TimePoint) override {
    events.push_back(std::string(kind) + (host ? " " + *host : "") + ": " + std::string(detail));
  }
  void Message(std::string_view line) override { messages.push_back(std::string(line)); }

  // Index of the first edge that starts with `prefix`, or -1.
  int First(const std::string& prefix) const {
    for (size_t i = 0; i < edges.size(); ++i) {
      if (edges[i].rfind(prefix, 0) == 0) return static_cast<int>(i);
    }
    return -1;
  }
  bool Said(const std::string& part) const {
    return std::any_of(messages.begin(), messages.end(),
                       [&](const std::string& m) { return m.find(part) != std::string::npos; });
  }
  std::string AllMessages() const {
    std::string out;
    for (const auto& m : messages) out += m + "\n";
    return out;
  }

  std::vector<std::string> edges, failures, events, messages;
};

class ControllerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    state_ = std::filesystem::temp_directory_path() /
             ("barge-controller-test-" + std::to_string(getpid()) + "-" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(state_);
    std::filesystem::create_directories(state_);
  }
  void TearDown() override { std::filesystem::remove_all(state_); }

  // The job file text: three hosts h1 h2 h3 plus `extra`.
  static std::string Job(const std::string& extra, const std::string& hosts = "[h1, h2, h3]") {
    return "name: fake\nimage: img\ncommand: [train]\nhosts: " + hosts +
           "\nssh: {dead_after: 1s, engine_timeout: 1s, engine_misses: 2}\nstop_grace: 1s\n" + extra;
  }

  // Makes the controller for `yaml` (kept in controller_), runs `before`
  // (to schedule faults), then Run. Returns Run's exit code.
  int Run(const std::string& yaml, const std::function<void(internal::Controller&)>& before = {}) {
    LoadedJob loaded = ParseJobText(yaml, "job.yaml", state_.string());
    if (!loaded.errors.empty()) {
      ADD_FAILURE() << loaded.errors[0].ToString();
      return -1;
    }
    spec_ = std::move(loaded.spec);
    input_ = MakePlanInput(*spec_, "abcd1234");
    options_.state_dir = state_.string();
    options_.echo = false;
    controller_ = std::make_unique<internal::Controller>(*spec_, input_, options_, &loop_, &fake_, &rec_);
    if (before) before(*controller_);
    const int code = controller_->Run();
    controller_.reset();
    return code;
  }

  // Runs `fn` on the loop `after` from now.
  void At(milliseconds after, std::function<void()> fn) { loop_.AddTimer(loop_.Now() + after, std::move(fn)); }

  // Polls the loop for `how_long` (of its time): whatever the controller
  // left behind on it (a callback into a dead frame) would run now.
  void Drain(milliseconds how_long) {
    const auto until = loop_.Now() + how_long;
    while (loop_.Now() < until) loop_.Poll(milliseconds(20));
  }

  bool NothingLeft() {
    for (const char* h : {"h1", "h2", "h3", "s1"}) {
      if (!fake_.host(h).containers().empty()) return false;
    }
    return true;
  }

  // Lines on `host` containing `part`.
  // Lines of `host` that `pattern` (ECMAScript) matches a part of.
  int CountRe(const std::string& host, const std::string& pattern) {
    const std::regex re(pattern);
    const auto& lines = fake_.host(host).lines();
    return static_cast<int>(std::count_if(lines.begin(), lines.end(), [&](const std::string& l) {
      return std::regex_search(l, re);
    }));
  }
  // The first capture of `pattern` in the first line of `host` it matches.
  std::string Capture(const std::string& host, const std::string& pattern) {
    const std::regex re(pattern);
    for (const std::string& l : fake_.host(host).lines()) {
      std::smatch m;
      if (std::regex_search(l, m, re)) return m[1].str();
    }
    return "";
  }
  int Count(const std::string& host, const std::string& part) {
    const auto& lines = fake_.host(host).lines();
    return static_cast<int>(std::count_if(lines.begin(), lines.end(), [&](const std::string& l) {
      return l.find(part) != std::string::npos;
    }));
  }

  JobStatus StatusInStore() {
    auto store = JobStore::Open(state_.string());
    auto job = (*store)->GetJob("abcd1234");
    return job.ok() ? job->status : JobStatus::kLost;
  }

  std::filesystem::path state_;
  // Virtual time (ssh/event_loop.h): the fake hosts' every event is a
  // timer, so the scripted seconds of runs, timeouts and backoffs pass
  // without waiting, in the order a real clock would give them.
  ssh::EventLoop loop_{ssh::EventLoop::TimeSource::kVirtual};
  FakeConnector fake_{&loop_};
  Recorder rec_;
  std::optional<JobSpec> spec_;
  cluster::PlanInput input_;
  ControllerOptions options_;
  std::unique_ptr<internal::Controller> controller_;
};

TEST_F(ControllerTest, TheHeadsExitCodeIsTheJobsAndNothingIsLeftOnAnyHost) {
  fake_.SetNode(0, FakeNode{milliseconds(300), 7});
  EXPECT_EQ(Run(Job("")), 7);
  EXPECT_TRUE(NothingLeft());
  EXPECT_EQ(StatusInStore(), JobStatus::kFailed);
  EXPECT_EQ(Count("h2", "docker run -d"), 1);
  EXPECT_EQ(Count("h3", "docker rm -f barge-"), 1);
}

TEST_F(ControllerTest, EveryHostIsPreflightedBeforeTheHeadStartsAndTheHeadIsReadyBeforeAnyWorker) {
  fake_.SetNode(0, FakeNode{milliseconds(400), 0, false, {"listening"}});
  EXPECT_EQ(Run(Job("roles: {head: {ready: {log: listening}}}\n")), 0);
  const int last_preflight = std::max({rec_.First("preflight ok h1"), rec_.First("preflight ok h2"),
                                       rec_.First("preflight ok h3")});
  ASSERT_GE(last_preflight, 0);
  EXPECT_LT(last_preflight, rec_.First("start began 0 on h1"));
  ASSERT_GE(rec_.First("ready ok 0 on h1"), 0);
  EXPECT_LT(rec_.First("ready ok 0 on h1"), rec_.First("start began 1 on h2"));
  EXPECT_LT(rec_.First("ready ok 0 on h1"), rec_.First("start began 2 on h3"));
  EXPECT_TRUE(NothingLeft());
}

TEST_F(ControllerTest, AnUnreachableHostStopsTheLaunchBeforeAnyContainerStarts) {
  fake_.host("h2").RefuseConnect("connection refused");
  EXPECT_EQ(Run(Job("")), 125);
  for (const auto& line : fake_.all_lines()) EXPECT_EQ(line.find("docker run -d"), std::string::npos) << line;
  EXPECT_TRUE(rec_.Said("h2: connection refused")) << rec_.AllMessages();
}

// The first `docker run -d` line sent to `host`.
std::string RunLine(FakeConnector& fake, const std::string& host) {
  for (const auto& l : fake.host(host).lines()) {
    if (l.find("docker run -d") != std::string::npos) return l;
  }
  return "";
}

TEST_F(ControllerTest, HostsNamedByANameAreToldTheAddressesTheirConnectionsReached) {
  fake_.SetNode(0, FakeNode{milliseconds(100), 0});
  fake_.host("h1").set_reached_address("10.1.0.1");
  fake_.host("h2").set_reached_address("10.1.0.2");
  fake_.host("h3").set_reached_address("10.1.0.3");
  EXPECT_EQ(Run(Job("")), 0);
  const std::string line = RunLine(fake_, "h1");
  EXPECT_NE(line.find("-e MASTER_ADDR=10.1.0.1 "), std::string::npos) << line;
  EXPECT_NE(line.find("-e BARGE_NODE_IPS=10.1.0.1,10.1.0.2,10.1.0.3 "), std::string::npos) << line;
  EXPECT_NE(line.find("-e SM_CURRENT_HOST=10.1.0.1 "), std::string::npos) << line;
  EXPECT_TRUE(rec_.Said("h1 is 10.1.0.1 (the address its SSH connection reached)")) << rec_.AllMessages();
  // Directly connected hosts cost no command.
  EXPECT_EQ(Count("h1", "SSH_CONNECTION"), 0);
}

TEST_F(ControllerTest, AHostBehindAJumpHostIsAskedWhereItWasReached) {
  fake_.SetNode(0, FakeNode{milliseconds(100), 0});
  fake_.host("h1").set_reached_address("10.1.0.1");
  fake_.host("h2").set_reached_address("10.1.0.2");
  fake_.host("h3").set_reached_address("");
  fake_.host("h3").On("SSH_CONNECTION", FakeReply{0, "ssh 10.1.0.2 50000 10.1.0.9 22\n"});
  EXPECT_EQ(Run(Job("")), 0);
  EXPECT_EQ(Count("h3", "SSH_CONNECTION"), 1);
  const std::string line = RunLine(fake_, "h1");
  EXPECT_NE(line.find("-e BARGE_NODE_IPS=10.1.0.1,10.1.0.2,10.1.0.9 "), std::string::npos) << line;
  EXPECT_TRUE(rec_.Said("h3 is 10.1.0.9 (the address it was reached at through its jump host"))
      << rec_.AllMessages();
}

TEST_F(ControllerTest, AHostThatCannotSayItsAddressStopsTheLaunchBeforeAnyContainerStarts) {
  fake_.host("h3").set_reached_address("");  // and no answer to the probe
  EXPECT_EQ(Run(Job("")), 125);
  for (const auto& line : fake_.all_lines()) EXPECT_EQ(line.find("docker run -d"), std::string::npos) << line;
  EXPECT_TRUE(rec_.Said("cannot tell this host's address")) << rec_.AllMessages();
  EXPECT_TRUE(rec_.Said("set internal_address for it")) << rec_.AllMessages();
}

// The shell problem is told apart by where it was found, not by its text:
// the address probe that failed because of the same shell is not reported.
TEST_F(ControllerTest, ANonPosixLoginShellIsTheOnlyProblemReportedForItsHost) {
  fake_.host("h3").set_reached_address("");  // its address probe gets no answer either
  fake_.host("h3").On("echo barge-posix-", FakeReply{1, "", "Illegal variable name.\n"});
  EXPECT_EQ(Run(Job("")), 125);
  EXPECT_TRUE(rec_.Said("preflight failed on 1 of 3 host(s)")) << rec_.AllMessages();
  EXPECT_TRUE(rec_.Said("h3    the login shell is not a POSIX shell (it answered 'Illegal variable name.' to `"))
      << rec_.AllMessages();
  EXPECT_FALSE(rec_.Said("cannot tell this host's address")) << rec_.AllMessages();
  for (const auto& line : fake_.all_lines()) EXPECT_EQ(line.find("docker run -d"), std::string::npos) << line;
}

TEST_F(ControllerTest, AHostReachedAtALoopbackAddressIsToldItsSourceAddressTowardTheHead) {
  fake_.SetNode(0, FakeNode{milliseconds(100), 0});
  fake_.host("h1").set_reached_address("10.1.0.1");
  fake_.host("h2").set_reached_address("127.0.0.1");
  fake_.host("h2").On("route get", FakeReply{0, "ssh 127.0.0.1 5 127.0.0.1 22\n"
                                                "10.1.0.1 dev eth0 src 10.1.0.7 uid 0 \n    cache \n"});
  EXPECT_EQ(Run(Job("", "[h1, h2]")), 0);
  EXPECT_EQ(Count("h2", "ip -o route get 10.1.0.1"), 1);
  const std::string line = RunLine(fake_, "h1");
  EXPECT_NE(line.find("-e BARGE_NODE_IPS=10.1.0.1,10.1.0.7 "), std::string::npos) << line;
  // A host given by IP address, or with internal_address, is never asked.
  EXPECT_EQ(Count("h1", "SSH_CONNECTION"), 0);
}

TEST_F(ControllerTest, InternalAddressAndIpAddressesAreUsedAsGiven) {
  fake_.SetNode(0, FakeNode{milliseconds(100), 0});
  fake_.host("h1").set_reached_address("");
  fake_.host("10.1.0.2").set_reached_address("");
  EXPECT_EQ(Run(Job("", "[{address: h1, internal_address: 10.1.0.1}, 10.1.0.2]")), 0);
  const std::string line = RunLine(fake_, "h1");
  EXPECT_NE(line.find("-e BARGE_NODE_IPS=10.1.0.1,10.1.0.2 "), std::string::npos) << line;
  EXPECT_EQ(Count("h1", "SSH_CONNECTION"), 0);
  EXPECT_EQ(Count("10.1.0.2", "SSH_CONNECTION"), 0);
}

TEST_F(ControllerTest, AWorkerThatFailsToStartRemovesTheHeadAlreadyStarted) {
  fake_.host("h3").On("docker run -d", FakeReply{125, "", "docker: no space left on device\n"});
  EXPECT_EQ(Run(Job("")), 125);
  EXPECT_EQ(Count("h1", "docker run -d"), 1);
  EXPECT_TRUE(NothingLeft());
  EXPECT_TRUE(rec_.Said("node 2 (worker) on h3 did not start: docker: no space left on device"))
      << rec_.AllMessages();
}

TEST_F(ControllerTest, ALaunchThatFailsAfterContainersStartedLeavesABundleOfTheStartedNodes) {
  fake_.host("h3").On("docker run -d", FakeReply{125, "", "docker: no space left on device\n"});
  EXPECT_EQ(Run(Job("")), 125);
  const std::filesystem::path bundle = state_ / "runs" / "abcd1234" / "diagnostics" / "attempt-0";
  EXPECT_TRUE(std::filesystem::is_regular_file(bundle / "rank-0-h1.txt"));
  std::ifstream index(bundle / "index.txt");
  std::string text((std::istreambuf_iterator<char>(index)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("why: the launch failed: "), std::string::npos) << text;
  EXPECT_TRUE(NothingLeft());
}

TEST_F(ControllerTest, AnInterruptDuringPreflightOnAFrozenEngineExits130AndLeavesNoCallbackBehind) {
  // h2's engine never answers: its preflight check hangs (bounded by
  // dead_after, 1 s) while the interrupt comes 100 ms after it started.
  fake_.host("h2").On("docker version", FakeReply{0, "", "", milliseconds(0), /*hang=*/true});
  const auto began = loop_.Now();
  EXPECT_EQ(Run(Job(""),
                [&](internal::Controller& c) {
                  fake_.host("h2").When("docker version", [&] { At(milliseconds(100), [&c] { c.Interrupt(2); }); });
                }),
            130);
  EXPECT_LT(loop_.Now() - began, seconds(5));
  for (const auto& line : fake_.all_lines()) EXPECT_EQ(line.find("docker run -d"), std::string::npos) << line;
  // The controller is gone: nothing of it may still be called from the loop.
  Drain(milliseconds(1500));
  EXPECT_EQ(StatusInStore(), JobStatus::kCancelled);
}

TEST_F(ControllerTest, AnInterruptWhileWorkersStartRemovesEveryContainerAndExits130) {
  fake_.host("h3").On("docker run -d", FakeReply{0, "id\n", "", seconds(3)});
  EXPECT_EQ(Run(Job(""),
                [&](internal::Controller& c) { fake_.host("h3").When("docker run -d", [&c] { c.Interrupt(15); }); }),
            130);
  EXPECT_EQ(Count("h1", "docker rm -f barge-"), 1);
  EXPECT_EQ(Count("h2", "docker rm -f barge-"), 1);
  EXPECT_EQ(Count("h3", "docker rm -f barge-"), 1);  // its run was attempted
  EXPECT_TRUE(NothingLeft());
  Drain(milliseconds(3500));
}

TEST_F(ControllerTest, AHostLostWhileItsNodeStartsEndsTheAttemptWithoutWaitingForTheStartsAnswer) {
  // h3's engine takes the worker's start and then freezes: the start never
  // answers, the engine probes get no answer, and h3 is found lost. The
  // job fails on that fault at once, not after the start's 300 s.
  fake_.host("h3").On("docker run -d", FakeReply{0, "", "", milliseconds(0), /*hang=*/true});
  const auto began = loop_.Now();
  EXPECT_EQ(Run(Job(""),
                [&](internal::Controller&) {
                  fake_.host("h3").When("docker run -d", [&] {
                    fake_.host("h3").On("docker version", FakeReply{0, "", "", milliseconds(0), /*hang=*/true});
                  });
                }),
            125);
  EXPECT_LT(loop_.Now() - began, seconds(120)) << "the start's answer was waited for";
  EXPECT_TRUE(rec_.Said("is lost: the Docker engine did not answer")) << rec_.AllMessages();
  EXPECT_EQ(Count("h1", "docker rm -f barge-"), 1);
  EXPECT_EQ(Count("h2", "docker rm -f barge-"), 1);
}

TEST_F(ControllerTest, ASecondInterruptKillsInsteadOfStopping) {
  fake_.host("h1").On("docker stop", FakeReply{0, "", "", milliseconds(0), /*hang=*/true});
  EXPECT_EQ(Run(Job(""),
                [&](internal::Controller& c) {
                  fake_.host("h2").When("docker logs", [&c] { c.Interrupt(2); });
                  fake_.host("h1").When("docker stop", [&c] { c.Interrupt(2); });
                }),
            130);
  EXPECT_EQ(Count("h1", "docker stop"), 1);
  EXPECT_TRUE(rec_.Said("interrupted again")) << rec_.AllMessages();
  EXPECT_TRUE(NothingLeft());
}

TEST_F(ControllerTest, AFailedWorkerEndsTheJobWhenOnWorkerExitIsFail) {
  fake_.SetNode(2, FakeNode{milliseconds(300), 3});
  EXPECT_EQ(Run(Job("")), 125);
  EXPECT_TRUE(rec_.Said("node_failed: node 2 (worker) on h3 ended: exit code 3")) << rec_.AllMessages();
  EXPECT_TRUE(NothingLeft());
}

TEST_F(ControllerTest, AFailedWorkerLeavesADiagnosticsBundleOfEveryNodeAndHostAskedBeforeTheTeardown) {
  fake_.SetNode(2, FakeNode{milliseconds(300), 3});
  EXPECT_EQ(Run(Job("")), 125);
  const std::filesystem::path bundle = state_ / "runs" / "abcd1234" / "diagnostics" / "attempt-0";
  EXPECT_TRUE(rec_.Said("diagnostics: " + bundle.string())) << rec_.AllMessages();
  for (const char* f : {"index.txt", "rank-0-h1.txt", "rank-1-h2.txt", "rank-2-h3.txt", "host-h1.txt", "host-h2.txt",
                        "host-h3.txt"}) {
    EXPECT_TRUE(std::filesystem::is_regular_file(bundle / f)) << f;
  }
  std::ifstream index(bundle / "index.txt");
  std::string text((std::istreambuf_iterator<char>(index)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("why: node_failed: node 2 (worker) on h3 ended: exit code 3\n"), std::string::npos) << text;
  EXPECT_EQ(std::count_if(rec_.events.begin(), rec_.events.end(),
                          [&](const std::string& e) { return e == "diagnostics: " + bundle.string() +
                                                                 ": node_failed: node 2 (worker) on h3 ended: exit code 3"; }),
            1)
      << ::testing::PrintToString(rec_.events);
  // Asked before the teardown removed the containers.
  for (const char* h : {"h1", "h2", "h3"}) {
    const std::vector<std::string>& lines = fake_.host(h).lines();
    auto first = [&](const std::string& part) {
      return std::find_if(lines.begin(), lines.end(), [&](const std::string& l) { return l.find(part) != std::string::npos; }) -
             lines.begin();
    };
    EXPECT_LT(first("pid,stat,wchan:32"), first("docker rm -f barge-")) << h;
    EXPECT_LT(first("kernel log since the job began"), first("docker rm -f barge-")) << h;
  }
  EXPECT_TRUE(NothingLeft());
}

TEST_F(ControllerTest, AHeadThatFailsLeavesABundleSayingHowItExited) {
  fake_.SetNode(0, FakeNode{milliseconds(300), 7});
  EXPECT_EQ(Run(Job("")), 7);
  EXPECT_TRUE(rec_.Said("diagnostics: ")) << rec_.AllMessages();
  std::ifstream index(state_ / "runs" / "abcd1234" / "diagnostics" / "attempt-0" / "index.txt");
  std::string text((std::istreambuf_iterator<char>(index)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("why: the head exited: exit code 7\n"), std::string::npos) << text;
}

TEST_F(ControllerTest, AJobThatSucceedsLeavesNoBundleAndAsksNothing) {
  fake_.SetNode(0, FakeNode{milliseconds(300), 0});
  EXPECT_EQ(Run(Job("")), 0);
  EXPECT_FALSE(std::filesystem::exists(state_ / "runs" / "abcd1234" / "diagnostics"));
  for (const char* h : {"h1", "h2", "h3"}) EXPECT_EQ(Count(h, "pid,stat,wchan"), 0) << h;
}

TEST_F(ControllerTest, AnInterruptedJobLeavesNoBundleAndAsksNothing) {
  fake_.host("h3").On("docker run -d", FakeReply{0, "id\n", "", seconds(3)});
  EXPECT_EQ(Run(Job(""),
                [&](internal::Controller& c) { fake_.host("h3").When("docker run -d", [&c] { c.Interrupt(15); }); }),
            130);
  EXPECT_FALSE(std::filesystem::exists(state_ / "runs" / "abcd1234" / "diagnostics"));
  for (const char* h : {"h1", "h2", "h3"}) EXPECT_EQ(Count(h, "pid,stat,wchan"), 0) << h;
  Drain(milliseconds(3500));
}

TEST_F(ControllerTest, EachFailedAttemptOfARestartedJobKeepsItsOwnBundle) {
  const int code = Run(Job("progress: {silence: 20s, every: 5s, on_hang: restart}\n"
                           "restart: {max_restarts: 1, backoff: 100ms}\n"),
                       [&](internal::Controller&) {
                         fake_.host("h1").When("docker stop", [&] { fake_.SetNode(0, FakeNode{seconds(2), 0}); });
                       });
  EXPECT_EQ(code, 0) << rec_.AllMessages();
  const std::filesystem::path diag = state_ / "runs" / "abcd1234" / "diagnostics";
  EXPECT_TRUE(std::filesystem::is_regular_file(diag / "attempt-0" / "rank-0-h1.txt"));
  EXPECT_FALSE(std::filesystem::exists(diag / "attempt-1"));
  std::ifstream index(diag / "attempt-0" / "index.txt");
  std::string text((std::istreambuf_iterator<char>(index)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("why: hang: the job made no progress"), std::string::npos) << text;
}

TEST_F(ControllerTest, AFailedWorkerIsOnlyReportedWhenOnWorkerExitIsIgnore) {
  fake_.SetNode(0, FakeNode{milliseconds(800), 0});
  fake_.SetNode(2, FakeNode{milliseconds(200), 3});
  EXPECT_EQ(Run(Job("on_worker_exit: ignore\n")), 0);
  EXPECT_TRUE(rec_.Said("node 2 (worker) on h3 ended: exit code 3")) << rec_.AllMessages();
  EXPECT_TRUE(NothingLeft());
}

TEST_F(ControllerTest, ALostHostIsReplacedByASpareAndTheWholeJobRestarts) {
  fake_.SetNode(0, FakeNode{milliseconds(1500), 0});
  const int code = Run(Job("spare_hosts: [s1]\nrestart: {max_restarts: 1, on: [host_lost], backoff: 100ms}\n"),
                       [&](internal::Controller&) { fake_.host("h2").When("docker logs", [&] { fake_.host("h2").Drop("link down"); }); });
  EXPECT_EQ(code, 0) << rec_.AllMessages();
  EXPECT_EQ(Count("s1", "docker run -d"), 1);
  EXPECT_EQ(Count("s1", "BARGE_RESTART_COUNT=1"), 1);
  EXPECT_EQ(Count("h1", "docker run -d"), 2);
  // The lost host's container is left to its watchdog; the others are gone.
  EXPECT_TRUE(fake_.host("h1").containers().empty());
  EXPECT_TRUE(fake_.host("h3").containers().empty());
  EXPECT_TRUE(fake_.host("s1").containers().empty());
  // The spare is a host of its own, which names the one it replaced.
  auto store = JobStore::Open(state_.string());
  auto hosts = (*store)->GetHosts("abcd1234");
  ASSERT_TRUE(hosts.ok());
  ASSERT_EQ(hosts->size(), 4u);
  EXPECT_EQ((*hosts)[3].name, "s1");
  ASSERT_TRUE((*hosts)[3].replaces.has_value());
  EXPECT_EQ(*(*hosts)[3].replaces, (*hosts)[1].host_id);
}

// Issue #44: a spare that would take a lost host's place at a restart is
// judged by its failure record (read by its preflight's holds listing), as
// the first choice is: one the record puts out is passed over, named in a
// host_avoided event, and left (its watchdog disarmed, its holds released)
// before the next spare is tried.
TEST_F(ControllerTest, AtARestartASpareItsFailureRecordPutsOutIsPassedOverForTheNext) {
  fake_.host("s1").Section("hold",
                           "now 1000\ntook barge-hold-host\n"
                           "hold\tf1\tbarge-fault-990-j1-1-0\t\ttrain\talice\tbox\t\t990\t\t\t\tengine\tj1\t\tno answer");
  fake_.SetNode(0, FakeNode{milliseconds(1500), 0});
  const int code =
      Run(Job("spare_hosts: [s1, s2]\nhealth: {host_failures: 0}\n"
              "restart: {max_restarts: 1, on: [host_lost], backoff: 100ms}\n"),
          [&](internal::Controller&) { fake_.host("h2").When("docker logs", [&] { fake_.host("h2").Drop("link down"); }); });
  EXPECT_EQ(code, 0) << rec_.AllMessages();
  EXPECT_EQ(Count("s1", "docker run -d"), 0) << "the spare its record puts out ran a node";
  EXPECT_EQ(Count("s2", "BARGE_RESTART_COUNT=1"), 1) << rec_.AllMessages();
  EXPECT_TRUE(rec_.Said("spare host s1 cannot be used: its failure record (on the host) has 1 host-caused failure(s) "
                        "in the last 24h00m, more than the 0 allowed (health.host_failures): engine "))
      << rec_.AllMessages();
  const auto avoided = std::find_if(rec_.events.begin(), rec_.events.end(), [](const std::string& e) {
    return e.rfind("host_avoided s1: its failure record (on the host) has 1 host-caused failure(s)", 0) == 0;
  });
  EXPECT_NE(avoided, rec_.events.end()) << ::testing::PrintToString(rec_.events);
  EXPECT_EQ(Count("s1", ReleaseHoldsCommand(DockerCommands({"docker"}), "abcd1234")), 1) << "s1's holds were kept";
  EXPECT_EQ(Count("s1", ".gone.XXXXXX"), 1) << "s1's watchdog was not disarmed";  // DisarmWatchdogCommand
  EXPECT_TRUE(fake_.host("s2").containers().empty());
}

TEST_F(ControllerTest, WithNoRestartLeftALostHostFailsTheJobNamingIt) {
  fake_.SetNode(0, FakeNode{seconds(5), 0});
  const int code = Run(Job("restart: {max_restarts: 0, on: [host_lost]}\n"),
                       [&](internal::Controller&) { fake_.host("h3").When("docker logs", [&] { fake_.host("h3").Drop("reset"); }); });
  EXPECT_EQ(code, 125);
  EXPECT_TRUE(rec_.Said("job failed: h3 is lost")) << rec_.AllMessages();
  EXPECT_TRUE(rec_.Said("no restarts left")) << rec_.AllMessages();
  EXPECT_TRUE(fake_.host("h1").containers().empty());
  EXPECT_TRUE(fake_.host("h2").containers().empty());
}

TEST_F(ControllerTest, AJobSilentPastItsProgressBoundIsStoppedAsHungWithExit123) {
  const int code = Run(Job("progress: {silence: 20s, every: 5s}\n"));
  EXPECT_EQ(code, kExitHung) << rec_.AllMessages();
  EXPECT_TRUE(rec_.Said("job failed: the job made no progress: no rank printed anything for 20s (progress:) "
                        "(progress.on_hang: stop)\nranks silent:\n  rank 0 (h1): no line since the attempt began"))
      << rec_.AllMessages();
  EXPECT_EQ(std::count_if(rec_.events.begin(), rec_.events.end(),
                          [](const std::string& e) { return e.rfind("hang ", 0) == 0; }),
            1)
      << ::testing::PrintToString(rec_.events);
  EXPECT_TRUE(NothingLeft());
  EXPECT_EQ(Count("h1", "docker run -d"), 1);
}

TEST_F(ControllerTest, AHangWithOnHangRestartRestartsTheJobWhichThenSucceeds) {
  const int code = Run(Job("progress: {silence: 20s, every: 5s, on_hang: restart}\n"
                           "restart: {max_restarts: 1, backoff: 100ms}\n"),
                       [&](internal::Controller&) {
                         // The first attempt's teardown: the next one's head ends at once.
                         fake_.host("h1").When("docker stop", [&] { fake_.SetNode(0, FakeNode{seconds(2), 0}); });
                       });
  EXPECT_EQ(code, 0) << rec_.AllMessages();
  EXPECT_EQ(Count("h1", "docker run -d"), 2);
  EXPECT_EQ(Count("h1", "BARGE_RESTART_COUNT=1"), 1);
  EXPECT_TRUE(rec_.Said("restarting the job (restart 1 of 1)")) << rec_.AllMessages();
  EXPECT_TRUE(NothingLeft());
}

TEST_F(ControllerTest, AHangWithNoRestartLeftFailsWithExit123SayingSo) {
  const int code = Run(Job("progress: {silence: 20s, every: 5s, on_hang: restart}\nrestart: {max_restarts: 0}\n"));
  EXPECT_EQ(code, kExitHung) << rec_.AllMessages();
  EXPECT_TRUE(rec_.Said("no rank printed anything for 20s (progress:) (no restarts left: max_restarts 0)"))
      << rec_.AllMessages();
}

TEST_F(ControllerTest, AnEngineThatStopsAnsweringMakesItsHostLost) {
  fake_.SetNode(0, FakeNode{seconds(10), 0});
  const int code = Run(Job(""), [&](internal::Controller&) {
    fake_.host("h2").When("docker logs", [&] {
      fake_.host("h2").On("docker version", FakeReply{0, "", "", milliseconds(0), true});
    });
  });
  EXPECT_EQ(code, 125);
  EXPECT_TRUE(rec_.Said("h2 is lost: the Docker engine did not answer (2 probes in a row")) << rec_.AllMessages();
  EXPECT_TRUE(rec_.Said("h2: the Docker engine did not answer within 1 s (miss 1 of 2); asking again"))
      << rec_.AllMessages();
}

TEST_F(ControllerTest, AnEngineThatMissesOneProbeButAnswersTheNextIsSlowNotLost) {
  fake_.SetNode(0, FakeNode{seconds(6), 0});
  const int code = Run(Job(""), [&](internal::Controller&) {
    fake_.host("h2").When("docker logs", [&] {
      // The next probe waits 1.5 s (over engine_timeout: 1 s), the one
      // after it answers at once.
      fake_.host("h2").On("docker version", FakeReply{0, "24\n", "", milliseconds(1500)});
      fake_.host("h2").When("docker version", [&] {
        fake_.host("h2").On("docker version", FakeReply{0, "24\n"});
      });
    });
  });
  EXPECT_EQ(code, 0) << rec_.AllMessages();
  EXPECT_TRUE(rec_.Said("h2: the Docker engine did not answer within 1 s (miss 1 of 2); asking again"))
      << rec_.AllMessages();
  EXPECT_FALSE(rec_.Said("is lost")) << rec_.AllMessages();
}

TEST_F(ControllerTest, APreemptionNoticeSendsSigtermFirstAndRestartsOnASpare) {
  fake_.SetNode(0, FakeNode{milliseconds(2000), 0});
  for (const char* h : {"h1", "h2", "h3", "s1"}) fake_.host(h).On("preempt-check", FakeReply{1});
  const int code = Run(
      Job("spare_hosts: [s1]\nrestart: {max_restarts: 1, on: [preempted], backoff: 100ms}\n"
          "preemption: {command: preempt-check, every: 200ms}\n"),
      [&](internal::Controller&) {
        fake_.host("h2").When("docker logs", [&] { fake_.host("h2").On("preempt-check", FakeReply{0, "spot notice\n"}); });
      });
  EXPECT_EQ(code, 0) << rec_.AllMessages() << [&] {
    std::string all;
    for (const auto& l : fake_.all_lines()) all += l.substr(0, 160) + "\n";
    return all;
  }();
  // SIGTERM to its container came before any stop or removal there.
  const auto& lines = fake_.host("h2").lines();
  auto term = std::find_if(lines.begin(), lines.end(),
                           [](const std::string& l) { return l.find("docker kill -s TERM") != std::string::npos; });
  auto rm = std::find_if(lines.begin(), lines.end(),
                         [](const std::string& l) { return l.find("docker rm -f barge-") != std::string::npos; });
  ASSERT_NE(term, lines.end());
  EXPECT_LT(term, rm);
  EXPECT_EQ(Count("s1", "docker run -d"), 1);
  EXPECT_TRUE(NothingLeft());
  // The job's hold on h2 (taken by its preflight) was released once the
  // spare took h2's place, by a command of its own (not the preflight
  // script's clean-up): h2 is no longer the job's.
  const int releases = static_cast<int>(std::count_if(lines.begin(), lines.end(), [](const std::string& l) {
    return l.find("@@barge{") == std::string::npos && l.find("label=barge.hold") != std::string::npos &&
           l.find("label=barge.job=abcd1234") != std::string::npos;
  }));
  EXPECT_EQ(releases, 1);
}

TEST_F(ControllerTest, TheJobsTimeoutEndsItWith124) {
  fake_.SetNode(0, FakeNode{seconds(30), 0});
  EXPECT_EQ(Run(Job("timeout: 1s\n")), 124);
  EXPECT_EQ(StatusInStore(), JobStatus::kTimedOut);
  EXPECT_TRUE(NothingLeft());
}

// Issue #40 (item 11): the watchdog's `timeout:` deadline goes to each host
// as the time left (the host adds it to its own clock, watchdog.h), never
// as a time of this machine's clock; a host armed again after a reconnect
// gets what is left of the job's timeout then, not all of it again.
TEST_F(ControllerTest, AHostArmedAgainAfterAReconnectGetsWhatIsLeftOfTheTimeoutNotAllOfIt) {
  fake_.SetNode(0, FakeNode{milliseconds(1500), 0});
  const int code = Run(Job("timeout: 1h\nrestart: {max_restarts: 1, on: [host_lost], backoff: 30s}\n"),
                       [&](internal::Controller&) { fake_.host("h2").When("docker logs", [&] { fake_.host("h2").Drop("link down"); }); });
  EXPECT_EQ(code, 0) << rec_.AllMessages();
  EXPECT_TRUE(rec_.Said("checking h2 again")) << rec_.AllMessages();
  const std::regex armed(R"(\$\(date \+%s\) \+ ([0-9]+)\)\))");
  std::vector<long long> left;  // each arming's time left on h2, in order
  for (const std::string& l : fake_.host("h2").lines()) {
    std::smatch m;
    if (l.find("barge-watchdog-abcd1234") != std::string::npos && std::regex_search(l, m, armed)) {
      left.push_back(std::stoll(m[1].str()));
    }
  }
  ASSERT_EQ(left.size(), 2u) << "h2 was not armed twice with a time left";
  EXPECT_EQ(left[0], 3600 + 90);  // the timeout and the grace (lease 10m: 3 renewals of 30 s)
  EXPECT_LE(left[1], left[0] - 30) << "armed again after the 30 s backoff with the whole timeout";
  EXPECT_GT(left[1], 3600 - 60);
  for (const char* h : {"h1", "h2", "h3"}) EXPECT_EQ(CountRe(h, "DEADLINE=[1-9]"), 0) << h;
}

TEST_F(ControllerTest, AHeadThatNeverGetsReadyFailsTheLaunchWithItsLastLines) {
  fake_.SetNode(0, FakeNode{seconds(30), 0, false, {"loading", "still loading"}});
  EXPECT_EQ(Run(Job("roles: {head: {ready: {log: never-printed, timeout: 1s}}}\n")), 125);
  EXPECT_TRUE(rec_.Said("the head was not ready after 1.000 s")) << rec_.AllMessages();
  EXPECT_TRUE(rec_.Said("| still loading")) << rec_.AllMessages();
  EXPECT_EQ(Count("h2", "docker run -d"), 0);
  EXPECT_TRUE(NothingLeft());
}

TEST_F(ControllerTest, EveryHostPhaseThatBeganAlsoEnded) {
  // Long enough for the workers to start even on a loaded machine.
  fake_.SetNode(0, FakeNode{milliseconds(1500), 0});
  EXPECT_EQ(Run(Job("")), 0);
  for (const std::string& edge : rec_.edges) {
    const size_t sp = edge.find(" began ");
    if (sp == std::string::npos) continue;
    const std::string phase = edge.substr(0, sp), who = edge.substr(sp + 7);
    EXPECT_TRUE(std::any_of(rec_.edges.begin(), rec_.edges.end(), [&](const std::string& e) {
      return e == phase + " ok " + who || e == phase + " failed " + who;
    })) << edge;
  }
  auto store = JobStore::Open(state_.string());
  auto phases = (*store)->GetPhases("abcd1234");
  ASSERT_TRUE(phases.ok());
  std::string all;
  for (const PhaseRecord& p : *phases) all += p.phase + " " + p.host + (p.rank ? " " + std::to_string(*p.rank) : "") + "\n";
  EXPECT_GE(phases->size(), 3u * 4) << all;  // connect, preflight, start, running per host at least
  for (const PhaseRecord& p : *phases) EXPECT_TRUE(p.ended.has_value()) << p.phase << " " << p.host;
}

// mpi: on fake hosts.
TEST_F(ControllerTest, AnMpiJobHasEveryWorkerReadyBeforeTheHeadStartsAndItsKeysOnNoCommandLine) {
  fake_.SetNode(0, FakeNode{milliseconds(300), 0});
  EXPECT_EQ(Run(Job("container: {network: host}\nmpi: {}\n")), 0) << rec_.AllMessages();
  const int head_start = rec_.First("start began 0 on h1");
  ASSERT_GE(head_start, 0);
  ASSERT_GE(rec_.First("ready ok 1 on h2"), 0);
  ASSERT_GE(rec_.First("ready ok 2 on h3"), 0);
  EXPECT_LT(rec_.First("ready ok 1 on h2"), head_start);
  EXPECT_LT(rec_.First("ready ok 2 on h3"), head_start);
  // Each key file is written from the command's stdin; no line holds a key.
  EXPECT_EQ(CountRe("h1", "cat > /tmp/barge-abcd1234\\.[a-z0-9]{12}/mpi/0/"), 5);  // key, .pub, known_hosts, config, hostfile
  EXPECT_EQ(CountRe("h2", "cat > /tmp/barge-abcd1234\\.[a-z0-9]{12}/mpi/1/"), 3);  // host key, .pub, authorized_keys
  EXPECT_EQ(Count("h1", "mpi/1/"), 0) << "node 1's files go only to its own host";
  EXPECT_EQ(Count("h2", "test -x /usr/sbin/sshd"), 1);
  for (const std::string& line : fake_.all_lines()) {
    EXPECT_EQ(line.find("PRIVATE KEY"), std::string::npos) << line;
    EXPECT_EQ(line.find("AAAAC3NzaC1lZDI1NTE5"), std::string::npos) << line;
  }
  EXPECT_TRUE(rec_.Said("MPI: a client key and 2 host key(s) made for this job")) << rec_.AllMessages();
  EXPECT_TRUE(NothingLeft());
}

// Issue #29: each host's job directory has a name drawn for it (no other
// user can know it before barge makes it), its files go there and its
// containers mount them from there.
TEST_F(ControllerTest, EachHostGetsAJobDirectoryNamedForItAndItsContainersMountFromIt) {
  fake_.SetNode(0, FakeNode{milliseconds(300), 0});
  EXPECT_EQ(Run(Job("container: {network: host}\nmpi: {}\n")), 0) << rec_.AllMessages();
  std::set<std::string> dirs;
  const char* hosts[] = {"h1", "h2", "h3"};
  for (int rank = 0; rank < 3; ++rank) {
    const std::string h = hosts[rank];
    const std::string dir = Capture(h, "mkdir -m 700 (/tmp/barge-abcd1234\\.[a-z0-9]{12})");
    ASSERT_FALSE(dir.empty()) << h << ": no job directory made";
    dirs.insert(dir);
    EXPECT_EQ(Count(h, "cat > " + dir + "/mpi/" + std::to_string(rank) + "/"), rank == 0 ? 5 : 3) << h;
    EXPECT_EQ(Count(h, "-v " + dir + "/mpi/" + std::to_string(rank) + ":/run/barge:ro"), 1) << h;
    EXPECT_EQ(CountRe(h, "XXXXXXXXXXXX"), 0) << h << ": the plan's shown name reached a host";
  }
  EXPECT_EQ(dirs.size(), 3u) << "two hosts share a name";
  EXPECT_TRUE(NothingLeft());
}

TEST_F(ControllerTest, AnMpiWorkerImageWithoutSshdFailsPreflightNamingOpensshServerAndStartsNothing) {
  fake_.host("h3").On("test -x /usr/sbin/sshd", FakeReply{1});
  EXPECT_EQ(Run(Job("container: {network: host}\nmpi: {}\n")), 125);
  EXPECT_TRUE(rec_.Said("h3    image img has no /usr/sbin/sshd, which every worker of an MPI job runs "
                        "(install the openssh-server package in the image)"))
      << rec_.AllMessages();
  EXPECT_EQ(Count("h1", "docker run -d"), 0);
  EXPECT_EQ(Count("h1", "mpi/0/id_ed25519"), 0) << "no key is shipped to a job that cannot start";
}

TEST_F(ControllerTest, AnMpiJobWhoseImageRunsAsANonRootUserGetsItsFilesReadableInA0755Directory) {
  // One command per image and host tells both sshd and the image's uid.
  for (const char* h : {"h1", "h2", "h3"}) {
    fake_.host(h).On("exit 1; id -u", FakeReply{0, "1000\n"});
    fake_.host(h).On("img -c '\\''id -u", FakeReply{0, "1000\n"});
  }
  fake_.SetNode(0, FakeNode{milliseconds(300), 0});
  EXPECT_EQ(Run(Job("container: {network: host}\nmpi: {}\n")), 0) << rec_.AllMessages();
  EXPECT_EQ(Count("h2", "test -x /usr/sbin/sshd || exit 1; id -u"), 1);
  EXPECT_EQ(Count("h1", "--entrypoint /bin/sh img -c '\\''id -u'\\''"), 1);
  EXPECT_EQ(Count("h1", "test -x"), 0) << "the head's image: its uid only";
  EXPECT_EQ(CountRe("h1", "chmod 0755 (/tmp/barge-abcd1234\\.[a-z0-9]{12})/mpi/0 && chmod 0644 \\1/mpi/0/\\*"), 1);
  EXPECT_EQ(CountRe("h2", "chmod 0755 (/tmp/barge-abcd1234\\.[a-z0-9]{12})/mpi/1 && chmod 0644 \\1/mpi/1/\\*"), 1);
  EXPECT_EQ(CountRe("h2", "chmod 0755 /tmp/barge-abcd1234\\.[a-z0-9]{12}/mpi "), 0) << "the parent stays 0700";
  EXPECT_TRUE(rec_.Said("3 node(s) whose image runs as a non-root user get them mode 0644 in a 0755 "
                        "directory (/tmp/barge-abcd1234.XXXXXXXXXXXX/mpi stays 0700)"))
      << rec_.AllMessages();
  EXPECT_TRUE(NothingLeft());
}

TEST_F(ControllerTest, AnMpiJobWhoseImageRunsAsRootKeepsItsFilesMode0600) {
  for (const char* h : {"h1", "h2", "h3"}) {
    fake_.host(h).On("exit 1; id -u", FakeReply{0, "0\n"});
    fake_.host(h).On("img -c '\\''id -u", FakeReply{0, "0\n"});
  }
  fake_.SetNode(0, FakeNode{milliseconds(300), 0});
  EXPECT_EQ(Run(Job("container: {network: host}\nmpi: {}\n")), 0) << rec_.AllMessages();
  for (const char* h : {"h1", "h2", "h3"}) EXPECT_EQ(CountRe(h, "chmod 0755 /tmp/barge-abcd1234\\.[a-z0-9]{12}/mpi"), 0) << h;
  EXPECT_FALSE(rec_.Said("non-root")) << rec_.AllMessages();
}

TEST_F(ControllerTest, AnMpiWorkerImageRunningAsNonRootOnAPortBelow1024FailsPreflight) {
  for (const char* h : {"h1", "h2", "h3"}) {
    fake_.host(h).On("exit 1; id -u", FakeReply{0, "1000\n"});
    fake_.host(h).On("img -c '\\''id -u", FakeReply{0, "1000\n"});
  }
  EXPECT_EQ(Run(Job("container: {network: host}\nmpi: {port: 222}\n")), 125);
  EXPECT_TRUE(rec_.Said("node 1's image img runs as uid 1000, whose sshd cannot listen on port 222 "
                        "(below 1024): set mpi.port to 1024 or above"))
      << rec_.AllMessages();
  EXPECT_EQ(Count("h2", "docker run -d"), 0);
}

TEST_F(ControllerTest, AnMpiWorkerWhoseSshdDiesIsANodeFailure) {
  fake_.SetNode(0, FakeNode{seconds(30), 0});
  fake_.SetNode(2, FakeNode{milliseconds(600), 255});
  EXPECT_EQ(Run(Job("container: {network: host}\nmpi: {}\n")), 125);
  EXPECT_TRUE(rec_.Said("node 2 (worker) on h3 ended: exit code 255")) << rec_.AllMessages();
  EXPECT_TRUE(NothingLeft());
}

// The text of every stdout line in the head's kept log file, in order.
std::vector<std::string> KeptHeadLines(const std::filesystem::path& state) {
  std::vector<std::string> out;
  std::ifstream in(state / "runs" / "abcd1234" / "0-h1.log");
  for (std::string line; std::getline(in, line);) {
    const size_t at = line.find(" stdout ");
    if (at != std::string::npos) out.push_back(line.substr(at + 8));
  }
  return out;
}

TEST_F(ControllerTest, LinesAFollowMissedAtTheContainersExitAreReadBackOnceInOrder) {
  FakeNode head{milliseconds(300), 0};
  for (int i = 0; i < 10; ++i) head.lines.push_back("line " + std::to_string(i));
  head.follow_drops_last = 4;
  fake_.SetNode(0, head);
  EXPECT_EQ(Run(Job("")), 0);
  EXPECT_EQ(KeptHeadLines(state_), head.lines);
  EXPECT_TRUE(NothingLeft());
}

TEST_F(ControllerTest, ACatchUpFromAStampSharedByLinesTheFollowGaveAndMissedKeepsEachOnce) {
  // Lines 3, 4 and 5 share a stamp; the follow gave 3 and 4, not 5.
  FakeNode head{milliseconds(300), 0};
  for (int i = 0; i < 9; ++i) head.lines.push_back("line " + std::to_string(i));
  head.lines_per_stamp = 3;
  head.follow_drops_last = 4;
  fake_.SetNode(0, head);
  EXPECT_EQ(Run(Job("")), 0);
  EXPECT_EQ(KeptHeadLines(state_), head.lines);
}


// The GPU health gate (gpu_gate.h) on fake hosts: the query's lines are
// nvidia-smi's (csv,noheader,nounits) for four GPUs.
std::string FourGpus(int ecc_on_gpu0) {
  std::string out = "fields full\n";
  for (int i = 0; i < 4; ++i) {
    out += std::to_string(i) + ", GPU-fake-" + std::to_string(i) + ", NVIDIA H100 80GB HBM3, 580.159.04, 81559, " +
           std::to_string(i == 0 ? ecc_on_gpu0 : 0) + ", [N/A], Disabled, 00000000:0" + std::to_string(i) + ":00.0\n";
  }
  return out;
}

TEST_F(ControllerTest, AnUnhealthyGpuIsTakenOutOfWhatItsHostOffersAndTheNodeGetsOthers) {
  fake_.host("h1").Section("gpuq", FourGpus(/*ecc_on_gpu0=*/2));
  fake_.SetNode(0, FakeNode{milliseconds(300), 0});
  EXPECT_EQ(Run(Job("container: {gpus: 2}\n", "[{address: h1, gpus: 4}]")), 0) << rec_.AllMessages();
  EXPECT_TRUE(rec_.Said("h1: GPU(s) 0 taken out (2 uncorrectable ECC error(s) since the driver loaded (reset the GPU))"))
      << rec_.AllMessages();
  EXPECT_EQ(CountRe("h1", "docker run -d .*--gpus '\"device=1,2\"'"), 1) << "the node did not get GPUs 1 and 2";
  EXPECT_EQ(CountRe("h1", "docker run -d .*device=0"), 0) << "GPU 0 reached the job's container";
}

TEST_F(ControllerTest, AHostWhoseNvidiaSmiHangsStartsNothingAndOneTableNamesIt) {
  fake_.host("h2").Section("gpuq", "fields full\n", 137);
  EXPECT_EQ(Run(Job("container: {gpus: all}\n")), 125);
  EXPECT_TRUE(rec_.Said("GPU health: 1 of 3 host(s) cannot run the job's nodes; nothing was started:")) << rec_.AllMessages();
  const std::string all = rec_.AllMessages();
  EXPECT_NE(all.find("HOST  GPU  PROBLEM"), std::string::npos) << all;
  EXPECT_NE(all.find("h2    -    nvidia-smi did not answer in time (killed by its timeout)  now"), std::string::npos) << all;
  for (const char* h : {"h1", "h2", "h3"}) EXPECT_EQ(Count(h, "docker run -d"), 0) << h;
  EXPECT_TRUE(NothingLeft());
}

TEST_F(ControllerTest, ASpareTakesAnUnhealthyHostsPlaceAtTheStartAndTheOutputSaysWhy) {
  fake_.host("h2").Section("gpuq", "fields full\n", 137);
  fake_.SetNode(0, FakeNode{milliseconds(300), 0});
  EXPECT_EQ(Run(Job("container: {gpus: all}\nspare_hosts: [s1]\n")), 0) << rec_.AllMessages();
  EXPECT_TRUE(rec_.Said("replacing h2 with spare host s1: GPU health: nvidia-smi did not answer in time (killed by its "
                        "timeout)"))
      << rec_.AllMessages();
  EXPECT_EQ(Count("h2", "docker run -d"), 0) << "a container started on the unhealthy host";
  for (const char* h : {"h1", "h3", "s1"}) EXPECT_EQ(Count(h, "docker run -d"), 1) << h;
  // The unhealthy host's holds and watchdog went when the spare took its
  // place: before any node started, not with the job's end.
  const std::vector<std::string>& lines = fake_.all_lines();
  auto first = [&](const std::string& prefix, const std::string& part) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (lines[i].rfind(prefix, 0) == 0 && lines[i].find(part) != std::string::npos) return i;
    }
    return lines.size();
  };
  // The release's own line: the preflight lists holds too, with the same
  // `docker ps` filter.
  const std::string release = "h2: " + ReleaseHoldsCommand(DockerCommands({"docker"}), "abcd1234");
  const size_t released = static_cast<size_t>(std::find(lines.begin(), lines.end(), release) - lines.begin());
  const size_t disarmed = first("h2: ", ".gone.XXXXXX");  // DisarmWatchdogCommand
  const size_t started = first("", "docker run -d");
  ASSERT_LT(started, lines.size());
  EXPECT_LT(released, started) << "h2's holds were not released before the nodes started";
  EXPECT_LT(disarmed, started) << "h2's watchdog was not disarmed before the nodes started";
  EXPECT_TRUE(NothingLeft());
  auto store = JobStore::Open(state_.string());
  auto hosts = (*store)->GetHosts("abcd1234");
  ASSERT_TRUE(hosts.ok());
  ASSERT_EQ(hosts->size(), 4u);
  EXPECT_EQ((*hosts)[3].name, "s1");
  ASSERT_TRUE((*hosts)[3].replaces.has_value());
  EXPECT_EQ(*(*hosts)[3].replaces, (*hosts)[1].host_id);
}

TEST_F(ControllerTest, AnUnhealthySpareIsPassedOverAndWithNoneLeftTheTableNamesTheHostStillOut) {
  fake_.host("h2").Section("gpuq", "fields full\n", 137);
  fake_.host("s1").Section("gpuq", "fields full\n", 137);
  EXPECT_EQ(Run(Job("container: {gpus: all}\nspare_hosts: [s1]\n")), 125) << rec_.AllMessages();
  EXPECT_TRUE(rec_.Said("replacing h2 with spare host s1")) << rec_.AllMessages();
  EXPECT_TRUE(rec_.Said("GPU health: 1 of 3 host(s) cannot run the job's nodes and no spare host is left to take "
                        "their place; nothing was started:"))
      << rec_.AllMessages();
  const std::string all = rec_.AllMessages();
  EXPECT_NE(all.find("s1    -    nvidia-smi did not answer in time"), std::string::npos) << all;
  for (const char* h : {"h1", "h2", "h3", "s1"}) EXPECT_EQ(Count(h, "docker run -d"), 0) << h;
  EXPECT_TRUE(NothingLeft());
}

// GpuWatch (gpu_watch.h): the driver's answers change while the job runs.
// An Xid line in the driver's format on GPU 1 (PCI 0000:01:00 in the fake
// hosts' query), logged after preflight (whose kernel log reads uptime 100).
std::string XidOnGpu1(int code) {
  return "uptime 112.000000\nsource dmesg\n[  111.000000] NVRM: Xid (PCI:0000:01:00): " + std::to_string(code) +
         ", pid=1896, name=python3, GPU has fallen off the bus.";
}

TEST_F(ControllerTest, AGpuFoundUnhealthyWhileTheJobRunsEndsTheAttemptAndTheRestartRunsWithoutIt) {
  fake_.SetNode(0, FakeNode{seconds(30), 0});
  At(seconds(12), [&] { fake_.host("h1").Section("gpuxid", XidOnGpu1(79)); });
  EXPECT_EQ(Run(Job("container: {gpus: 2}\nhealth: {every: 5s}\n"
                    "restart: {max_restarts: 1, on: [gpu_unhealthy], backoff: 100ms}\n",
                    "[{address: h1, gpus: 4}]")),
            0)
      << rec_.AllMessages();
  EXPECT_TRUE(rec_.Said("gpu_unhealthy: h1: GPU health while running (health.every): GPU 1: Xid 79")) << rec_.AllMessages();
  EXPECT_TRUE(rec_.Said("h1: GPU(s) 1 taken out for the restart")) << rec_.AllMessages();
  EXPECT_EQ(CountRe("h1", "docker run -d .*--gpus '\"device=0,1\"'"), 1) << "the first attempt";
  EXPECT_EQ(CountRe("h1", "docker run -d .*--gpus '\"device=0,2\"'"), 1) << "the restart without GPU 1";
  EXPECT_TRUE(NothingLeft());
}

TEST_F(ControllerTest, AHostFoundUnhealthyWhileTheJobRunsIsReplacedByASpareOrWithNoneLeftStopsTheJob) {
  fake_.SetNode(0, FakeNode{seconds(30), 0});
  const std::string job = "container: {gpus: all}\nhealth: {every: 5s}\n"
                          "restart: {max_restarts: 1, on: [gpu_unhealthy], backoff: 100ms}\n";
  At(seconds(12), [&] { fake_.host("h2").Section("gpuq", "fields full\n", 137); });
  EXPECT_EQ(Run(Job(job + "spare_hosts: [s1]\n")), 0) << rec_.AllMessages();
  EXPECT_TRUE(rec_.Said("gpu_unhealthy: h2: GPU health while running (health.every): nvidia-smi did not answer in time"))
      << rec_.AllMessages();
  EXPECT_TRUE(rec_.Said("replacing h2 with spare host s1")) << rec_.AllMessages();
  EXPECT_EQ(Count("h2", "docker run -d"), 1);
  EXPECT_EQ(Count("s1", "docker run -d"), 1);
  EXPECT_EQ(Count("s1", "BARGE_RESTART_COUNT=1"), 1);
  EXPECT_TRUE(NothingLeft());
}

TEST_F(ControllerTest, WithNoSpareLeftAHostFoundUnhealthyWhileTheJobRunsIsNotUsedAgain) {
  fake_.SetNode(0, FakeNode{seconds(30), 0});
  At(seconds(12), [&] { fake_.host("h2").Section("gpuq", "fields full\n", 137); });
  EXPECT_EQ(Run(Job("container: {gpus: all}\nhealth: {every: 5s}\nrestart: {max_restarts: 1, backoff: 100ms}\n")), 125)
      << rec_.AllMessages();
  EXPECT_TRUE(rec_.Said("cannot restart: h2 cannot be used again (GPU health while running: nvidia-smi did not answer in "
                        "time (killed by its timeout)) and no spare host is left"))
      << rec_.AllMessages();
  EXPECT_EQ(Count("h2", "docker run -d"), 1);
  EXPECT_TRUE(NothingLeft());
}

TEST_F(ControllerTest, IdleGpusOnEveryNodePastTheBoundAreAHangWithExit123) {
  fake_.SetNode(0, FakeNode{std::chrono::minutes(10), 0});
  for (const char* h : {"h1", "h2", "h3"}) fake_.host(h).Section("gpuutil", "0, 0\n1, 2");
  EXPECT_EQ(Run(Job("container: {gpus: all}\nprogress: {gpu_util: {below: 5, for: 30s}, every: 10s}\n")), 123)
      << rec_.AllMessages();
  EXPECT_TRUE(rec_.Said("job failed: the job made no progress: every GPU of rank 0 (h1), rank 1 (h2), rank 2 (h3) below "
                        "5% utilisation for 30s (progress.gpu_util) (progress.on_hang: stop)\nGPU utilisation by node"))
      << rec_.AllMessages();
  EXPECT_TRUE(NothingLeft());
}

TEST_F(ControllerTest, AJobThatWaitsForHostsDoesNotWaitForAnUnhealthyOneAndSaysItIsUnavailableNotBusy) {
  fake_.host("h2").Section("gpuq", "fields full\n", 137);
  EXPECT_EQ(Run(Job("container: {gpus: all}\nwait: 10m\n")), 125) << rec_.AllMessages();
  EXPECT_TRUE(rec_.Said("(unavailable, not busy: a job does not wait for an unhealthy host)")) << rec_.AllMessages();
  EXPECT_FALSE(rec_.Said("waiting for")) << rec_.AllMessages();
  for (const char* h : {"h1", "h2", "h3"}) EXPECT_EQ(Count(h, "docker run -d"), 0) << h;
}

TEST_F(ControllerTest, AWaitingJobsTicketIsOnEveryHostBeforeItSaysOrItsRecordShowsThatItWaits) {
  // Another job holds h1 (its lease renewed: not stale).
  fake_.host("h1").Section("hold",
                           "now 1000\n"
                           "hold\tid1\tbarge-hold-host\tother123\tother\tbob\tbox\tall\t1000\t1600\t600\t2\n"
                           "hold\tid2\tbarge-lease-other123.1000\tother123\tother\tbob\tbox\t\t1000\t1600\t600\t2");
  // Each host's ticket takes 1 s to make; just before it answers, nothing
  // may say the job waits yet.
  const std::string ticket = "h_mk barge-ticket-abcd1234";
  int placed = 0, said_early = 0;
  for (const char* h : {"h1", "h2", "h3"}) {
    fake_.host(h).On(ticket, FakeReply{.after = milliseconds(1000)});
    fake_.host(h).When(ticket, [&] {
      ++placed;
      At(milliseconds(990), [&] {
        if (rec_.Said("waiting for") || StatusInStore() == JobStatus::kWaiting) ++said_early;
      });
    });
  }
  EXPECT_EQ(Run(Job("wait: 4s\n")), 125) << rec_.AllMessages();
  EXPECT_EQ(placed, 3) << "not every host got the ticket before the job waited";
  EXPECT_EQ(said_early, 0) << rec_.AllMessages();
  EXPECT_TRUE(rec_.Said("waiting for h1 (held by other123 other bob@box)")) << rec_.AllMessages();
  // Placed once: the later tries make no ticket again.
  for (const char* h : {"h1", "h2", "h3"}) EXPECT_EQ(Count(h, ticket), 1) << h;
  for (const char* h : {"h1", "h2", "h3"}) EXPECT_EQ(Count(h, "docker run -d"), 0) << h;
}

// Issue #40 (item 11): a waiting job's place in line is its hosts' clock at
// its first try, the latest of them (h1 says 1000, h2 1003), never this
// machine's clock (here years away from theirs), which another
// controller's clock need not agree with: every host's ticket carries 1003.
TEST_F(ControllerTest, AWaitingJobsPlaceInLineIsTakenFromItsHostsClocksNotItsControllers) {
  fake_.host("h1").Section("hold",
                           "now 1000\n"
                           "hold\tid1\tbarge-hold-host\tother123\tother\tbob\tbox\tall\t1000\t1600\t600\t2\n"
                           "hold\tid2\tbarge-lease-other123.1000\tother123\tother\tbob\tbox\t\t1000\t1600\t600\t2");
  fake_.host("h2").Section("hold", "now 1003\ntook barge-hold-host\n");
  EXPECT_EQ(Run(Job("wait: 4s\n")), 125) << rec_.AllMessages();
  for (const char* h : {"h1", "h2", "h3"}) {
    EXPECT_EQ(Count(h, "h_mk barge-ticket-abcd1234"), 1) << h;
    EXPECT_GE(Count(h, "H_TS=1003;"), 1) << h;
    EXPECT_EQ(CountRe(h, "H_TS=(?!1003;|0;)"), 0) << h << ": a place that is not the hosts' clock";
  }
}

TEST_F(ControllerTest, HealthDcgmDiagnosesTheGpusTheJobHoldsAndAFailedGpuIsTakenOut) {
  // DCGM 3's documented JSON form (tests/data/dcgmi-documented-format/README.md).
  fake_.host("h1").On("diag -r 1 -j",
                      FakeReply{226, R"({"DCGM GPU Diagnostic": {"test_categories": [{"category": "Deployment",
                        "tests": [{"name": "Page Retirement/Row Remap", "results": [{"gpu_ids": "0", "status": "Fail",
                        "warnings": [{"warning": "GPU 0 had uncorrectable memory errors and row remapping failed.",
                        "error_id": 84}]}, {"gpu_ids": "1", "status": "Pass"}]}]}]}})"});
  fake_.SetNode(0, FakeNode{milliseconds(300), 0});
  EXPECT_EQ(Run(Job("container: {gpus: 2}\nhealth: {gpus: dcgm}\n", "[{address: h1, gpus: 4}]")), 0)
      << rec_.AllMessages();
  EXPECT_EQ(Count("h1", "diag -r 1 -j -i 0,1"), 1) << "not asked on the two GPUs the job holds";
  EXPECT_TRUE(rec_.Said("h1: GPU(s) 0 taken out (DCGM diagnostic: Page Retirement/Row Remap failed: GPU 0 had "
                        "uncorrectable memory errors and row remapping failed.)"))
      << rec_.AllMessages();
  EXPECT_EQ(CountRe("h1", "docker run -d .*--gpus '\"device=1,2\"'"), 1) << "the node did not get GPUs 1 and 2";
}

TEST_F(ControllerTest, HealthDcgmWithoutDcgmiIsSaidAsUnknownAndTheJobRuns) {
  fake_.host("h1").On("diag -r 1 -j", FakeReply{0, "dcgm absent\n"});
  fake_.SetNode(0, FakeNode{milliseconds(300), 0});
  EXPECT_EQ(Run(Job("container: {gpus: 1}\nhealth: {gpus: dcgm}\n", "[{address: h1, gpus: 4}]")), 0)
      << rec_.AllMessages();
  EXPECT_TRUE(rec_.Said("h1: GPU health: unknown: DCGM diagnostic unknown: dcgmi is not installed"))
      << rec_.AllMessages();
}

TEST_F(ControllerTest, AGpuHealthFindingOnAJobThatTakesAllGpusPutsTheHostOut) {
  fake_.host("h1").Section("gpuq", FourGpus(/*ecc_on_gpu0=*/1));
  EXPECT_EQ(Run(Job("container: {gpus: all}\n", "[{address: h1, gpus: 4}]")), 125);
  const std::string all = rec_.AllMessages();
  EXPECT_NE(all.find("the job's nodes there ask for GPUs all: no other GPU can be given"), std::string::npos) << all;
  EXPECT_NE(all.find("h1    0    1 uncorrectable ECC error(s)"), std::string::npos) << all;
  EXPECT_EQ(Count("h1", "docker run -d"), 0);
}

TEST_F(ControllerTest, AnUnreadableKernelLogIsSaidAsUnknownAndTheJobRuns) {
  fake_.host("h1").Section("gpuxid", "uptime 100.0\nunreadable: dmesg: read kernel buffer failed: Operation not permitted", 1);
  fake_.SetNode(0, FakeNode{milliseconds(300), 0});
  EXPECT_EQ(Run(Job("container: {gpus: 1}\n", "[{address: h1, gpus: 4}]")), 0) << rec_.AllMessages();
  EXPECT_TRUE(rec_.Said("h1: GPU health: unknown: Xid events unknown: the kernel log cannot be read (dmesg: read "
                        "kernel buffer failed: Operation not permitted)"))
      << rec_.AllMessages();
}

TEST_F(ControllerTest, GpuHealthOffAsksTheDriverNothing) {
  fake_.SetNode(0, FakeNode{milliseconds(300), 0});
  EXPECT_EQ(Run(Job("container: {gpus: all}\nhealth: {gpus: off}\n")), 0) << rec_.AllMessages();
  EXPECT_EQ(Count("h1", "--query-gpu="), 0);
}

TEST_F(ControllerTest, AJobWithoutGpusAsksTheDriverNothingAndOneWithGpusAsksEachHostOnce) {
  fake_.SetNode(0, FakeNode{milliseconds(300), 0});
  EXPECT_EQ(Run(Job("")), 0) << rec_.AllMessages();
  EXPECT_EQ(Count("h1", "--query-gpu="), 0);
  ControllerTest::TearDown();
  ControllerTest::SetUp();
  EXPECT_EQ(Run(Job("container: {gpus: 1}\n", "[{address: h1, gpus: 4}]")), 0) << rec_.AllMessages();
  EXPECT_EQ(Count("h1", "--query-gpu=index,uuid,name,driver_version,memory.total,ecc.errors.uncorrected.volatile.total"), 1);
}


TEST_F(ControllerTest, ALeaseTheEngineLostIsPutBackWithItsHoldAtTheRenewalThatFindsItGoneAndAJobThatTookTheHostIsNamed) {
  // h1's preflight made the job's lease (listed: renewed on the engine by
  // renaming id1) and its host hold.
  fake_.host("h1").Section("hold",
                           "now 1000\ntook barge-hold-host\n"
                           "hold\tid1\tbarge-lease-abcd1234.1000\tabcd1234\tfake\tme\tbox\t\t1000\t1004\t4\t2\n"
                           "hold\tid2\tbarge-hold-host\tabcd1234\tfake\tme\tbox\tall\t1000\t1004\t4\t2");
  // `docker container prune` on h1: the renewal's rename finds no lease.
  fake_.host("h1").On("rename id1", FakeReply{1, "", "Error response from daemon: No such container: id1\n"});
  // The put back (asked only once the rename failed): its lease is made
  // again, but another job took the host in between.
  const std::string put_back = "h_mk \"barge-lease-$H_J.$H_now\"";
  fake_.host("h1").When("rename id1", [&] {
    fake_.host("h1").On(put_back,
                        FakeReply{0,
                                  "now 1002\ntook barge-lease-abcd1234.1002\n"
                                  "hold\tid3\tbarge-lease-abcd1234.1002\tabcd1234\tfake\tme\tbox\t\t1002\t1006\t4\t2\n"
                                  "hold\tid4\tbarge-hold-host\tother123\tother\tbob\tbox\tall\t1001\t1601\t600\t2\n"
                                  "hold\tid5\tbarge-lease-other123.1001\tother123\tother\tbob\tbox\t\t1001\t1601\t600\t2\n"});
  });
  fake_.SetNode(0, FakeNode{milliseconds(4500), 0});
  // The job keeps running to its end.
  EXPECT_EQ(Run(Job("lease: 4s\n", "[h1]")), 0) << rec_.AllMessages();
  // Put back once, at the renewal that found it gone; the next renewals
  // rename the new lease.
  EXPECT_EQ(Count("h1", "rename id1"), 1) << rec_.AllMessages();
  EXPECT_EQ(Count("h1", put_back), 2) << "preflight's taking and one put back";
  EXPECT_GE(Count("h1", "rename id3"), 1);
  EXPECT_TRUE(rec_.Said("barge: h1: the job's lease and holds were removed from the engine (docker container prune?); "
                        "put back"))
      << rec_.AllMessages();
  EXPECT_TRUE(rec_.Said("barge: h1: another job (other123 other bob@box) took this host's whole host while the lease "
                        "was gone"))
      << rec_.AllMessages();
  EXPECT_EQ(std::count_if(rec_.events.begin(), rec_.events.end(),
                          [](const std::string& e) { return e.rfind("lease_put_back h1: ", 0) == 0; }),
            2)
      << ::testing::PrintToString(rec_.events);
}

// notify: the job's events reach a real HTTP receiver on loopback, signed
// with the key read from the environment; a receiver that refuses (404)
// is a warning at the end, not a failure of the job.
TEST_F(ControllerTest, NotifyPostsTheChosenEventsSignedAndARefusingReceiverIsOnlyAWarning) {
  barge::testing::HttpReceiver hook;
  barge::testing::HttpReceiver refusing({404, 404, 404});
  barge::testing::ScopedEnv key("BARGE_TEST_HOOK_KEY", std::string("k3y\n"));
  fake_.SetNode(0, FakeNode{milliseconds(300), 7});
  EXPECT_EQ(Run(Job("notify:\n  - url: " + hook.url() + "\n    events: [started, failed]\n"
                    "    secret: {env: BARGE_TEST_HOOK_KEY}\n  - url: " + refusing.url() + "\n    events: [failed]\n")),
            7);
  const auto got = hook.got();
  ASSERT_EQ(got.size(), 2u) << rec_.AllMessages();
  EXPECT_EQ(got[0].get_header_value("X-Barge-Event"), "started");
  EXPECT_EQ(got[1].get_header_value("X-Barge-Event"), "failed");
  for (const auto& req : got) {
    EXPECT_EQ(req.get_header_value("X-Barge-Signature"), "sha256=" + internal::HmacSha256Hex("k3y", req.body))
        << "keyed by the value without its line break";
  }
  const nlohmann::json failed = nlohmann::json::parse(got[1].body);
  EXPECT_EQ(failed["text"], "barge: job fake (abcd1234) failed: head exited with code 7");
  EXPECT_EQ(failed["job"]["id"], "abcd1234");
  EXPECT_EQ(refusing.got().size(), 1u) << "a 404 is not tried again";
  EXPECT_TRUE(rec_.Said("barge: warning: notify: http://127.0.0.1:")) << rec_.AllMessages();
  EXPECT_TRUE(rec_.Said("/...: failed: failed: HTTP 404 (1 try)")) << rec_.AllMessages();
  EXPECT_FALSE(rec_.Said("T0KEN")) << "the URL's path is not shown";
}

// Issue #42 (item 5): `on_failure: {keep: D}`, on the virtual clock. The
// moment the keep began (its line to h1's watchdog) and what every host
// had then.
class KeepTest : public ControllerTest {
 protected:
  static constexpr const char* kKeepLine = "/keep.next";
  // Notes when the keep's line reaches h1, and runs `during` `after` that.
  void WatchTheKeep(milliseconds after = milliseconds(0), std::function<void()> during = {}) {
    fake_.host("h1").When(kKeepLine, [this, after, during] {
      kept_at_ = loop_.Now();
      renewals_at_keep_ = Renewals("h2");
      if (during) At(after, during);
    });
  }
  // Lease renewals on `host` so far (RenewLeaseCommand's stamp; the arming
  // once, before any keep, has one too).
  int Renewals(const std::string& host) { return CountRe(host, R"(&& : > '?/tmp/barge-abcd1234\.[a-z0-9]+/lease)"); }
  const ssh::EventLoop::Clock::time_point loop_start_ = loop_.Now();
  std::optional<ssh::EventLoop::Clock::time_point> kept_at_;
  int renewals_at_keep_ = 0;
};

TEST_F(KeepTest, AFailedHeadKeepsEveryContainerWithItsLeasesRenewedUntilTheKeepEndsThenNothingIsLeft) {
  fake_.SetNode(0, FakeNode{milliseconds(300), 3});
  size_t kept_mid = 0, running_mid = 0;
  WatchTheKeep(seconds(119), [&] {
    for (const char* h : {"h1", "h2", "h3"}) {
      kept_mid += fake_.host(h).containers().size();
      running_mid += fake_.host(h).running().size();
    }
  });
  EXPECT_EQ(Run(Job("on_failure: {keep: 2m}\nlease: 20s\n")), 3) << rec_.AllMessages();
  ASSERT_TRUE(kept_at_.has_value()) << "no host was told of a keep\n" << rec_.AllMessages();
  EXPECT_GE(loop_.Now() - *kept_at_, seconds(120));
  EXPECT_LT(loop_.Now() - *kept_at_, seconds(150));
  // A second before its end: the stopped head and the two live workers.
  EXPECT_EQ(kept_mid, 3u);
  EXPECT_EQ(running_mid, 2u);
  // Renewed every 5 s (a quarter of the 20 s lease) all along.
  EXPECT_GE(Renewals("h2") - renewals_at_keep_, 22);
  // Each watchdog is told the keep's end as a duration: 2m plus its 15 s grace.
  for (const char* h : {"h1", "h2", "h3"}) EXPECT_EQ(CountRe(h, R"(\$\(date \+%s\) \+ 135\)\).*/keep\.next)"), 1) << h;
  EXPECT_TRUE(rec_.Said("keeping the job's 3 container(s) (2 still running) for 2m00s for a look (on_failure.keep): "
                        "barge logs abcd1234, barge attach abcd1234, barge exec abcd1234 --node RANK -- CMD; "
                        "barge down abcd1234 ends it now"))
      << rec_.AllMessages();
  EXPECT_TRUE(std::any_of(rec_.events.begin(), rec_.events.end(),
                          [](const std::string& e) { return e.rfind("kept: kept for a look for 2m00s", 0) == 0; }))
      << ::testing::PrintToString(rec_.events);
  EXPECT_TRUE(NothingLeft());
  EXPECT_EQ(StatusInStore(), JobStatus::kFailed);
}

TEST_F(KeepTest, BargeDownEndsTheKeepEarlyAndTheJobEndsFailedWithItsOwnCode) {
  fake_.SetNode(0, FakeNode{milliseconds(300), 3});
  WatchTheKeep(seconds(10), [this] { controller_->Interrupt(15); });
  EXPECT_EQ(Run(Job("on_failure: {keep: 30m}\n")), 3) << rec_.AllMessages();
  ASSERT_TRUE(kept_at_.has_value());
  EXPECT_LT(loop_.Now() - *kept_at_, seconds(30));
  EXPECT_TRUE(rec_.Said("the keep ended early: tearing the job down")) << rec_.AllMessages();
  EXPECT_EQ(Count("h2", "docker stop"), 1) << "not stopped gracefully";
  EXPECT_TRUE(NothingLeft());
  EXPECT_EQ(StatusInStore(), JobStatus::kFailed);
}

TEST_F(KeepTest, ASecondInterruptKillsInsteadOfStoppingAfterTheKeepEndedEarly) {
  fake_.SetNode(0, FakeNode{milliseconds(300), 3});
  fake_.host("h2").On("docker stop", FakeReply{0, "", "", milliseconds(0), /*hang=*/true});
  WatchTheKeep(seconds(5), [this] { controller_->Interrupt(2); });
  fake_.host("h2").When("docker stop", [this] { controller_->Interrupt(2); });
  EXPECT_EQ(Run(Job("on_failure: {keep: 30m}\n")), 3) << rec_.AllMessages();
  ASSERT_TRUE(kept_at_.has_value());
  EXPECT_LT(loop_.Now() - *kept_at_, seconds(30));
  EXPECT_TRUE(rec_.Said("interrupted again")) << rec_.AllMessages();
  EXPECT_TRUE(NothingLeft());
}

TEST_F(KeepTest, AFaultNotRestartedIsKeptWithTheLiveRanksStillRunning) {
  fake_.SetNode(2, FakeNode{milliseconds(300), 3});
  size_t running_mid = 0;
  WatchTheKeep(seconds(30), [&] { running_mid = fake_.host("h1").running().size() + fake_.host("h2").running().size(); });
  EXPECT_EQ(Run(Job("on_failure: {keep: 1m}\n")), 125) << rec_.AllMessages();
  EXPECT_TRUE(rec_.Said("node_failed: node 2 (worker) on h3 ended: exit code 3")) << rec_.AllMessages();
  ASSERT_TRUE(kept_at_.has_value());
  EXPECT_GE(loop_.Now() - *kept_at_, seconds(60));
  EXPECT_EQ(running_mid, 2u);
  EXPECT_TRUE(NothingLeft());
}

TEST_F(KeepTest, ALaunchThatFailedOnceAContainerWasMadeIsKept) {
  fake_.host("h3").On("docker run -d", FakeReply{125, "", "docker: no space left on device\n"});
  WatchTheKeep();
  EXPECT_EQ(Run(Job("on_failure: {keep: 1m}\n")), 125) << rec_.AllMessages();
  ASSERT_TRUE(kept_at_.has_value()) << rec_.AllMessages();
  EXPECT_GE(loop_.Now() - *kept_at_, seconds(60));
  EXPECT_TRUE(NothingLeft());
}

TEST_F(KeepTest, ASucceededJobIsNotKept) {
  fake_.SetNode(0, FakeNode{milliseconds(300), 0});
  WatchTheKeep();
  EXPECT_EQ(Run(Job("on_failure: {keep: 1h}\n")), 0);
  EXPECT_FALSE(kept_at_.has_value());
  EXPECT_FALSE(rec_.Said("keeping the job's")) << rec_.AllMessages();
  EXPECT_LT(loop_.Now() - loop_start_, seconds(60));
  EXPECT_TRUE(NothingLeft());
}

TEST_F(KeepTest, AnInterruptedJobIsNotKept) {
  WatchTheKeep();
  EXPECT_EQ(Run(Job("on_failure: {keep: 1h}\n"),
                [&](internal::Controller& c) { fake_.host("h2").When("docker logs", [&c] { c.Interrupt(2); }); }),
            130);
  EXPECT_FALSE(kept_at_.has_value());
  EXPECT_LT(loop_.Now() - loop_start_, seconds(60));
  EXPECT_TRUE(NothingLeft());
}

TEST_F(KeepTest, ATimedOutJobIsNotKept) {
  fake_.SetNode(0, FakeNode{seconds(30), 0});
  WatchTheKeep();
  EXPECT_EQ(Run(Job("on_failure: {keep: 1h}\ntimeout: 1s\n")), 124);
  EXPECT_FALSE(kept_at_.has_value());
  EXPECT_LT(loop_.Now() - loop_start_, seconds(60));
  EXPECT_TRUE(NothingLeft());
}

}  // namespace
}  // namespace barge::runner
