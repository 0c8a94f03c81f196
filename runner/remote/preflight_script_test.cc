// PreflightScript run by a real /bin/sh against a stand-in `docker` script
// (slow, failing or absent engines), and ParsePreflightReply.
#include "runner/remote/preflight_script.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace barge::runner {
namespace {

// A directory holding a `docker` script that behaves as `body` says, and a
// runner of a script under `sh` with that directory first on PATH.
class StandIn {
 public:
  explicit StandIn(const std::string& body) {
    char tmpl[] = "/tmp/barge-preflight-XXXXXX";
    dir_ = mkdtemp(tmpl);
    std::ofstream(dir_ + "/docker") << "#!/bin/sh\n" << body << "\n";
    chmod((dir_ + "/docker").c_str(), 0755);
  }
  ~StandIn() { std::system(("rm -rf " + dir_).c_str()); }
  std::string Run(const std::string& script) {
    std::ofstream(dir_ + "/script.sh") << script;
    std::string out;
    FILE* p = popen(("PATH=" + dir_ + ":$PATH sh " + dir_ + "/script.sh 2>&1").c_str(), "r");
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    pclose(p);
    return out;
  }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

PreflightChecks Checks(const std::string& dir) {
  PreflightChecks c;
  c.images = {"img:a", "img:b"};
  c.arm_watchdog = "echo armed > " + dir + "/armed";
  c.tcp_tables = true;
  c.engine_timeout = std::chrono::seconds(1);
  c.engine_misses = 2;
  return c;
}

TEST(PreflightScript, AHealthyHostAnswersEverySectionFromOneShellWithOneCallPerImage) {
  StandIn docker(R"sh(echo "$*" >> "$(dirname "$0")/calls"
case "$*" in "image inspect"*) echo "sha256:1111 $(dirname "$0")";; *) echo 24.0;; esac)sh");
  DockerCommands cmds({"docker"});
  const std::string script = PreflightScript(cmds, Checks(docker.dir()));
  PreflightReply r = ParsePreflightReply(docker.Run(script));
  EXPECT_TRUE(r.posix_shell) << r.first_line;
  ASSERT_NE(r.Find("watchdog"), nullptr);
  EXPECT_EQ(r.Find("watchdog")->exit, 0);
  ASSERT_NE(r.Find("image0"), nullptr);
  EXPECT_EQ(ImageIdOf(r.Find("image0")->text), "sha256:1111");
  ASSERT_NE(r.Find("image1"), nullptr);
  EXPECT_EQ(r.Find("image1")->exit, 0);
  EXPECT_EQ(r.Find("engine"), nullptr) << "the engine is asked only when an image check fails";
  ASSERT_NE(r.Find("disk"), nullptr);
  // df of /tmp and of the image's storage directory (the stand-in's dir).
  EXPECT_NE(r.Find("disk")->text.find("Filesystem"), std::string::npos) << r.Find("disk")->text;
  ASSERT_NE(r.Find("ports"), nullptr);
  EXPECT_NE(r.Find("ports")->text.find("local_address"), std::string::npos);
  std::ifstream calls(docker.dir() + "/calls");
  std::string all((std::istreambuf_iterator<char>(calls)), {});
  EXPECT_EQ(std::count(all.begin(), all.end(), '\n'), 2) << all;
  EXPECT_TRUE(std::ifstream(docker.dir() + "/armed").good());
}

