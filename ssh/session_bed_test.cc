// Session against the real sshd of the test bed: host keys, ssh config,
// authentication, timeouts, parallel connects.
#include "ssh/session.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <dirent.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "tests/support/bed_test_util.h"
#include "ssh/event_loop.h"
#include "ssh/connect_all.h"
#include "ssh/ssh_executor.h"

namespace barge::ssh {
namespace {

using barge::testing::GetBed;
using std::chrono::milliseconds;
using testing::BedLabel;
using testing::BedOptions;
using testing::Collected;
using testing::Exists;
using testing::ReadFile;
using testing::RunProgram;
using testing::RunToEnd;
using testing::TempDir;
using testing::WriteFile;

// "[addr]:port" or "addr", as known_hosts names the bed's loopback sshd.
std::string BedKnownHostsName() {
  const auto& bed = GetBed();
  if (bed.loopback.port == 22) return bed.loopback.address;
  return "[" + bed.loopback.address + "]:" + std::to_string(bed.loopback.port);
}

// The SHA256 fingerprint(s) ssh-keygen finds for `name` in `file`.
std::string FingerprintsIn(const std::string& file, const std::string& name) {
  int code = -1;
  std::string out = RunProgram({"/usr/bin/ssh-keygen", "-l", "-F", name, "-f", file}, "", &code);
  std::string prints;
  std::smatch m;
  std::regex re("SHA256:[A-Za-z0-9+/]+");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator();
       ++it) {
    prints += it->str() + "\n";
  }
  return prints;
}

std::string BedHostFingerprint() {
  std::string prints = FingerprintsIn(GetBed().known_hosts, BedKnownHostsName());
  return prints.substr(0, prints.find('\n'));
}

// The SHA256 fingerprint of the public key in `pub_file`.
std::string FingerprintOf(const std::string& pub_file) {
  int code = -1;
  std::string out = RunProgram({"/usr/bin/ssh-keygen", "-l", "-f", pub_file}, "", &code);
  std::smatch m;
  if (code != 0 || !std::regex_search(out, m, std::regex("SHA256:[A-Za-z0-9+/]+"))) return "";
  return m.str();
}

// The bed's known_hosts line for `name_field` ("h2,10.77.0.3", "[127.0.0.2]:2222"),
// without its host field: "ssh-ed25519 AAAA...".
std::string BedKeyOf(const std::string& name_field) {
  std::istringstream in(ReadFile(GetBed().known_hosts));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name_field + " ", 0) == 0) return line.substr(name_field.size() + 1);
  }
  ADD_FAILURE() << "no line for " << name_field << " in " << GetBed().known_hosts;
  return "";
}

