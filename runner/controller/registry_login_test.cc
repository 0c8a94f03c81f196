// RegistryLogin on its own (registry_login.h): given the job's context, its
// hosts and the plan, on scripted fake hosts (tests/support/part_world.h).
#include "runner/controller/registry_login.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "runner/controller/job_state.h"
#include "runner/remote/docker_commands.h"
#include "tests/support/part_world.h"
#include "tests/support/scoped_env.h"

namespace barge::runner {
namespace registry_login_test {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr char kPassword[] = "hunter2-registry-pw";
constexpr char kRegistry[] =
    "registry: {server: registry.example.com:5000, username: ci, password: {env: BARGE_PART_TEST_REGISTRY_PW}}\n";

struct LoginWorld {
  // With a registry (the password from the environment) unless `registry`
  // is false.
  explicit LoginWorld(bool registry = true)
      : env("BARGE_PART_TEST_REGISTRY_PW", std::string(kPassword)),
        world(PartWorld::Yaml(registry ? kRegistry : "")),
        login(&world.ctx(), &world.hosts(), &world.plan()) {}
  barge::testing::ScopedEnv env;  // read when the job file is parsed
  PartWorld world;
  internal::RegistryLogin login;
};

// Lines of `host` containing `part`.
int Count(PartWorld& world, const std::string& host, const std::string& part) {
  const auto& lines = world.host(host).lines();
  return static_cast<int>(std::count_if(lines.begin(), lines.end(), [&](const std::string& l) {
    return l.find(part) != std::string::npos;
  }));
}

bool HasEdge(PartWorld& world, const std::string& edge) {
  const auto& edges = world.recorder().edges;
  return std::find(edges.begin(), edges.end(), edge) != edges.end();
}

TEST(RegistryLogin, EveryConnectedHostLogsInToTheJobsOwnClientConfigWithThePasswordNeverOnTheLine) {
  LoginWorld w;
  ASSERT_TRUE(w.world.Connect());
  Status s = w.login.Login(w.world.hosts().All());
  ASSERT_TRUE(s.ok()) << s.message();
  for (size_t h = 0; h < 2; ++h) {
    internal::HostState& hs = w.world.host_state(h);
    const std::string& address = hs.name;
    ASSERT_EQ(w.world.host(address).lines().size(), 1u) << address;
    const std::string& line = w.world.host(address).lines()[0];
    EXPECT_NE(line.find("login --username=ci --password-stdin registry.example.com:5000"), std::string::npos)
        << line;
    EXPECT_NE(line.find(DockerConfigDir(hs.job_dir)), std::string::npos) << line;
    EXPECT_EQ(line.rfind("timeout -s KILL 120 ", 0), 0u) << line;
    EXPECT_EQ(line.find(kPassword), std::string::npos) << line;
    EXPECT_TRUE(hs.login.tried);
    // Every later docker command of the job there uses that config.
    const std::string later = hs.docker->Line({"ps"});
    EXPECT_NE(later.find("--config " + DockerConfigDir(hs.job_dir)), std::string::npos) << later;
    EXPECT_TRUE(HasEdge(w.world, "login began " + address));
    EXPECT_TRUE(HasEdge(w.world, "login ok " + address));
  }
  EXPECT_TRUE(w.world.recorder().Said("logged in to registry.example.com:5000 as ci on 2 host(s)"))
      << w.world.recorder().AllMessages();
}

TEST(RegistryLogin, AFailedLoginNamesTheHostAndTheRegistrysReason) {
  LoginWorld w;
  ASSERT_TRUE(w.world.Connect());
  w.world.host("h2").On("login", FakeReply{1, "", "Error response from daemon: unauthorized: bad credentials\n"});
  Status s = w.login.Login(w.world.hosts().All());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "registry login to registry.example.com:5000 as ci failed; nothing was started:\n"
            "  h2: Error response from daemon: unauthorized: bad credentials");
  EXPECT_TRUE(HasEdge(w.world, "login ok h1"));
  EXPECT_TRUE(HasEdge(w.world, "login failed h2: Error response from daemon: unauthorized: bad credentials"));
  EXPECT_FALSE(w.world.recorder().Said("logged in to")) << w.world.recorder().AllMessages();
  // A login was tried there: its config may hold the credential until Logout.
  EXPECT_TRUE(w.world.host_state(1).login.tried);
}

TEST(RegistryLogin, ALoginThatHangsFailsOnceItsBoundKillsIt) {
  LoginWorld w;
  ASSERT_TRUE(w.world.Connect());
  w.world.host("h1").On("login", FakeReply{.hang = true});
  const auto began = w.world.loop().Now();
  Status s = w.login.Login(w.world.hosts().All());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("\n  h1: docker login did not finish within 120 s"), std::string::npos)
      << s.message();
  EXPECT_EQ(s.message().find("h2:"), std::string::npos) << s.message();
  EXPECT_GE(w.world.loop().Now() - began, seconds(120));
  EXPECT_LT(w.world.loop().Now() - began, seconds(131));
}

