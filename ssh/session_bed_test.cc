// Session against the real sshd of the test bed: host keys, ssh config,
// authentication, timeouts, parallel connects.
#include "ssh/session.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <regex>
#include <string>

#include <gtest/gtest.h>

#include "ssh/bed_test_util.h"

namespace barge::ssh {
namespace {

using barge::testing::GetBed;
using std::chrono::milliseconds;
using testing::BedLabel;
using testing::BedOptions;
using testing::Exists;
using testing::ReadFile;
using testing::RunProgram;
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
    EXPECT_NE(msg.find("line 3"), std::string::npos) << msg;
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
  EXPECT_NE(session.status().message().find("line 1"), std::string::npos)
      << session.status().message();
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
  auto results = ConnectAll(all, 4);
  ASSERT_EQ(results.size(), all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    bool expect_ok = all[i].known_hosts_file == good.known_hosts_file;
    EXPECT_EQ(results[i].ok(), expect_ok) << i << ": " << results[i].status().message();
    if (!expect_ok) {
      EXPECT_NE(results[i].status().message().find("unknown host key"), std::string::npos);
    }
  }
  EXPECT_TRUE(ConnectAll({}, 4).empty());
}

}  // namespace
}  // namespace barge::ssh