TEST(PreflightScript, TheHostPartRunsNoDockerCallAndTheEnginePartOnlyTheHoldImagesAndStorageDisk) {
  StandIn docker(R"sh(echo "$*" >> "$(dirname "$0")/calls"
case "$*" in "image inspect"*) echo "sha256:1111 $(dirname "$0")";; *) echo 24.0;; esac)sh");
  DockerCommands cmds({"docker"});
  PreflightChecks c = Checks(docker.dir());
  c.hold = "echo held";
  c.engine_socket = true;
  c.part = PreflightPart::kHost;
  PreflightReply host = ParsePreflightReply(docker.Run(PreflightScript(cmds, c)));
  EXPECT_TRUE(host.posix_shell);
  ASSERT_NE(host.Find("watchdog"), nullptr);
  EXPECT_EQ(host.Find("watchdog")->exit, 0);
  EXPECT_NE(host.Find("ports"), nullptr);
  ASSERT_NE(host.Find("socket"), nullptr);
  EXPECT_EQ(host.Find("hold"), nullptr);
  EXPECT_EQ(host.Find("image0"), nullptr);
  EXPECT_EQ(host.Find("engine"), nullptr);
  ASSERT_NE(host.Find("disk"), nullptr);
  // /tmp alone: a header and one line.
  const std::string& hd = host.Find("disk")->text;
  EXPECT_EQ(std::count(hd.begin(), hd.end(), '\n'), 1) << hd;
  EXPECT_FALSE(std::ifstream(docker.dir() + "/calls").good()) << "the host part called docker";

  c.part = PreflightPart::kEngine;
  std::remove((docker.dir() + "/armed").c_str());
  PreflightReply engine = ParsePreflightReply(docker.Run(PreflightScript(cmds, c)));
  EXPECT_TRUE(engine.posix_shell);
  EXPECT_EQ(engine.Find("watchdog"), nullptr);
  EXPECT_FALSE(std::ifstream(docker.dir() + "/armed").good()) << "the engine part armed the watchdog again";
  EXPECT_EQ(engine.Find("ports"), nullptr);
  EXPECT_EQ(engine.Find("socket"), nullptr);
  ASSERT_NE(engine.Find("hold"), nullptr);
  EXPECT_EQ(engine.Find("hold")->text, "held");
  ASSERT_NE(engine.Find("image1"), nullptr);
  EXPECT_EQ(ImageIdOf(engine.Find("image0")->text), "sha256:1111");
  ASSERT_NE(engine.Find("disk"), nullptr);
  // The first image's storage directory alone (the stand-in's directory).
  const std::string& ed = engine.Find("disk")->text;
  EXPECT_EQ(std::count(ed.begin(), ed.end(), '\n'), 1) << ed;
  std::ifstream calls(docker.dir() + "/calls");
  std::string all((std::istreambuf_iterator<char>(calls)), {});
  EXPECT_EQ(std::count(all.begin(), all.end(), '\n'), 2) << all;
}

TEST(PreflightScript, AMissingImageAsksTheEngineOnceAndSaysWhatTheInspectSaid) {
  StandIn docker(R"sh(case "$*" in "image inspect"*img:b*) echo "Error: No such image: img:b" >&2; exit 1;;
"image inspect"*) echo "sha256:1111 <no value>";; *) echo 24.0;; esac)sh");
  PreflightReply r = ParsePreflightReply(docker.Run(PreflightScript(DockerCommands({"docker"}), Checks(docker.dir()))));
  ASSERT_NE(r.Find("image1"), nullptr);
  EXPECT_EQ(r.Find("image1")->exit, 1);
  EXPECT_FALSE(r.Find("image1")->timed_out());
  EXPECT_NE(r.Find("image1")->text.find("No such image: img:b"), std::string::npos);
  ASSERT_NE(r.Find("engine"), nullptr);
  EXPECT_EQ(r.Find("engine")->exit, 0);
  EXPECT_EQ(r.Find("engine")->text, "24.0");
}

