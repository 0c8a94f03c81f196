#include "ssh/jump_tunnel.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <libssh/libssh.h>

#include "ssh/known_hosts.h"
#include "tests/support/ssh_test_util.h"

namespace barge::ssh {
namespace {

using testing::Exists;
using testing::ReadFile;
using testing::TempDir;
using testing::WriteFile;
using Hops = std::vector<std::string>;

// --- ProxyJumpHops ---------------------------------------------------------
// The commands below are what libssh 0.10.6 makes of "ProxyJump LIST".

TEST(ProxyJumpHops, RecoversOneHop) {
  EXPECT_EQ(ProxyJumpHops("ssh -W '[%h]:%p' h2jump"), Hops{"h2jump"});
}

TEST(ProxyJumpHops, PutsTheFirstHopFirstAndTheDashJListAfterIt) {
  // "ProxyJump h1jump,h2jump"
  EXPECT_EQ(ProxyJumpHops("ssh -J h2jump -W '[%h]:%p' h1jump"), (Hops{"h1jump", "h2jump"}));
  // "ProxyJump lojump,h1jump,h2jump"
  EXPECT_EQ(ProxyJumpHops("ssh -J h1jump,h2jump -W '[%h]:%p' lojump"),
            (Hops{"lojump", "h1jump", "h2jump"}));
}

TEST(ProxyJumpHops, PutsTheFirstHopsUserAndPortBackAroundItsHost) {
  // "ProxyJump alice@h1"
  EXPECT_EQ(ProxyJumpHops("ssh -l alice -W '[%h]:%p' h1"), Hops{"alice@h1"});
  // "ProxyJump alice@10.0.0.1:2222,bob@h2:22,h3:2200"
  EXPECT_EQ(ProxyJumpHops("ssh -l alice -p 2222 -J bob@h2:22,h3:2200 -W '[%h]:%p' 10.0.0.1"),
            (Hops{"alice@10.0.0.1:2222", "bob@h2:22", "h3:2200"}));
  // "ProxyJump h1:2222"
  EXPECT_EQ(ProxyJumpHops("ssh -p 2222 -W '[%h]:%p' h1"), Hops{"h1:2222"});
}

TEST(ProxyJumpHops, BracketsAnIpv6FirstHopAndKeepsLaterHopsAsWritten) {
  // "ProxyJump [2001:db8::5]:2222"
  EXPECT_EQ(ProxyJumpHops("ssh -p 2222 -W '[%h]:%p' 2001:db8::5"), Hops{"[2001:db8::5]:2222"});
  // "ProxyJump a@[fe80::1]:2200,[::1]:22"
  EXPECT_EQ(ProxyJumpHops("ssh -l a -p 2200 -J [::1]:22 -W '[%h]:%p' fe80::1"),
            (Hops{"a@[fe80::1]:2200", "[::1]:22"}));
}

TEST(ProxyJumpHops, GivesBackAnSshUrlFirstHopThatLibsshSplitAtTheAt) {
  // "ProxyJump ssh://alice@h1:2222,h2": libssh takes "ssh://alice" as the
  // user, and joining the parts back restores the URL.
  EXPECT_EQ(ProxyJumpHops("ssh -l ssh://alice -p 2222 -J h2 -W '[%h]:%p' h1"),
            (Hops{"ssh://alice@h1:2222", "h2"}));
}

TEST(ProxyJumpHops, LeavesEveryOtherCommandAlone) {
  for (const char* command : {
           "",
           "ssh",
           "nc %h %p",
           "ssh -W %h:%p h1",                     // a config's own command
           "ssh -W '[%h]:%p'",                    // no host
           "ssh -W '[%h]:%p' h1 extra",           // a word too many
           "ssh -q -W '[%h]:%p' h1",              // a flag libssh does not write
           "ssh -J h2 -l alice -W '[%h]:%p' h1",  // flags out of libssh's order
           "ssh -l -W '[%h]:%p' h1",              // -l without its value
           "/usr/bin/ssh -W '[%h]:%p' h1",        // not libssh's "ssh"
           "ssh -F /u/config -W '[%h]:%p' h1",    // -F is not libssh's
           "ssh -o ProxyCommand=none -W '[%h]:%p' h1",
       }) {
    EXPECT_EQ(ProxyJumpHops(command), std::nullopt) << command;
  }
}

// libssh's ProxyCommand for `proxy_jump` in a config's Host block; empty if
// it makes none.
std::string LibsshProxyCommandFor(const std::string& proxy_jump) {
  TempDir dir;
  WriteFile(dir.File("config"), "Host target\n  ProxyJump " + proxy_jump + "\n");
  ssh_session session = ssh_new();
  EXPECT_NE(session, nullptr);
  if (session == nullptr) return "";
  ssh_options_set(session, SSH_OPTIONS_HOST, "target");
  EXPECT_EQ(ssh_options_parse_config(session, dir.File("config").c_str()), SSH_OK);
  std::string out;
  char* value = nullptr;
  if (ssh_options_get(session, SSH_OPTIONS_PROXYCOMMAND, &value) == SSH_OK && value != nullptr) {
    out = value;
    ssh_string_free_char(value);
  }
  ssh_free(session);
  return out;
}

TEST(ProxyJumpHops, RecoversTheListFromWhatTheLinkedLibsshMakesOfAProxyJumpLine) {
  for (const Hops& hops : {
           Hops{"h2jump"},
           Hops{"h1jump", "h2jump"},
           Hops{"lojump", "h1jump", "h2jump"},
           Hops{"alice@10.0.0.1:2222", "bob@h2:22", "h3"},
           Hops{"a@[fe80::1]:2200", "[::1]:22"},
       }) {
    std::string line;
    for (const std::string& hop : hops) line += (line.empty() ? "" : ",") + hop;
    const std::string command = LibsshProxyCommandFor(line);
    EXPECT_EQ(ProxyJumpHops(command), hops) << line << " -> " << command;
  }
}

// --- ExpandKnownHostsPath --------------------------------------------------

TEST(ExpandKnownHostsPath, ExpandsTildeAndPercentDAsLibsshDoes) {
  EXPECT_EQ(ExpandKnownHostsPath("", "/home/u"), "/home/u/.ssh/known_hosts");
  EXPECT_EQ(ExpandKnownHostsPath("~/kh", "/home/u"), "/home/u/kh");
  EXPECT_EQ(ExpandKnownHostsPath("%d/known_hosts2", "/home/u"), "/home/u/.ssh/known_hosts2");
  EXPECT_EQ(ExpandKnownHostsPath("/etc/100%%/kh", "/home/u"), "/etc/100%/kh");
  // Only a leading "~" or "~/" is the home directory.
  EXPECT_EQ(ExpandKnownHostsPath("~bob/kh", "/home/u"), "~bob/kh");
  EXPECT_EQ(ExpandKnownHostsPath("/srv/a~/kh", "/home/u"), "/srv/a~/kh");
}

// --- JumpClientConfig ------------------------------------------------------

SessionOptions OptionsWith(HostKeyChecking mode) {
  SessionOptions o;
  o.host = "target";
  o.host_key_checking = mode;
  o.connect_timeout = std::chrono::seconds(10);
  return o;
}

// DIR/config for hops h1,h2 with the given StrictHostKeyChecking and
// UserKnownHostsFile values, ConnectTimeout 6 (2/3 of 10 s) and an Include
// of /u/config.
std::string ExpectedConfig(const std::string& strict, const std::string& known_hosts_value) {
  return "# Written by barge for one connection through ProxyJump h1,h2; removed once "
         "connected.\n"
         "Host *\n"
         "  BatchMode yes\n"
         "  StrictHostKeyChecking " + strict + "\n"
         "  UserKnownHostsFile " + known_hosts_value + "\n"
         "  ConnectTimeout 6\n"
         "  ControlMaster no\n"
         "  ControlPath none\n"
         "  LogLevel ERROR\n"
         "Include \"/u/config\"\n";
}

TEST(JumpClientConfig, StrictCheckingIsYesAgainstBargesKnownHosts) {
  auto config = JumpClientConfig({"h1", "h2"}, OptionsWith(HostKeyChecking::kStrict),
                                 "/u/known_hosts", "/u/config");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(*config, ExpectedConfig("yes", "\"/u/known_hosts\""));
}

TEST(JumpClientConfig, AcceptNewIsAcceptNewAgainstBargesKnownHosts) {
  auto config = JumpClientConfig({"h1", "h2"}, OptionsWith(HostKeyChecking::kAcceptNew),
                                 "/u/known_hosts", "/u/config");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(*config, ExpectedConfig("accept-new", "\"/u/known_hosts\""));
}

TEST(JumpClientConfig, OffChecksNothingAndRecordsNothing) {
  auto config = JumpClientConfig({"h1", "h2"}, OptionsWith(HostKeyChecking::kOff),
                                 "/u/known_hosts", "/u/config");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(*config, ExpectedConfig("no", "\"/dev/null\""));
}

TEST(JumpClientConfig, OffersTheJobsIdentityFileLastAndIncludesNoConfigWhenThereIsNone) {
  SessionOptions o = OptionsWith(HostKeyChecking::kStrict);
  o.identity_file = "/u/.ssh/id_job";
  auto config = JumpClientConfig({"h1"}, o, "/u/known_hosts", "");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(config->find("Include"), std::string::npos) << *config;
  const std::string tail = "  LogLevel ERROR\nHost *\n  IdentityFile \"/u/.ssh/id_job\"\n";
  ASSERT_GE(config->size(), tail.size());
  EXPECT_EQ(config->substr(config->size() - tail.size()), tail) << *config;
}

TEST(JumpClientConfig, TheHopTimeoutIsTwoThirdsOfTheConnectTimeoutAndAtLeastOneSecond) {
  for (auto [ms, seconds] : {std::pair{10000, 6}, {3000, 2}, {1000, 1}, {200, 1}, {60000, 40}}) {
    SessionOptions o = OptionsWith(HostKeyChecking::kStrict);
    o.connect_timeout = std::chrono::milliseconds(ms);
    auto config = JumpClientConfig({"h1"}, o, "/u/kh", "/u/config");
    ASSERT_TRUE(config.ok());
    EXPECT_NE(config->find("\n  ConnectTimeout " + std::to_string(seconds) + "\n"),
              std::string::npos)
        << ms << " ms:\n"
        << *config;
  }
}

TEST(JumpClientConfig, DoublesPercentWhereOpenSshExpandsTokensOnly) {
  SessionOptions o = OptionsWith(HostKeyChecking::kStrict);
  o.identity_file = "/u/%i/id";
  auto config = JumpClientConfig({"h1"}, o, "/u/100%/kh", "/u/50%/config");
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_NE(config->find("  UserKnownHostsFile \"/u/100%%/kh\"\n"), std::string::npos) << *config;
  EXPECT_NE(config->find("  IdentityFile \"/u/%%i/id\"\n"), std::string::npos) << *config;
  EXPECT_NE(config->find("Include \"/u/50%/config\"\n"), std::string::npos) << *config;
}

TEST(JumpClientConfig, QuotesPathsWithSpacesAndMakesRelativePathsAbsolute) {
  SessionOptions o = OptionsWith(HostKeyChecking::kStrict);
  o.identity_file = "keys/id";
  auto config = JumpClientConfig({"h1"}, o, "my known_hosts", "/u/ssh config");
  ASSERT_TRUE(config.ok()) << config.status().message();
  char cwd[4096];
  ASSERT_NE(getcwd(cwd, sizeof cwd), nullptr);
  const std::string here = cwd;
  EXPECT_NE(config->find("  UserKnownHostsFile \"" + here + "/my known_hosts\"\n"),
            std::string::npos)
      << *config;
  EXPECT_NE(config->find("  IdentityFile \"" + here + "/keys/id\"\n"), std::string::npos)
      << *config;
  EXPECT_NE(config->find("Include \"/u/ssh config\"\n"), std::string::npos) << *config;
}

TEST(JumpClientConfig, RefusesAPathWithAQuoteBackslashOrLineBreak) {
  for (const std::string bad : {"/u/a\"b", "/u/a\\b", "/u/a\nb", "/u/a\rb"}) {
    SessionOptions o = OptionsWith(HostKeyChecking::kStrict);
    auto in_known_hosts = JumpClientConfig({"h1", "h2"}, o, bad, "/u/config");
    auto in_config = JumpClientConfig({"h1", "h2"}, o, "/u/kh", bad);
    o.identity_file = bad;
    auto in_identity = JumpClientConfig({"h1", "h2"}, o, "/u/kh", "/u/config");
    for (const auto* result : {&in_known_hosts, &in_config, &in_identity}) {
      ASSERT_FALSE(result->ok()) << bad;
      EXPECT_EQ(result->status().message(),
                "ProxyJump h1,h2: a known_hosts, ssh config or identity file path with a quote, "
                "backslash or line break cannot be passed to OpenSSH's ssh");
    }
  }
}

// --- JumpProxyCommand ------------------------------------------------------

TEST(JumpProxyCommand, RunsSshWithThePrivateConfigToTheOneHop) {
  EXPECT_EQ(JumpProxyCommand("/usr/bin/ssh", "/tmp/barge-jump-AbC123", {"h2jump"}, "10.77.0.9",
                             2222),
            "/usr/bin/ssh -F /tmp/barge-jump-AbC123/config -W '[10.77.0.9]:2222' ssh://h2jump "
            "2>>/tmp/barge-jump-AbC123/stderr");
}

TEST(JumpProxyCommand, PassesTheEarlierHopsAsDashJAndTheLastAsTheDestination) {
  EXPECT_EQ(JumpProxyCommand("/usr/bin/ssh", "/t/d", {"lojump", "alice@h1:2222", "bob@h2:22"},
                             "10.77.0.9", 22),
            "/usr/bin/ssh -F /t/d/config -J lojump,alice@h1:2222 -W '[10.77.0.9]:22' "
            "ssh://bob@h2:22 2>>/t/d/stderr");
  EXPECT_EQ(JumpProxyCommand("/usr/bin/ssh", "/t/d", {"h1", "ssh://bob@h2:2200"}, "t", 22),
            "/usr/bin/ssh -F /t/d/config -J h1 -W '[t]:22' ssh://bob@h2:2200 2>>/t/d/stderr");
}

TEST(JumpProxyCommand, PutsSetsidFirstWhenGivenSoACtrlCAtTheTerminalDoesNotReachTheTunnel) {
  EXPECT_EQ(JumpProxyCommand("/usr/bin/ssh", "/t/d", {"h1"}, "t", 22, "/usr/bin/setsid"),
            "/usr/bin/setsid /usr/bin/ssh -F /t/d/config -W '[t]:22' ssh://h1 2>>/t/d/stderr");
}

TEST(JumpProxyCommand, BracketsAnIpv6TargetAndQuotesAnIpv6Hop) {
  EXPECT_EQ(JumpProxyCommand("/usr/bin/ssh", "/t/d", {"[::1]:22"}, "fe80::2", 2222),
            "/usr/bin/ssh -F /t/d/config -W '[fe80::2]:2222' 'ssh://[::1]:22' 2>>/t/d/stderr");
}

TEST(JumpProxyCommand, ShellQuotesOddPathsAndDoublesEveryPercentForLibssh) {
  EXPECT_EQ(JumpProxyCommand("/opt/my ssh/ssh", "/tmp/it's 100%/barge-jump-x", {"h%1"}, "t", 22),
            "'/opt/my ssh/ssh' -F '/tmp/it'\\''s 100%%/barge-jump-x/config' -W '[t]:22' "
            "ssh://h%%1 2>>'/tmp/it'\\''s 100%%/barge-jump-x/stderr'");
}

// --- DescribeJumpFailure ---------------------------------------------------

// An ed25519 key and its fingerprint as `ssh-keygen -l` prints it.
constexpr const char* kOldKey =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIInZcI7Q6ELnUp0l3DMmbYk7gfeDygMlDGtrNDHDNiUY";
constexpr const char* kOldFingerprint = "SHA256:upEXaCf+GeI0+1akHYVpK9AdYQFEY2B6zIGp8HmWvFI";
constexpr const char* kNewFingerprint = "SHA256:e/WwT2lYEL9H3HOxtluzxRaOnOdmcYTaApgdHZb2qng";

// OpenSSH 9.2's stderr for a changed key of [127.0.0.2]:2222 under
// StrictHostKeyChecking=yes, with `offending` as its "Offending" lines.
std::string OpenSshChangedKeyStderr(const std::string& offending) {
  return std::string(
             "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\r\n"
             "@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\r\n"
             "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\r\n"
             "IT IS POSSIBLE THAT SOMEONE IS DOING SOMETHING NASTY!\r\n"
             "Someone could be eavesdropping on you right now (man-in-the-middle attack)!\r\n"
             "It is also possible that a host key has just been changed.\r\n"
             "The fingerprint for the ED25519 key sent by the remote host is\n") +
         kNewFingerprint + ".\r\nPlease contact your system administrator.\r\n" + offending +
         "Host key for [127.0.0.2]:2222 has changed and you have requested strict checking.\r\n"
         "Host key verification failed.\r\n";
}

TEST(DescribeJumpFailure, NamesTheJumpHostBothKeysAndTheLineToRemoveForAChangedKey) {
  TempDir dir;
  const std::string file = dir.File("known_hosts");
  WriteFile(file, std::string("# barge\n[127.0.0.2]:2222 ") + kOldKey + "\n");
  const std::string msg = DescribeJumpFailure(
      OpenSshChangedKeyStderr("Offending ED25519 key in " + file + ":2\r\n"), "/elsewhere/kh");
  EXPECT_EQ(msg, "jump host [127.0.0.2]:2222: " +
                     ChangedHostKeyMessage("[127.0.0.2]:2222", "ED25519", kNewFingerprint,
                                           {{file, 2, "ssh-ed25519", kOldFingerprint}}, file));
  EXPECT_NE(msg.find("the host presents ED25519 key " + std::string(kNewFingerprint) + ", but " +
                     file + ":2 holds ssh-ed25519 key " + kOldFingerprint +
                     " for [127.0.0.2]:2222."),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("(ssh-keygen -R '[127.0.0.2]:2222' -f " + file + ")"), std::string::npos)
      << msg;
}

TEST(DescribeJumpFailure, LooksInBargesKnownHostsWhenOpenSshNamesNoFile) {
  TempDir dir;
  const std::string file = dir.File("known_hosts");
  WriteFile(file, std::string("[127.0.0.2]:2222 ") + kOldKey + "\n");
  const std::string msg = DescribeJumpFailure(OpenSshChangedKeyStderr(""), file);
  EXPECT_EQ(msg.rfind("jump host [127.0.0.2]:2222: the host key has CHANGED: ", 0), 0u) << msg;
  EXPECT_NE(msg.find(file + ":1 holds ssh-ed25519 key " + kOldFingerprint), std::string::npos)
      << msg;
}

TEST(DescribeJumpFailure, AddsWhereToPutAnUnknownJumpHostsKey) {
  EXPECT_EQ(DescribeJumpFailure("No ED25519 host key is known for 10.77.0.3 and you have "
                                "requested strict checking.\r\nHost key verification failed.\r\n",
                                "/u/known_hosts"),
            "OpenSSH's ssh for the jump hosts says: No ED25519 host key is known for 10.77.0.3 "
            "and you have requested strict checking. Host key verification failed. Check the "
            "jump host's key with its administrator and add it to /u/known_hosts, or set "
            "host_key_checking: accept-new.");
}

TEST(DescribeJumpFailure, GivesAnyOtherErrorAsOpenSshSaidItOnOneLine) {
  EXPECT_EQ(DescribeJumpFailure("ssh: connect to host 10.77.0.9 port 22: Connection timed out\r\n",
                                "/u/kh"),
            "OpenSSH's ssh for the jump hosts says: ssh: connect to host 10.77.0.9 port 22: "
            "Connection timed out");
  EXPECT_EQ(DescribeJumpFailure("@@@@@@@@@@@@@@@@@@@@\r\n"
                                "@         WARNING: UNPROTECTED PRIVATE KEY FILE!          @\r\n"
                                "@@@@@@@@@@@@@@@@@@@@\r\n"
                                "\r\n"
                                "Permissions 0644 for '/u/id' are too open.\r\n",
                                "/u/kh"),
            "OpenSSH's ssh for the jump hosts says: WARNING: UNPROTECTED PRIVATE KEY FILE! "
            "Permissions 0644 for '/u/id' are too open.");
}

TEST(DescribeJumpFailure, KeepsOnlyTheLastTwoThousandBytes) {
  std::string noise;
  for (int i = 0; i < 300; ++i) noise += "line " + std::to_string(i) + " of noise\n";
  noise += "ssh: Could not resolve hostname nowhere: Name or service not known\n";
  const std::string prefix = "OpenSSH's ssh for the jump hosts says: ...";
  const std::string msg = DescribeJumpFailure(noise, "/u/kh");
  EXPECT_EQ(msg.rfind(prefix, 0), 0u) << msg;
  EXPECT_EQ(msg.size(), prefix.size() + 2000);
  const std::string last = "ssh: Could not resolve hostname nowhere: Name or service not known";
  EXPECT_EQ(msg.substr(msg.size() - last.size()), last);
}

// --- JumpTunnel ------------------------------------------------------------

// Sets an environment variable for the life of the object.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// The names in `dir`, but . and ..
std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") out.push_back(name);
  }
  closedir(d);
  return out;
}