// A fresh ed25519 key pair at `path` (+ ".pub").
void MakeKey(const std::string& path) {
  int code = -1;
  RunProgram({"/usr/bin/ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "test", "-f", path},
             "", &code);
  ASSERT_EQ(code, 0);
}

TEST(Session, ConnectsToTheBedAndNamesItUserAtAddressColonPort) {
  TempDir dir;
  auto session = Session::Connect(BedOptions(dir));
  ASSERT_TRUE(session.ok()) << session.status().message();
  EXPECT_EQ((*session)->label(), BedLabel());
  EXPECT_TRUE(ssh_is_connected((*session)->raw()));
}

TEST(Session, RefusesAnUnknownHostKeyAndShowsItsFingerprint) {
  TempDir dir;
  SessionOptions o = BedOptions(dir);
  o.known_hosts_file = dir.File("known_hosts");
  WriteFile(o.known_hosts_file, "");
  auto session = Session::Connect(o);
  ASSERT_FALSE(session.ok());
  const std::string msg = session.status().message();
  EXPECT_EQ(msg.rfind(BedLabel() + ": ", 0), 0u) << msg;
  EXPECT_NE(msg.find("unknown host key"), std::string::npos) << msg;
  std::string fingerprint = BedHostFingerprint();
  ASSERT_EQ(fingerprint.rfind("SHA256:", 0), 0u);
  EXPECT_NE(msg.find(fingerprint), std::string::npos) << msg;
  EXPECT_NE(msg.find(o.known_hosts_file), std::string::npos) << msg;
  // Nothing was written.
  EXPECT_EQ(ReadFile(o.known_hosts_file), "");
}

TEST(Session, RefusesAnUnknownHostKeyWhenTheKnownHostsFileIsMissing) {
  TempDir dir;
  SessionOptions o = BedOptions(dir);
  o.known_hosts_file = dir.File("no_such_known_hosts");
  auto session = Session::Connect(o);
  ASSERT_FALSE(session.ok());
  EXPECT_NE(session.status().message().find("SHA256:"), std::string::npos)
      << session.status().message();
  EXPECT_FALSE(Exists(o.known_hosts_file));
}

TEST(Session, AcceptNewRecordsAnUnknownKeySoThatStrictCheckingThenPasses) {
  TempDir dir;
  SessionOptions o = BedOptions(dir);
  o.known_hosts_file = dir.File("known_hosts");
  WriteFile(o.known_hosts_file, "");
  o.host_key_checking = HostKeyChecking::kAcceptNew;
  auto first = Session::Connect(o);
  ASSERT_TRUE(first.ok()) << first.status().message();
  std::string recorded = ReadFile(o.known_hosts_file);
  EXPECT_FALSE(recorded.empty());
  EXPECT_EQ(FingerprintsIn(o.known_hosts_file, BedKnownHostsName()), BedHostFingerprint() + "\n");

  o.host_key_checking = HostKeyChecking::kStrict;
  auto second = Session::Connect(o);
  EXPECT_TRUE(second.ok()) << second.status().message();
  // A known key is not recorded twice.
  o.host_key_checking = HostKeyChecking::kAcceptNew;
  auto third = Session::Connect(o);
  EXPECT_TRUE(third.ok()) << third.status().message();
  EXPECT_EQ(ReadFile(o.known_hosts_file), recorded);
}

TEST(Session, RefusesAChangedHostKeyWithBothFingerprintsAndTheLineToRemove) {
  TempDir dir;
  MakeKey(dir.File("impostor"));
  std::string impostor_pub = ReadFile(dir.File("impostor.pub"));
  impostor_pub = impostor_pub.substr(0, impostor_pub.rfind(' '));  // drop the comment
  SessionOptions o = BedOptions(dir);
  o.known_hosts_file = dir.File("known_hosts");
  WriteFile(o.known_hosts_file,
            "# a comment\nother.example ssh-ed25519 " + impostor_pub.substr(12) + "\n" +
                BedKnownHostsName() + " " + impostor_pub + "\n");
  std::string old_fingerprint = FingerprintsIn(o.known_hosts_file, BedKnownHostsName());
  old_fingerprint = old_fingerprint.substr(0, old_fingerprint.find('\n'));
  ASSERT_FALSE(old_fingerprint.empty());

  for (HostKeyChecking mode : {HostKeyChecking::kStrict, HostKeyChecking::kAcceptNew}) {
    o.host_key_checking = mode;
    auto session = Session::Connect(o);
    ASSERT_FALSE(session.ok());
    const std::string msg = session.status().message();
    EXPECT_EQ(msg.rfind(BedLabel() + ": ", 0), 0u) << msg;
    EXPECT_NE(msg.find("CHANGED"), std::string::npos) << msg;
    EXPECT_NE(msg.find(BedHostFingerprint()), std::string::npos) << msg;
    EXPECT_NE(msg.find(old_fingerprint), std::string::npos) << msg;
    EXPECT_NE(msg.find(o.known_hosts_file + ":3 holds ssh-ed25519 key " + old_fingerprint +
                       " for " + BedKnownHostsName()),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("ssh-keygen -R '" + BedKnownHostsName() + "' -f " + o.known_hosts_file),
              std::string::npos)
        << msg;
  }
}

TEST(Session, FindsTheChangedLineAmongHashedEntries) {
  TempDir dir;
  MakeKey(dir.File("impostor"));
  std::string impostor_pub = ReadFile(dir.File("impostor.pub"));
  impostor_pub = impostor_pub.substr(0, impostor_pub.rfind(' '));
  SessionOptions o = BedOptions(dir);
  o.known_hosts_file = dir.File("known_hosts");
  WriteFile(o.known_hosts_file, BedKnownHostsName() + " " + impostor_pub + "\n");
  int code = -1;
  RunProgram({"/usr/bin/ssh-keygen", "-H", "-f", o.known_hosts_file}, "", &code);
  ASSERT_EQ(code, 0);
  ASSERT_EQ(ReadFile(o.known_hosts_file).rfind("|1|", 0), 0u);  // hashed now
  auto session = Session::Connect(o);
  ASSERT_FALSE(session.ok());
  const std::string msg = session.status().message();
  EXPECT_NE(msg.find("CHANGED"), std::string::npos) << msg;
  EXPECT_NE(msg.find(FingerprintOf(dir.File("impostor.pub"))), std::string::npos) << msg;
  EXPECT_NE(msg.find(o.known_hosts_file + ":1 holds"), std::string::npos) << msg;
  EXPECT_NE(msg.find(BedHostFingerprint()), std::string::npos) << msg;
}

TEST(Session, AcceptsAHashedKnownHostsEntry) {
  TempDir dir;
  SessionOptions o = BedOptions(dir);
  o.known_hosts_file = dir.File("known_hosts");
  WriteFile(o.known_hosts_file, ReadFile(GetBed().known_hosts));
  int code = -1;
  RunProgram({"/usr/bin/ssh-keygen", "-H", "-f", o.known_hosts_file}, "", &code);
  ASSERT_EQ(code, 0);
  auto session = Session::Connect(o);
  EXPECT_TRUE(session.ok()) << session.status().message();
}

TEST(Session, ANonDefaultPortNeedsABracketedHostPortEntry) {
  TempDir dir;
  const auto& bed = GetBed();
  ASSERT_NE(bed.loopback.port, 22) << "the test needs the loopback sshd on a port other than 22";
  SessionOptions o = BedOptions(dir);
  o.known_hosts_file = dir.File("known_hosts");
  const std::string key = BedKeyOf(BedKnownHostsName());
  // The right key, but under the bare address: it vouches for port 22 only.
  WriteFile(o.known_hosts_file, bed.loopback.address + " " + key + "\n");
  auto bare = Session::Connect(o);
  ASSERT_FALSE(bare.ok());
  EXPECT_NE(bare.status().message().find("unknown host key"), std::string::npos)
      << bare.status().message();
  EXPECT_NE(bare.status().message().find("has no key for " + BedKnownHostsName()),
            std::string::npos)
      << bare.status().message();

  WriteFile(o.known_hosts_file, "[" + bed.loopback.address + "]:" +
                                    std::to_string(bed.loopback.port) + " " + key + "\n");
  auto bracketed = Session::Connect(o);
  EXPECT_TRUE(bracketed.ok()) << bracketed.status().message();
}

TEST(Session, AcceptsAHashedEntryOfAMultiNameLineOnPort22) {
  TempDir dir;
  const auto& bed = GetBed();
  ASSERT_FALSE(bed.hosts.empty()) << "the bed has no namespace host";
  const auto& h1 = bed.hosts[0];
  SessionOptions o = BedOptions(dir);
  o.host = h1.address;
  o.port = h1.port;
  o.known_hosts_file = dir.File("known_hosts");
  WriteFile(o.known_hosts_file, h1.name + "," + h1.address + " " +
                                    BedKeyOf(h1.name + "," + h1.address) + "\n");
  int code = -1;
  RunProgram({"/usr/bin/ssh-keygen", "-H", "-f", o.known_hosts_file}, "", &code);
  ASSERT_EQ(code, 0);
  const std::string hashed = ReadFile(o.known_hosts_file);
  ASSERT_EQ(hashed.find(h1.address), std::string::npos) << hashed;
  auto session = Session::Connect(o);
  EXPECT_TRUE(session.ok()) << session.status().message();
}

TEST(Session, HostKeyCheckingOffAcceptsAnyKey) {
  TempDir dir;
  SessionOptions o = BedOptions(dir);
  o.known_hosts_file = dir.File("known_hosts");
  WriteFile(o.known_hosts_file, "");
  o.host_key_checking = HostKeyChecking::kOff;
  auto session = Session::Connect(o);
  EXPECT_TRUE(session.ok()) << session.status().message();
  EXPECT_EQ(ReadFile(o.known_hosts_file), "");
}

TEST(Session, HonoursAHostBlockOfTheSshConfig) {
  TempDir dir;
  const auto& bed = GetBed();
  SessionOptions o;
  o.host = "myalias";
  o.config_file = dir.File("config");
  WriteFile(o.config_file, "Host other\n  Port 1\n\nHost myalias\n  HostName " +
                               bed.loopback.address + "\n  Port " +
                               std::to_string(bed.loopback.port) + "\n  User " + bed.user +
                               "\n  IdentityFile " + bed.key + "\n  UserKnownHostsFile " +
                               bed.known_hosts + "\n");
  auto session = Session::Connect(o);
  ASSERT_TRUE(session.ok()) << session.status().message();
  EXPECT_EQ((*session)->label(), BedLabel() + " (myalias)");
}

TEST(Session, TheJobsOwnOptionsWinOverTheSshConfig) {
  TempDir dir;
  const auto& bed = GetBed();
  SessionOptions o;
  o.host = "myalias";
  o.config_file = dir.File("config");
  // Wrong port, user and known_hosts in the config: each must be overridden.
  WriteFile(o.config_file, "Host myalias\n  HostName " + bed.loopback.address +
                               "\n  Port 1\n  User nosuchuser\n  IdentityFile " + bed.key +
                               "\n  UserKnownHostsFile " + dir.File("empty_known_hosts") + "\n");
  WriteFile(dir.File("empty_known_hosts"), "");

  // First, the config alone: its port 1 is used, and refused.
  auto config_only = Session::Connect(o);
  ASSERT_FALSE(config_only.ok());
  EXPECT_NE(config_only.status().message().find("nosuchuser@" + bed.loopback.address + ":1 "),
            std::string::npos)
      << config_only.status().message();

  o.port = bed.loopback.port;
  o.user = bed.user;
  o.known_hosts_file = bed.known_hosts;
  auto session = Session::Connect(o);
  ASSERT_TRUE(session.ok()) << session.status().message();
  EXPECT_EQ((*session)->label(), BedLabel() + " (myalias)");
}

TEST(Session, TheJobsIdentityFileWinsOverTheSshConfigsIdentityFile) {
  TempDir dir;
  const auto& bed = GetBed();
  MakeKey(dir.File("stranger"));
  SessionOptions o;
  o.host = "myalias";
  o.config_file = dir.File("config");
  WriteFile(o.config_file, "Host myalias\n  HostName " + bed.loopback.address + "\n  Port " +
                               std::to_string(bed.loopback.port) + "\n  User " + bed.user +
                               "\n  IdentityFile " + dir.File("stranger") +
                               "\n  UserKnownHostsFile " + bed.known_hosts +
                               "\n");
  // The config's key alone is refused...
  auto config_only = Session::Connect(o);
  ASSERT_FALSE(config_only.ok());
  EXPECT_NE(config_only.status().message().find("permission denied"), std::string::npos)
      << config_only.status().message();
  // ...and the job's identity_file is used instead of it.
  o.identity_file = bed.key;
  auto session = Session::Connect(o);
  ASSERT_TRUE(session.ok()) << session.status().message();
  EXPECT_EQ((*session)->label(), BedLabel() + " (myalias)");
}

TEST(Session, AMissingConfigFileThatWasAskedForIsAnError) {
  TempDir dir;
  SessionOptions o = BedOptions(dir);
  o.config_file = dir.File("nope");
  auto session = Session::Connect(o);
  ASSERT_FALSE(session.ok());
  EXPECT_NE(session.status().message().find(o.config_file), std::string::npos);
}

TEST(Session, SaysWhichIdentityFileCannotBeUsedAndWhy) {
  TempDir dir;
  SessionOptions o = BedOptions(dir);
  o.identity_file = dir.File("missing_key");
  auto missing = Session::Connect(o);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find(*o.identity_file), std::string::npos);
  EXPECT_NE(missing.status().message().find("No such file or directory"), std::string::npos)
      << missing.status().message();

  o.identity_file = dir.File("garbage_key");
  WriteFile(*o.identity_file, "this is not a key\n");
  auto garbage = Session::Connect(o);
  ASSERT_FALSE(garbage.ok());
  EXPECT_NE(garbage.status().message().find(*o.identity_file), std::string::npos);
  EXPECT_NE(garbage.status().message().find("not a private key"), std::string::npos)
      << garbage.status().message();

  MakeKey(dir.File("stranger"));
  o.identity_file = dir.File("stranger");
  auto refused = Session::Connect(o);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message().rfind(BedLabel() + ": ", 0), 0u);
  EXPECT_NE(refused.status().message().find("refused the key in " + *o.identity_file),
            std::string::npos)
      << refused.status().message();
}

