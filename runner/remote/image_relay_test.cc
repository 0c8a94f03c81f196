// Tests of the image relay's host side: the tree, the exact lines, and the
// scripts run here with /bin/sh (a fake `docker` and a fake `ssh` on PATH:
// the scripts themselves are real).
#include "runner/remote/image_relay.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "ssh/quote.h"

namespace barge::runner {
namespace {

namespace fs = std::filesystem;

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void WriteAll(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

int Sh(const std::string& line) { return WEXITSTATUS(std::system(("sh -c " + ssh::ShellQuote(line)).c_str())); }

TEST(RelayChildren, IsAHeapOrderedTreeWithTheGivenFanOut) {
  EXPECT_EQ(RelayChildren(1, 2), std::vector<std::vector<size_t>>(1));
  EXPECT_EQ(RelayChildren(6, 2), (std::vector<std::vector<size_t>>{{1, 2}, {3, 4}, {5}, {}, {}, {}}));
  EXPECT_EQ(RelayChildren(4, 1), (std::vector<std::vector<size_t>>{{1}, {2}, {3}, {}}));  // a chain
  // 16 hosts, fan-out 2: every host but the root has one parent; depth 4.
  std::vector<std::vector<size_t>> tree = RelayChildren(16, kRelayFanOut);
  std::vector<int> parents(16, 0);
  for (const auto& kids : tree) {
    EXPECT_LE(kids.size(), kRelayFanOut);
    for (size_t k : kids) ++parents[k];
  }
  EXPECT_EQ(parents[0], 0);
  for (size_t i = 1; i < 16; ++i) EXPECT_EQ(parents[i], 1) << i;
  EXPECT_EQ(tree[7], (std::vector<size_t>{15}));
}

TEST(RelayLines, TheAuthorizedKeyOnlyRunsTheRelayScriptFromTheSendersAddress) {
  EXPECT_EQ(RelayAuthorizedKey("/tmp/barge-j1.abcdefghijkl", "10.77.0.2", "ssh-ed25519 AAAAkey"),
            "restrict,from=\"10.77.0.2\",command=\"sh /tmp/barge-j1.abcdefghijkl/relay/run\" ssh-ed25519 AAAAkey "
            "barge-relay:/tmp/barge-j1.abcdefghijkl\n");
  EXPECT_EQ(RelayRunCommand("/tmp/barge-j1.abcdefghijkl"), "sh /tmp/barge-j1.abcdefghijkl/relay/run");
}

TEST(RelayLines, KnownHostsNameEachChildByItsAliasWithTheKeyTheControllerVerified) {
  RelayPeer a{.index = 3, .address = "10.0.0.4", .port = 22, .user = "root", .host_key = "ssh-ed25519 AAAA3"};
  RelayPeer b{.index = 4, .address = "10.0.0.5", .port = 2222, .user = "u", .host_key = "ecdsa-sha2-nistp256 BBBB"};
  EXPECT_EQ(RelayKnownHosts({a, b}), "barge-relay-3 ssh-ed25519 AAAA3\nbarge-relay-4 ecdsa-sha2-nistp256 BBBB\n");
}

TEST(RelayLines, ALeafOnlyLoadsAndASenderChecksHostKeysStrictlyWithItsOwnKeyOnly) {
  const DockerCommands docker({"docker"});
  const std::string dir = "/tmp/barge-j1.abcdefghijkl";
  const std::string leaf = RelayScript(dir, docker, {});
  EXPECT_NE(leaf.find("|| exit 125\nexec docker load\n"), std::string::npos) << leaf;
  RelayPeer child{.index = 5, .address = "10.77.0.7", .port = 22, .user = "root", .host_key = "ssh-ed25519 K"};
  const std::string sender = RelayScript(dir, docker, {child});
  EXPECT_NE(sender.find("{ ssh -T -F /dev/null -i /tmp/barge-j1.abcdefghijkl/relay/key -o IdentitiesOnly=yes "
                        "-o BatchMode=yes -o StrictHostKeyChecking=yes "
                        "-o UserKnownHostsFile=/tmp/barge-j1.abcdefghijkl/relay/known_hosts "
                        "-o GlobalKnownHostsFile=/dev/null -o HostKeyAlias=barge-relay-5 -o CheckHostIP=no "
                        "-o UpdateHostKeys=no -o ConnectTimeout=10 -o ServerAliveInterval=5 "
                        "-o ServerAliveCountMax=6 -o LogLevel=ERROR -p 22 -l root 10.77.0.7 >/dev/null "
                        "2>/tmp/barge-j1.abcdefghijkl/relay/err-5; echo $? >/tmp/barge-j1.abcdefghijkl/relay/rc-5; "
                        "until cat >/dev/null 2>&1; do sleep 0.1 2>/dev/null || sleep 1; done; } </tmp/barge-j1.abcdefghijkl/relay/to-5 &\n"),
            std::string::npos)
      << sender;
  EXPECT_NE(sender.find("tee /tmp/barge-j1.abcdefghijkl/relay/to-5 | docker load\n"), std::string::npos) << sender;
  EXPECT_EQ(sender.find("StrictHostKeyChecking=no"), std::string::npos);
}

TEST(RelayFailures, AreReadByHostIndexFromTheRootsStderr) {
  const std::string err =
      "some docker warning\n"
      "barge-relay-failed 4 255: ssh: connect to host 10.77.0.6 port 22: Connection refused\r\n"
      "barge-relay-failed 7 1: \n"
      "barge-relay-failed 4 1: later line for the same host\n"
      "barge-relay-failed x 1: not a host\n"
      "barge-relay-failed 9";
  std::map<size_t, std::string> f = ParseRelayFailures(err);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[4], "ssh: connect to host 10.77.0.6 port 22: Connection refused (exit 255)");
  EXPECT_EQ(f[7], "exit 1");
}

// A job directory (0700), a HOME, and a PATH with a fake docker (`docker
// load` copies stdin to HOME/loaded) and a fake ssh (copies stdin to
// HOME/got-ADDRESS, or fails like OpenSSH for the address "refused").
class RelayOnThisMachine : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("barge-relay-test-" + std::to_string(getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "home");
    fs::create_directories(root_ / "bin");
    job_dir_ = (root_ / "job").string();
    fs::create_directory(job_dir_);
    ::chmod(job_dir_.c_str(), 0700);
    WriteAll(root_ / "bin" / "docker", "#!/bin/sh\n[ \"$1\" = load ] || exit 2\ncat > \"$HOME/loaded\"\n");
    WriteAll(root_ / "bin" / "ssh",
             "#!/bin/sh\nfor a; do last=$a; done\n"
             "if [ \"$last\" = refused ]; then echo \"ssh: connect to host refused port 22: Connection refused\" >&2; "
             "exit 255; fi\ncat > \"$HOME/got-$last\"\n");
    ::chmod((root_ / "bin" / "docker").c_str(), 0755);
    ::chmod((root_ / "bin" / "ssh").c_str(), 0755);
    // Exported for the whole line (pipelines and subshells included): no
    // command here may touch the real HOME.
    env_ = "export HOME=" + ssh::ShellQuote((root_ / "home").string()) + " PATH=" +
           ssh::ShellQuote((root_ / "bin").string()) + ":/usr/bin:/bin; ";
  }
  void TearDown() override { fs::remove_all(root_); }