// A PATH holding only an executable "ssh" (never run), and a TMPDIR.
struct FakeEnvironment {
  FakeEnvironment() : path("PATH", bin.path()), tmpdir("TMPDIR", tmp.path()) {
    WriteFile(bin.File("ssh"), "#!/bin/sh\nexit 255\n");
    chmod(bin.File("ssh").c_str(), 0755);
  }
  TempDir bin;
  TempDir tmp;
  ScopedEnv path;
  ScopedEnv tmpdir;
};

TEST(JumpTunnel, WritesItsConfigInAPrivateDirectoryThatItRemoves) {
  FakeEnvironment env;
  const SessionOptions o = OptionsWith(HostKeyChecking::kAcceptNew);
  {
    auto tunnel = JumpTunnel::Make({"h1", "h2"}, "10.77.0.9", 2222, o, "/u/kh", "/u/config");
    ASSERT_TRUE(tunnel.ok()) << tunnel.status().message();
    EXPECT_EQ((*tunnel)->hops(), "h1,h2");
    const std::vector<std::string> made = Entries(env.tmp.path());
    ASSERT_EQ(made.size(), 1u);
    EXPECT_EQ(made[0].rfind("barge-jump-", 0), 0u) << made[0];
    const std::string dir = env.tmp.File(made[0]);
    struct stat st;
    ASSERT_EQ(stat(dir.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u);
    EXPECT_EQ(ReadFile(dir + "/config"), *JumpClientConfig({"h1", "h2"}, o, "/u/kh", "/u/config"));
    EXPECT_EQ((*tunnel)->proxy_command(),
              JumpProxyCommand(env.bin.File("ssh"), dir, {"h1", "h2"}, "10.77.0.9", 2222));

    EXPECT_EQ((*tunnel)->ErrorOutput(), "");
    WriteFile(dir + "/stderr", "Host key verification failed.\r\n");
    EXPECT_EQ((*tunnel)->ErrorOutput(), "Host key verification failed.\r\n");
  }
  EXPECT_TRUE(Entries(env.tmp.path()).empty());
}

TEST(JumpTunnel, LeavesNothingBehindWhenItRefusesAPath) {
  FakeEnvironment env;
  auto tunnel = JumpTunnel::Make({"h1"}, "t", 22, OptionsWith(HostKeyChecking::kStrict),
                                 "/u/a\"b", "/u/config");
  ASSERT_FALSE(tunnel.ok());
  EXPECT_EQ(tunnel.status().message().rfind("ProxyJump h1: ", 0), 0u)
      << tunnel.status().message();
  EXPECT_TRUE(Entries(env.tmp.path()).empty());
}

TEST(JumpTunnel, NeedsOpenSshsClientOnPath) {
  TempDir empty;
  ScopedEnv path("PATH", empty.path());
  auto tunnel = JumpTunnel::Make({"h1", "h2"}, "t", 22, OptionsWith(HostKeyChecking::kStrict),
                                 "/u/kh", "/u/config");
  ASSERT_FALSE(tunnel.ok());
  EXPECT_EQ(tunnel.status().message(),
            "ProxyJump h1,h2 needs OpenSSH's client (ssh) on PATH, and there is none");
}

}  // namespace
}  // namespace barge::ssh
