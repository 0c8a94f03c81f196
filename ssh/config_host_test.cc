#include "ssh/config_host.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "base/user_home.h"

namespace barge::ssh {
namespace {

namespace fs = std::filesystem;

class ConfigHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/barge-confighost-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    fs::create_directories(dir_ / "config.d");
    std::ofstream(dir_ / "config") << "IgnoreUnknown UseKeychain\nUseKeychain yes\n"
                                   << "Include " << (dir_ / "config.d").string() << "/*.conf\n"
                                   << "Host *\n  ControlMaster auto\n  HashKnownHosts yes\n";
    std::ofstream(dir_ / "config.d" / "lab.conf")
        << "Host gpu-1\n  HostName 10.1.2.3\n  User ubuntu\n"
        << "Host gpu-2\n  HostName 10.1.2.4\n  ProxyJump gpu-1\n";
  }
  void TearDown() override {
    UserHomeForTesting().clear();
    fs::remove_all(dir_);
  }
  fs::path dir_;
};

TEST_F(ConfigHostTest, AnAliasInAnIncludedFileHasItsHostNameAndJumpHost) {
  SessionOptions o;
  o.config_file = (dir_ / "config").string();
  o.host = "gpu-1";
  auto found = LookUpConfigHost(o);
  ASSERT_TRUE(found.ok()) << found.status().message();
  EXPECT_EQ(found->config_file, o.config_file);
  EXPECT_EQ(found->host_name, "10.1.2.3");
  EXPECT_TRUE(found->jump_hops.empty());
  EXPECT_FALSE(found->proxy_command);

  o.host = "gpu-2";
  found = LookUpConfigHost(o);
  ASSERT_TRUE(found.ok()) << found.status().message();
  EXPECT_EQ(found->host_name, "10.1.2.4");
  EXPECT_EQ(found->jump_hops, std::vector<std::string>{"gpu-1"});

  o.host = "other";
  found = LookUpConfigHost(o);
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->host_name, "other");
}

TEST_F(ConfigHostTest, AMissingConfigFileIsNamed) {
  SessionOptions o;
  o.host = "gpu-1";
  o.config_file = (dir_ / "nope").string();
  auto found = LookUpConfigHost(o);
  ASSERT_FALSE(found.ok());
  EXPECT_EQ(found.status().message(), "gpu-1: ssh config file " + o.config_file + " does not exist");
}

TEST_F(ConfigHostTest, TheDefaultConfigIsInThePasswdHomeNeverInHome) {
  // A HOME holding a config: not read (OpenSSH's rule, base/user_home.h).
  fs::create_directories(dir_ / "home" / ".ssh");
  std::ofstream(dir_ / "home" / ".ssh" / "config") << "Host gpu-1\n  HostName 10.9.9.9\n";
  const char* old = getenv("HOME");
  const std::string saved = old ? old : "";
  setenv("HOME", (dir_ / "home").c_str(), 1);
  UserHomeForTesting() = (dir_ / "passwd-home").string();
  SessionOptions o;
  o.host = "gpu-1";
  EXPECT_EQ(ConfigFileFor(o), "");  // the passwd home has no .ssh/config
  fs::create_directories(dir_ / "passwd-home" / ".ssh");
  fs::copy_file(dir_ / "config", dir_ / "passwd-home" / ".ssh" / "config");
  EXPECT_EQ(ConfigFileFor(o), (dir_ / "passwd-home" / ".ssh" / "config").string());
  auto found = LookUpConfigHost(o);
  ASSERT_TRUE(found.ok()) << found.status().message();
  EXPECT_EQ(found->host_name, "10.1.2.3");
  if (old) {
    setenv("HOME", saved.c_str(), 1);
  } else {
    unsetenv("HOME");
  }
}

TEST(OpenSshConfig, SshDashGOutputIsReadAsKeywordsWithTheirValuesInOrder) {
  OpenSshConfig g = ParseOpenSshConfig(
      "user root\nhostname 10.77.0.4\nport 2022\nidentityfile ~/.ssh/lab\n"
      "identityfile /keys/other\nuserknownhostsfile /kh ~/.ssh/known_hosts2\n"
      "proxyjump gpu-1,alice@bastion:2200\n");
  EXPECT_EQ(g["hostname"], std::vector<std::string>{"10.77.0.4"});
  EXPECT_EQ(g["identityfile"], (std::vector<std::string>{"~/.ssh/lab", "/keys/other"}));
  EXPECT_EQ(g["userknownhostsfile"], std::vector<std::string>{"/kh ~/.ssh/known_hosts2"});
  ConfigHost host;
  host.host_name = "gpu-3";
  host.proxy_command = true;
  ApplyOpenSshConfig(g, &host);
  EXPECT_EQ(host.host_name, "10.77.0.4");
  EXPECT_EQ(host.jump_hops, (std::vector<std::string>{"gpu-1", "alice@bastion:2200"}));
  EXPECT_FALSE(host.proxy_command);
  ApplyOpenSshConfig(ParseOpenSshConfig("hostname 10.0.0.1\nproxycommand nc %h %p\n"), &host);
  EXPECT_TRUE(host.jump_hops.empty());
  EXPECT_TRUE(host.proxy_command);
}

}  // namespace
}  // namespace barge::ssh