  fs::path root_;
  std::string job_dir_;
  std::string env_;
};

TEST_F(RelayOnThisMachine, AHostLoadsTheImageAndPassesEveryByteOnAlthoughOneChildIsUnreachable) {
  const DockerCommands docker({"docker"});
  RelayPeer good{.index = 1, .address = "good", .port = 22, .user = "root", .host_key = "ssh-ed25519 K"};
  RelayPeer bad{.index = 2, .address = "refused", .port = 22, .user = "root", .host_key = "ssh-ed25519 K"};
  fs::create_directories(RelayDir(job_dir_));
  WriteAll(RelayScriptFile(job_dir_), RelayScript(job_dir_, docker, {bad, good}));
  std::string image(3 << 20, '\0');
  for (size_t i = 0; i < image.size(); ++i) image[i] = static_cast<char>((i * 7919) >> 3);
  WriteAll(root_ / "image.tar", image);
  const std::string err = (root_ / "err").string();
  EXPECT_EQ(Sh(env_ + RelayRunCommand(job_dir_) + " <" + ssh::ShellQuote((root_ / "image.tar").string()) + " 2>" +
               ssh::ShellQuote(err)),
            0);
  EXPECT_EQ(ReadAll(root_ / "home" / "loaded"), image);
  EXPECT_EQ(ReadAll(root_ / "home" / "got-good"), image);
  std::map<size_t, std::string> f = ParseRelayFailures(ReadAll(err));
  ASSERT_EQ(f.size(), 1u) << ReadAll(err);
  EXPECT_EQ(f[2], "ssh: connect to host refused port 22: Connection refused (exit 255)");
}

TEST_F(RelayOnThisMachine, AuthorizingAndCleaningUpLeaveAuthorizedKeysAsTheyWere) {
  const fs::path ssh_dir = root_ / "home" / ".ssh";
  const fs::path keys = ssh_dir / "authorized_keys";
  const std::string line = RelayAuthorizedKey(job_dir_, "10.0.0.1", "ssh-ed25519 AAAAtest");
  auto authorize = [&] {
    return Sh(env_ + "printf %s " + ssh::ShellQuote(line) + " | { " + RelayAuthorizeCommand(job_dir_) + "; }");
  };
  auto clean = [&] { return Sh(env_ + RelayCleanupCommand(job_dir_)); };
  // No ~/.ssh at all: made for the relay, gone after.
  ASSERT_EQ(authorize(), 0);
  EXPECT_EQ(ReadAll(keys), line);
  EXPECT_EQ(fs::status(ssh_dir).permissions() & fs::perms::all, fs::perms::owner_all);
  EXPECT_EQ(clean(), 0);
  EXPECT_FALSE(fs::exists(ssh_dir));
  EXPECT_FALSE(fs::exists(RelayDir(job_dir_)));
  // A file without a final newline, and another job's line: byte for byte.
  fs::create_directories(ssh_dir);
  const std::string before = "ssh-ed25519 AAAAmine me@here\nssh-ed25519 AAAAother barge-relay:/tmp/other";
  WriteAll(keys, before);
  ::chmod(keys.c_str(), 0640);
  ASSERT_EQ(authorize(), 0);
  EXPECT_EQ(ReadAll(keys), before + "\n" + line);
  EXPECT_EQ(clean(), 0);
  EXPECT_EQ(ReadAll(keys), before);
  EXPECT_EQ(fs::status(keys).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  EXPECT_TRUE(fs::exists(ssh_dir));
}

TEST_F(RelayOnThisMachine, NothingIsAuthorizedOutsideTheJobsOwnDirectory) {
  ::chmod(job_dir_.c_str(), 0755);  // not the mode barge makes it with
  EXPECT_NE(Sh(env_ + "echo line | { " + RelayAuthorizeCommand(job_dir_) + "; } 2>/dev/null"), 0);
  EXPECT_FALSE(fs::exists(root_ / "home" / ".ssh"));
}

}  // namespace
}  // namespace barge::runner
