// runner/store/host_faults.h: which hosts a job's records blame.
#include "runner/store/host_faults.h"

#include <gtest/gtest.h>

#include <set>

namespace barge::runner {
namespace {

TEST(HostCausedFailures, LostAndPreemptedHostsAndTheHostsOwnPreflightProblemsNotTheJobs) {
  std::vector<EventRecord> events(3);
  events[0].kind = event::kHostLost;
  events[0].host = "10.0.0.1";
  events[0].detail = "10.0.0.1 is lost: the Docker engine did not answer";
  events[1].kind = event::kNodeFailed;  // the job's own failure
  events[1].host = "10.0.0.2";
  events[2].kind = event::kPreempted;
  events[2].host = "10.0.0.3";
  std::vector<PhaseRecord> phases(5);
  phases[4].host = "10.0.0.8";
  phases[4].phase = "preflight";
  phases[4].outcome = "cannot reserve the host (a hold container on its engine): error: listing holds:";
  phases[0].host = "10.0.0.4";
  phases[0].phase = "preflight";
  phases[0].outcome = "docker is not reachable: Cannot connect to the Docker daemon";
  phases[1].host = "10.0.0.5";
  phases[1].phase = "preflight";
  phases[1].outcome = "image img:1 is missing and cannot be pulled: not found";
  phases[2].host = "10.0.0.6";
  phases[2].phase = "connect";
  phases[2].outcome = "connection refused";
  phases[3].host = "10.0.0.7";
  phases[3].phase = "running";
  phases[3].outcome = "exit code 1";
  const auto caused = HostCausedFailures(events, phases);
  std::set<std::string> hosts;
  for (const auto& [h, why] : caused) hosts.insert(h);
  EXPECT_EQ(hosts, (std::set<std::string>{"10.0.0.1", "10.0.0.3", "10.0.0.4", "10.0.0.6", "10.0.0.8"}));
  EXPECT_EQ(caused.at("10.0.0.1"), "host_lost: 10.0.0.1 is lost: the Docker engine did not answer");
}

TEST(HostCausedFailures, AHostTheGpuHealthGatePutOutIsTheHostsButAGpuTakenOutIsNot) {
  std::vector<EventRecord> events(2);
  events[0].kind = event::kGpuUnhealthy;
  events[0].host = "10.0.0.1";
  events[0].detail = "the host is out";
  events[1].kind = event::kGpuUnhealthy;
  events[1].host = "10.0.0.2";
  events[1].detail = "GPU(s) 0 taken out: pages pending retirement (reset the GPU)";
  const auto caused = HostCausedFailures(events, {});
  ASSERT_EQ(caused.size(), 1u);
  EXPECT_EQ(caused.at("10.0.0.1"), "gpu_unhealthy: the host is out");
}

TEST(UnavailableHosts, OnlyHostsTheGpuHealthGatePutOut) {
  std::vector<EventRecord> events(3);
  events[0].kind = event::kGpuUnhealthy;
  events[0].host = "10.0.0.1";
  events[0].detail = "the host is out";
  events[1].kind = event::kGpuUnhealthy;
  events[1].host = "10.0.0.2";
  events[1].detail = "GPU(s) 0 taken out: pages pending retirement (reset the GPU)";
  events[2].kind = event::kHostLost;
  events[2].host = "10.0.0.3";
  events[2].detail = "link down";
  EXPECT_EQ(UnavailableHosts(events), (std::set<std::string>{"10.0.0.1"}));
}

}  // namespace
}  // namespace barge::runner