TEST(RegistryLogin, AnInterruptEndsTheLoginWithoutWaitingForTheHosts) {
  LoginWorld w;
  ASSERT_TRUE(w.world.Connect());
  w.world.host("h1").On("login", FakeReply{.hang = true});
  w.world.host("h1").When("login", [&] { w.world.ctx().interrupts = 1; });
  const auto began = w.world.loop().Now();
  Status s = w.login.Login(w.world.hosts().All());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "interrupted while logging in to registry.example.com:5000");
  EXPECT_LT(w.world.loop().Now() - began, seconds(5));
}

TEST(RegistryLogin, WithoutARegistryOrAConnectedHostNothingIsSent) {
  LoginWorld none(false);
  ASSERT_TRUE(none.world.Connect());
  EXPECT_TRUE(none.login.Login(none.world.hosts().All()).ok());
  none.login.Logout();
  EXPECT_TRUE(none.world.fake().all_lines().empty());
  EXPECT_FALSE(none.world.host_state(0).login.tried);

  // h2 could not be reached: preflight reports it; no login is tried there.
  LoginWorld w;
  w.world.host("h2").RefuseConnect("connection refused");
  ASSERT_FALSE(w.world.Connect());
  EXPECT_TRUE(w.login.Login(w.world.hosts().All()).ok());
  EXPECT_EQ(Count(w.world, "h1", "login"), 1);
  EXPECT_FALSE(w.world.host_state(1).login.tried);
  EXPECT_TRUE(w.world.recorder().Said("on 1 host(s)")) << w.world.recorder().AllMessages();
}

TEST(RegistryLogin, LogoutRunsWhereALoginWasTriedOnHostsNotLostAndRemovesTheConfig) {
  LoginWorld w;
  ASSERT_TRUE(w.world.Connect());
  w.world.host("h2").On("login", FakeReply{1, "", "unauthorized\n"});
  ASSERT_FALSE(w.login.Login(w.world.hosts().All()).ok());
  w.world.host_state(1).lost = true;
  w.login.Logout();
  internal::HostState& h1 = w.world.host_state(0);
  ASSERT_EQ(Count(w.world, "h1", "logout"), 1);
  const std::string& line = w.world.host("h1").lines().back();
  EXPECT_NE(line.find("logout registry.example.com:5000"), std::string::npos) << line;
  EXPECT_NE(line.find("rm -rf"), std::string::npos) << line;
  EXPECT_NE(line.find(DockerConfigDir(h1.job_dir)), std::string::npos) << line;
  EXPECT_FALSE(h1.login.tried);
  EXPECT_EQ(Count(w.world, "h2", "logout"), 0);  // lost: its watchdog removes the directory
  EXPECT_TRUE(w.world.host_state(1).login.tried);
}

TEST(RegistryLogin, AFailedOrHangingLogoutIsSaidAndDoesNotHoldTheJob) {
  LoginWorld w;
  ASSERT_TRUE(w.world.Connect());
  ASSERT_TRUE(w.login.Login(w.world.hosts().All()).ok());
  w.world.host("h1").On("logout", FakeReply{1, "", "Error: cannot reach registry\n"});
  w.world.host("h2").On("logout", FakeReply{.hang = true});
  const auto began = w.world.loop().Now();
  w.login.Logout();
  EXPECT_TRUE(w.world.recorder().Said("h1: docker logout failed: Error: cannot reach registry"))
      << w.world.recorder().AllMessages();
  // h2's is bounded at 30 s (it is killed: a failure too).
  EXPECT_LT(w.world.loop().Now() - began, seconds(41));
  EXPECT_EQ(Count(w.world, "h2", "timeout -s KILL 30 "), 1);
  EXPECT_TRUE(w.world.recorder().Said("h2: docker logout failed")) << w.world.recorder().AllMessages();
}

}  // namespace registry_login_test
}  // namespace barge::runner