TEST(PreflightScript, AnEngineSlowerThanTheTimeoutOnEveryTryIsReportedAsTimedOutAfterTwoTriesOfOneSecond) {
  StandIn docker(R"sh(echo x >> "$(dirname "$0")/tries"; sleep 5; echo never)sh");
  const auto t0 = std::chrono::steady_clock::now();
  PreflightReply r = ParsePreflightReply(docker.Run(PreflightScript(DockerCommands({"docker"}), Checks(docker.dir()))));
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_NE(r.Find("image0"), nullptr);
  EXPECT_TRUE(r.Find("image0")->timed_out()) << r.Find("image0")->exit;
  ASSERT_NE(r.Find("engine"), nullptr);
  EXPECT_TRUE(r.Find("engine")->timed_out());
  std::ifstream tries(docker.dir() + "/tries");
  std::string all((std::istreambuf_iterator<char>(tries)), {});
  // Two images and the engine, two tries each, none of them waited out.
  EXPECT_EQ(std::count(all.begin(), all.end(), '\n'), 6);
  EXPECT_LT(took, 5.0 * 6);
}

TEST(PreflightScript, AnEngineSlowOnlyOnTheFirstTryAnswersOnTheSecond) {
  StandIn docker(R"sh(f="$(dirname "$0")/slow"; if [ ! -e "$f" ]; then : > "$f"; sleep 5; fi
echo "sha256:2222 <no value>")sh");
  PreflightChecks c = Checks(docker.dir());
  c.images = {"img:a"};
  PreflightReply r = ParsePreflightReply(docker.Run(PreflightScript(DockerCommands({"docker"}), c)));
  ASSERT_NE(r.Find("image0"), nullptr);
  EXPECT_EQ(r.Find("image0")->exit, 0);
  EXPECT_EQ(ImageIdOf(r.Find("image0")->text), "sha256:2222");
}

TEST(PreflightReply, ANonPosixFirstLineAndACutOffSectionAreToldApart) {
  PreflightReply r = ParsePreflightReply("Illegal variable name.\n@@barge{ watchdog\nok\n\n@@barge} watchdog 0\n@@barge{ image0\nsha");
  EXPECT_FALSE(r.posix_shell);
  EXPECT_EQ(r.first_line, "Illegal variable name.");
  ASSERT_NE(r.Find("watchdog"), nullptr);
  EXPECT_EQ(r.Find("watchdog")->text, "ok");
  EXPECT_EQ(r.Find("image0"), nullptr);
}

}  // namespace
}  // namespace barge::runner

namespace barge::runner {
namespace {

// The "socket" section, run by sh with the environment a login gives.
std::optional<std::string> SocketWith(const std::string& env) {
  StandIn docker("echo 24.0");
  PreflightChecks c = Checks(docker.dir());
  c.engine_socket = true;
  const std::string script = "export HOME=" + docker.dir() + "; " + env + "\n" + PreflightScript(DockerCommands({"docker"}), c);
  PreflightReply r = ParsePreflightReply(docker.Run(script));
  const PreflightSection* s = r.Find("socket");
  EXPECT_NE(s, nullptr);
  return s ? EngineSocketOf(s->text) : std::nullopt;
}

TEST(PreflightScript, TheEngineSocketIsDockerHostsUnixPathOrTheDefaultAndNoneForAContextOrTcp) {
  EXPECT_EQ(SocketWith("unset DOCKER_HOST DOCKER_CONTEXT"), "/var/run/docker.sock");
  EXPECT_EQ(SocketWith("export DOCKER_HOST=unix:///run/x/docker.sock"), "/run/x/docker.sock");
  EXPECT_EQ(SocketWith("export DOCKER_HOST=tcp://10.0.0.1:2375"), std::nullopt);
  EXPECT_EQ(SocketWith("unset DOCKER_HOST; export DOCKER_CONTEXT=remote"), std::nullopt);
  EXPECT_EQ(SocketWith("unset DOCKER_HOST DOCKER_CONTEXT; mkdir -p $HOME/.docker; "
                       "echo '{\"currentContext\": \"remote\"}' > $HOME/.docker/config.json"),
            std::nullopt);
  EXPECT_FALSE(DockerCommands({"sudo", "docker"}).plain());
  EXPECT_TRUE(DockerCommands({"docker"}).plain());
}

}  // namespace
}  // namespace barge::runner