// A TCP listener that accepts connections (the kernel does) but never
// sends a byte: an SSH server that hangs before its banner.
class SilentListener {
 public:
  SilentListener() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr = {};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(listen(fd_, 16), 0);
    socklen_t len = sizeof addr;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  ~SilentListener() { close(fd_); }
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

TEST(Session, TheConnectTimeoutBoundsAHostThatNeverSendsItsBanner) {
  TempDir dir;
  SilentListener silent;
  SessionOptions o = BedOptions(dir);
  o.host = "127.0.0.1";
  o.port = silent.port();
  o.connect_timeout = milliseconds(1500);
  auto start = std::chrono::steady_clock::now();
  auto session = Session::Connect(o);
  auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(session.ok());
  const std::string msg = session.status().message();
  EXPECT_NE(msg.find("timed out"), std::string::npos) << msg;
  EXPECT_EQ(msg.rfind(GetBed().user + "@127.0.0.1:" + std::to_string(silent.port()) + ": ", 0), 0u)
      << msg;
  // Correctness bound (timeout + 2 s), not a performance target.
  EXPECT_LT(elapsed, milliseconds(1500 + 2000));
}

TEST(Session, ARefusedConnectionNamesTheHost) {
  TempDir dir;
  int port = 0;
  {
    SilentListener probe;  // a free port, closed again at the end of this block
    port = probe.port();
  }
  SessionOptions o = BedOptions(dir);
  o.host = "127.0.0.1";
  o.port = port;
  auto session = Session::Connect(o);
  ASSERT_FALSE(session.ok());
  EXPECT_EQ(session.status().message().rfind(GetBed().user + "@127.0.0.1:" + std::to_string(port) +
                                                 ": ",
                                             0),
            0u)
      << session.status().message();
}

TEST(Session, ConnectAllReturnsOneResultPerHostInInputOrder) {
  TempDir dir;
  SessionOptions good = BedOptions(dir);
  SessionOptions bad = BedOptions(dir);
  bad.known_hosts_file = dir.File("empty_known_hosts");
  WriteFile(bad.known_hosts_file, "");
  std::vector<SessionOptions> all = {good, bad, good, good, bad, good, good, good};
  EventLoop loop;
  auto results = ConnectAll(all, 4, &loop);
  ASSERT_EQ(results.size(), all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    bool expect_ok = all[i].known_hosts_file == good.known_hosts_file;
    EXPECT_EQ(results[i].ok(), expect_ok) << i << ": " << results[i].status().message();
    if (!expect_ok) {
      EXPECT_NE(results[i].status().message().find("unknown host key"), std::string::npos);
    }
  }
  EXPECT_TRUE(ConnectAll({}, 4, &loop).empty());
}

// --- ProxyJump -------------------------------------------------------------
// The bed's jump target (tests/bed/bed.sh) drops TCP from everyone but
// bed.jump_via (h2): reaching it proves the last hop was h2.

const barge::testing::BedHost* BedHostNamed(const std::string& name) {
  for (const auto& h : GetBed().hosts) {
    if (h.name == name) return &h;
  }
  return nullptr;
}

// Fails the test unless the bed has its jump target and the hosts h1, h2.
void NeedJumpTarget() {
  ASSERT_FALSE(GetBed().jump_target.address.empty())
      << "the bed has no jump target (BED_JUMP_TARGET_ADDR in bed.env): it needs 3 namespace "
         "hosts; a bed made before the jump target existed gets it with tests/bed/bed.sh "
         "_jump_target";
  ASSERT_EQ(GetBed().jump_via, "h2");
  ASSERT_NE(BedHostNamed("h1"), nullptr);
  ASSERT_NE(BedHostNamed("h2"), nullptr);
}

// An ssh config with a Host block for each bed sshd as a jump host ("lojump",
// "h1jump", "h2jump": address, port, user; IdentityFile unless
// `jump_identity` is false) and one for the jump target, "target" (address,
// port, user, the bed's key, ProxyJump `proxy_jump`).
std::string JumpConfig(const std::string& proxy_jump, bool jump_identity = true) {
  const auto& bed = GetBed();
  auto block = [&](const std::string& alias, const std::string& address, int port) {
    return "Host " + alias + "\n  HostName " + address + "\n  Port " + std::to_string(port) +
           "\n  User " + bed.user + "\n" + (jump_identity ? "  IdentityFile " + bed.key + "\n" : "");
  };
  return "Host target\n  HostName " + bed.jump_target.address + "\n  Port " +
         std::to_string(bed.jump_target.port) + "\n  User " + bed.user + "\n  IdentityFile " +
         bed.key + "\n  ProxyJump " + proxy_jump + "\n\n" +
         block("lojump", bed.loopback.address, bed.loopback.port) +
         block("h1jump", BedHostNamed("h1")->address, 22) +
         block("h2jump", BedHostNamed("h2")->address, 22);
}

SessionOptions JumpOptions(const TempDir& dir, const std::string& proxy_jump) {
  SessionOptions o;
  o.host = "target";
  o.config_file = dir.File("config");
  WriteFile(o.config_file, JumpConfig(proxy_jump));
  o.known_hosts_file = GetBed().known_hosts;
  o.connect_timeout = std::chrono::seconds(10);
  return o;
}

// "user@address:port (target)", as Session labels the jump target.
std::string JumpTargetLabel() {
  const auto& bed = GetBed();
  return bed.user + "@" + bed.jump_target.address + ":" + std::to_string(bed.jump_target.port) +
         " (target)";
}

// $SSH_CONNECTION on the far side of `session`: "client_addr client_port
// server_addr server_port".
std::string SshConnectionSeenBy(std::unique_ptr<Session> session) {
  EventLoop loop;
  SshExecutor exec(std::move(session), &loop);
  Collected c = RunToEnd(loop, exec, "echo \"$SSH_CONNECTION\"");
  EXPECT_TRUE(c.exit.known()) << c.exit.error;
  if (!c.out.empty() && c.out.back() == '\n') c.out.pop_back();
  return c.out;
}

// What the target sees when the last hop is h2.
std::string ExpectedJumpConnection() {
  const auto& bed = GetBed();
  return "^" + std::regex_replace(BedHostNamed("h2")->address, std::regex("\\."), "\\.") +
         " [0-9]+ " + std::regex_replace(bed.jump_target.address, std::regex("\\."), "\\.") + " " +
         std::to_string(bed.jump_target.port) + "$";
}

// The bed's known_hosts with the key of the line starting `name_field `
// replaced by a fresh key's (dir/impostor, made once).
std::string KnownHostsWithImpostorFor(const TempDir& dir, const std::string& name_field) {
  if (!Exists(dir.File("impostor"))) MakeKey(dir.File("impostor"));
  std::string impostor = ReadFile(dir.File("impostor.pub"));
  impostor = impostor.substr(0, impostor.rfind(' '));
  std::istringstream in(ReadFile(GetBed().known_hosts));
  std::string line, out;
  bool replaced = false;
  while (std::getline(in, line)) {
    if (line.rfind(name_field + " ", 0) == 0) {
      line = name_field + " " + impostor;
      replaced = true;
    }
    out += line + "\n";
  }
  EXPECT_TRUE(replaced) << "no line for " << name_field;
  return out;
}

TEST(SessionProxyJump, TheJumpTargetCannotBeReachedDirectly) {
  NeedJumpTarget();
  TempDir dir;
  const auto& bed = GetBed();
  SessionOptions o = BedOptions(dir);
  o.host = bed.jump_target.address;
  o.port = bed.jump_target.port;
  o.connect_timeout = milliseconds(1500);
  auto session = Session::Connect(o);
  ASSERT_FALSE(session.ok());
  EXPECT_NE(session.status().message().find("timed out"), std::string::npos)
      << session.status().message();
}

TEST(SessionProxyJump, ReachesAHostThroughTheJumpHostOfItsSshConfigHostBlock) {
  NeedJumpTarget();
  TempDir dir;
  auto session = Session::Connect(JumpOptions(dir, "h2jump"));
  ASSERT_TRUE(session.ok()) << session.status().message();
  EXPECT_EQ((*session)->label(), JumpTargetLabel());
  EXPECT_TRUE(std::regex_match(SshConnectionSeenBy(std::move(session).value()),
                               std::regex(ExpectedJumpConnection())));
}

TEST(SessionProxyJump, GoesThroughSeveralJumpHostsInTheOrderListed) {
  NeedJumpTarget();
  // h1 first, h2 last: the target only answers h2, so the reverse order
  // (what libssh 0.10's own ProxyCommand does) would time out.
  for (const char* hops : {"h1jump,h2jump", "lojump,h1jump,h2jump"}) {
    SCOPED_TRACE(hops);
    TempDir dir;
    auto session = Session::Connect(JumpOptions(dir, hops));
    ASSERT_TRUE(session.ok()) << session.status().message();
    const std::string seen = SshConnectionSeenBy(std::move(session).value());
    EXPECT_TRUE(std::regex_match(seen, std::regex(ExpectedJumpConnection()))) << seen;
  }
}

TEST(SessionProxyJump, AcceptsUserHostPortHopsWithoutHostBlocks) {
  NeedJumpTarget();
  TempDir dir;
  const auto& bed = GetBed();
  SessionOptions o = JumpOptions(dir, bed.user + "@" + bed.loopback.address + ":" +
                                          std::to_string(bed.loopback.port) + "," + bed.user +
                                          "@" + BedHostNamed("h2")->address);
  // No Host block for the hops: they get the job's identity_file.
  o.identity_file = bed.key;
  auto session = Session::Connect(o);
  ASSERT_TRUE(session.ok()) << session.status().message();
  const std::string seen = SshConnectionSeenBy(std::move(session).value());
  EXPECT_TRUE(std::regex_match(seen, std::regex(ExpectedJumpConnection()))) << seen;
}

TEST(SessionProxyJump, AJumpHostThatDoesNotAnswerIsNamedBeforeTheConnectTimeout) {
  NeedJumpTarget();
  TempDir dir;
  const auto& bed = GetBed();
  // The jump target itself as the jump host: it drops our SYNs.
  const std::string dead =
      bed.user + "@" + bed.jump_target.address + ":" + std::to_string(bed.jump_target.port);
  SessionOptions o = JumpOptions(dir, dead);
  o.connect_timeout = milliseconds(3000);
  auto start = std::chrono::steady_clock::now();
  auto session = Session::Connect(o);
  auto elapsed = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(session.ok());
  const std::string msg = session.status().message();
  EXPECT_EQ(msg.rfind(JumpTargetLabel() + ": cannot connect through ProxyJump " + dead + ": ", 0),
            0u)
      << msg;
  EXPECT_NE(msg.find("connect to host " + bed.jump_target.address + " port " +
                     std::to_string(bed.jump_target.port) + ": Connection timed out"),
            std::string::npos)
      << msg;
  // Correctness bound (timeout + 2 s), not a performance target.
  EXPECT_LT(elapsed, milliseconds(3000 + 2000));
}

TEST(SessionProxyJump, AJumpHostWithAChangedKeyStopsTheConnectionAndIsNamed) {
  NeedJumpTarget();
  TempDir dir;
  const auto* h2 = BedHostNamed("h2");
  for (const char* hops : {"h2jump", "h1jump,h2jump"}) {
    SCOPED_TRACE(hops);
    SessionOptions o = JumpOptions(dir, hops);
    o.known_hosts_file = dir.File("known_hosts");
    const std::string known = KnownHostsWithImpostorFor(dir, "h2," + h2->address);
    WriteFile(o.known_hosts_file, known);
    const int line = 1 + static_cast<int>(std::count(
                             known.begin(), known.begin() + known.find("h2," + h2->address), '\n'));
    const std::string new_fingerprint = FingerprintsIn(GetBed().known_hosts, h2->address);
    ASSERT_EQ(new_fingerprint.rfind("SHA256:", 0), 0u);
    for (HostKeyChecking mode : {HostKeyChecking::kStrict, HostKeyChecking::kAcceptNew}) {
      o.host_key_checking = mode;
      auto session = Session::Connect(o);
      ASSERT_FALSE(session.ok());
      const std::string msg = session.status().message();
      EXPECT_EQ(msg.rfind(JumpTargetLabel() + ": cannot connect through ProxyJump " +
                              std::string(hops) + ": jump host " + h2->address +
                              ": the host key has CHANGED: the host presents ED25519 key " +
                              new_fingerprint.substr(0, new_fingerprint.find('\n')) + ", but " +
                              o.known_hosts_file + ":" + std::to_string(line) +
                              " holds ssh-ed25519 key " + FingerprintOf(dir.File("impostor.pub")) +
                              " for " + h2->address + ".",
                          0),
                0u)
          << msg;
      EXPECT_NE(msg.find("(ssh-keygen -R " + h2->address + " -f " + o.known_hosts_file + ")"),
                std::string::npos)
          << msg;
    }
    // off connects anyway (the run warns about off elsewhere).
    o.host_key_checking = HostKeyChecking::kOff;
    auto off = Session::Connect(o);
    EXPECT_TRUE(off.ok()) << off.status().message();
  }
}

TEST(SessionProxyJump, AnUnknownJumpHostKeyIsRefusedUnlessAcceptNewWhichRecordsIt) {
  NeedJumpTarget();
  TempDir dir;
  const auto& bed = GetBed();
  const auto* h2 = BedHostNamed("h2");
  SessionOptions o = JumpOptions(dir, "h2jump");
  // Only the target's own key is known.
  const std::string target_name =
      "[" + bed.jump_target.address + "]:" + std::to_string(bed.jump_target.port);
  o.known_hosts_file = dir.File("known_hosts");
  WriteFile(o.known_hosts_file, target_name + " " + BedKeyOf(target_name) + "\n");

  auto strict = Session::Connect(o);
  ASSERT_FALSE(strict.ok());
  EXPECT_NE(strict.status().message().find("No ED25519 host key is known for " + h2->address),
            std::string::npos)
      << strict.status().message();
  EXPECT_NE(strict.status().message().find("add it to " + o.known_hosts_file +
                                           ", or set host_key_checking: accept-new"),
            std::string::npos)
      << strict.status().message();
  EXPECT_EQ(FingerprintsIn(o.known_hosts_file, h2->address), "");

  o.host_key_checking = HostKeyChecking::kAcceptNew;
  auto accept_new = Session::Connect(o);
  ASSERT_TRUE(accept_new.ok()) << accept_new.status().message();
  EXPECT_EQ(FingerprintsIn(o.known_hosts_file, h2->address),
            FingerprintsIn(bed.known_hosts, h2->address));
  o.host_key_checking = HostKeyChecking::kStrict;
  auto again = Session::Connect(o);
  EXPECT_TRUE(again.ok()) << again.status().message();
}

TEST(SessionProxyJump, AnUnknownTargetKeyIsRefusedWithItsFingerprint) {
  NeedJumpTarget();
  TempDir dir;
  const auto& bed = GetBed();
  SessionOptions o = JumpOptions(dir, "h2jump");
  const std::string target_name =
      "[" + bed.jump_target.address + "]:" + std::to_string(bed.jump_target.port);
  // Every key but the target's.
  std::string known = ReadFile(bed.known_hosts);
  size_t at = known.find(target_name + " ");
  ASSERT_NE(at, std::string::npos);
  known.erase(at, known.find('\n', at) + 1 - at);
  o.known_hosts_file = dir.File("known_hosts");
  WriteFile(o.known_hosts_file, known);
  auto session = Session::Connect(o);
  ASSERT_FALSE(session.ok());
  const std::string msg = session.status().message();
  std::string fingerprint = FingerprintsIn(bed.known_hosts, target_name);
  fingerprint = fingerprint.substr(0, fingerprint.find('\n'));
  EXPECT_EQ(msg.rfind(JumpTargetLabel() + ": unknown host key: the host presents ssh-ed25519 key " +
                          fingerprint + ",",
                      0),
            0u)
      << msg;
  EXPECT_NE(msg.find("has no key for " + target_name), std::string::npos) << msg;
  EXPECT_EQ(msg.find("ssh-keyscan"), std::string::npos) << msg;  // it cannot reach the target

  o.host_key_checking = HostKeyChecking::kAcceptNew;
  auto accept_new = Session::Connect(o);
  ASSERT_TRUE(accept_new.ok()) << accept_new.status().message();
  EXPECT_EQ(FingerprintsIn(o.known_hosts_file, target_name),
            FingerprintsIn(bed.known_hosts, target_name));
}

TEST(SessionProxyJump, TheTargetsOwnKeyIsStillCheckedByBarge) {
  NeedJumpTarget();
  TempDir dir;
  const auto& bed = GetBed();
  SessionOptions o = JumpOptions(dir, "h2jump");
  const std::string target_name =
      "[" + bed.jump_target.address + "]:" + std::to_string(bed.jump_target.port);
  o.known_hosts_file = dir.File("known_hosts");
  WriteFile(o.known_hosts_file, KnownHostsWithImpostorFor(dir, target_name));
  auto session = Session::Connect(o);
  ASSERT_FALSE(session.ok());
  const std::string msg = session.status().message();
  EXPECT_EQ(msg.rfind(JumpTargetLabel() + ": the host key has CHANGED", 0), 0u) << msg;
  EXPECT_NE(msg.find("ssh-keygen -R '" + target_name + "' -f " + o.known_hosts_file),
            std::string::npos)
      << msg;
}

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

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// Live processes whose command line mentions `text`.
int ProcessesMentioning(const std::string& text) {
  int count = 0;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return -1;
  while (dirent* e = readdir(proc)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::ifstream stat(std::string("/proc/") + e->d_name + "/stat");
    std::string pid, comm, state;
    stat >> pid >> comm >> state;
    if (state.empty() || state == "Z" || state == "X") continue;
    std::ifstream cmd(std::string("/proc/") + e->d_name + "/cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(cmd)), std::istreambuf_iterator<char>());
    if (cmdline.find(text) != std::string::npos) ++count;
  }
  closedir(proc);
  return count;
}

TEST(SessionProxyJump, LeavesNoFilesBehindAndClosingTheSessionEndsTheJumpClients) {
  NeedJumpTarget();
  TempDir dir;
  TempDir tmp;  // where the connection's private directory goes
  ScopedEnv env("TMPDIR", tmp.path());
  auto session = Session::Connect(JumpOptions(dir, "h1jump,h2jump"));
  ASSERT_TRUE(session.ok()) << session.status().message();
  // One ssh per hop, each started with -F TMP/barge-jump-*/config.
  EXPECT_EQ(ProcessesMentioning(tmp.path() + "/barge-jump-"), 2);
  // The directory is gone once connected.
  int code = -1;
  EXPECT_EQ(RunProgram({"/bin/ls", "-A", tmp.path()}, "", &code), "");
  session.value().reset();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (ProcessesMentioning(tmp.path() + "/barge-jump-") > 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(50));
  }
  EXPECT_EQ(ProcessesMentioning(tmp.path() + "/barge-jump-"), 0);
}

}  // namespace
}  // namespace barge::ssh
