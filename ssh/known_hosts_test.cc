#include "ssh/known_hosts.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/support/ssh_test_util.h"

namespace barge::ssh {
namespace {

using testing::TempDir;
using testing::WriteFile;

// Two ed25519 keys made with ssh-keygen, and their fingerprints as
// `ssh-keygen -l` prints them.
constexpr const char* kKeyA =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIInZcI7Q6ELnUp0l3DMmbYk7gfeDygMlDGtrNDHDNiUY";
constexpr const char* kFingerprintA = "SHA256:upEXaCf+GeI0+1akHYVpK9AdYQFEY2B6zIGp8HmWvFI";
constexpr const char* kKeyB =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAICfzueVJ/X/jtidLM+3eRG7yNNTG5Czo15o7OpNrcY2P";
constexpr const char* kFingerprintB = "SHA256:4ZPsYFsCkB+A88YArLwiCWHYGxcIu8oljw+cWFMLn1w";

// `ssh-keygen -H` of "[127.0.0.2]:2222 A" and "h1,10.77.0.2 A": one hashed
// line per name.
constexpr const char* kHashedPort2222 =
    "|1|38ToKsSBc0UA8jLJ4ekph9m/j9A=|isecpWH4Su9hp4y2pdasEyxhcZ4= ";
constexpr const char* kHashedH1 = "|1|yeutOtjKY3+j/gPfiXAtLsyXED0=|MefLscxI0Dxc8C6PRA75c5k6juU= ";
constexpr const char* kHashed10_77_0_2 =
    "|1|P0YjzYpuAbVj5GnnNI9G1u6rHfM=|BPi4loFhZNCYZIz+megCQ06ty8o= ";

TEST(KnownHostsName, IsTheBareHostOnPort22AndBracketedWithThePortOtherwise) {
  EXPECT_EQ(KnownHostsName("10.0.0.5", 22), "10.0.0.5");
  EXPECT_EQ(KnownHostsName("10.0.0.5", 2222), "[10.0.0.5]:2222");
  EXPECT_EQ(KnownHostsName("gpu1.example", 2022), "[gpu1.example]:2022");
}

TEST(FindKnownHostsLines, FindsEveryLineNamingTheHostWithItsNumberTypeAndFingerprint) {
  TempDir dir;
  const std::string file = dir.File("known_hosts");
  WriteFile(file, std::string("# comment\n\nother ") + kKeyB + "\n" + "h1,10.77.0.2 " + kKeyA +
                      "\n" + "@revoked 10.77.0.2 " + kKeyB + "\n" + "10.77.0.2 " + kKeyB + "\n");
  auto lines = FindKnownHostsLines(file, "10.77.0.2");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].file, file);
  EXPECT_EQ(lines[0].line_number, 4);
  EXPECT_EQ(lines[0].key_type, "ssh-ed25519");
  EXPECT_EQ(lines[0].fingerprint, kFingerprintA);
  EXPECT_EQ(lines[1].line_number, 6);
  EXPECT_EQ(lines[1].fingerprint, kFingerprintB);

  ASSERT_EQ(FindKnownHostsLines(file, "h1").size(), 1u);
  EXPECT_TRUE(FindKnownHostsLines(file, "h2").empty());
}

TEST(FindKnownHostsLines, APlainHostLineDoesNotVouchForAnotherPort) {
  TempDir dir;
  const std::string file = dir.File("known_hosts");
  WriteFile(file, std::string("127.0.0.2 ") + kKeyA + "\n[127.0.0.2]:2222 " + kKeyB + "\n");
  auto on_2222 = FindKnownHostsLines(file, KnownHostsName("127.0.0.2", 2222));
  ASSERT_EQ(on_2222.size(), 1u);
  EXPECT_EQ(on_2222[0].line_number, 2);
  EXPECT_EQ(on_2222[0].fingerprint, kFingerprintB);
  EXPECT_TRUE(FindKnownHostsLines(file, KnownHostsName("127.0.0.2", 2022)).empty());
  auto on_22 = FindKnownHostsLines(file, KnownHostsName("127.0.0.2", 22));
  ASSERT_EQ(on_22.size(), 1u);
  EXPECT_EQ(on_22[0].line_number, 1);
}

TEST(FindKnownHostsLines, MatchesHashedEntriesIncludingBracketedPorts) {
  TempDir dir;
  const std::string file = dir.File("known_hosts");
  WriteFile(file, std::string("# hashed by ssh-keygen -H\n") + kHashedPort2222 + kKeyA + "\n" +
                      kHashedH1 + kKeyA + "\n" + kHashed10_77_0_2 + kKeyA + "\n");
  auto port = FindKnownHostsLines(file, "[127.0.0.2]:2222");
  ASSERT_EQ(port.size(), 1u);
  EXPECT_EQ(port[0].line_number, 2);
  EXPECT_EQ(port[0].fingerprint, kFingerprintA);
  auto h1 = FindKnownHostsLines(file, "h1");
  ASSERT_EQ(h1.size(), 1u);
  EXPECT_EQ(h1[0].line_number, 3);
  auto address = FindKnownHostsLines(file, "10.77.0.2");
  ASSERT_EQ(address.size(), 1u);
  EXPECT_EQ(address[0].line_number, 4);
  // The same address on another port, or another name, is not a match.
  EXPECT_TRUE(FindKnownHostsLines(file, "127.0.0.2").empty());
  EXPECT_TRUE(FindKnownHostsLines(file, "[127.0.0.2]:2223").empty());
  EXPECT_TRUE(FindKnownHostsLines(file, "h2").empty());
}

TEST(FindKnownHostsLines, AMissingFileHasNoLines) {
  TempDir dir;
  EXPECT_TRUE(FindKnownHostsLines(dir.File("nope"), "h1").empty());
}

TEST(ChangedHostKeyMessage, GivesBothFingerprintsTheFileAndLineAndTheCommandToRemoveIt) {
  std::vector<KnownHostsLine> old = {{"/home/u/.ssh/known_hosts", 7, "ssh-ed25519", kFingerprintA}};
  const std::string msg = ChangedHostKeyMessage("[10.0.0.5]:2222", "ssh-ed25519", kFingerprintB,
                                                old, "/home/u/.ssh/known_hosts");
  EXPECT_EQ(msg.rfind("the host key has CHANGED: ", 0), 0u) << msg;
  EXPECT_NE(msg.find("presents ssh-ed25519 key " + std::string(kFingerprintB)), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("/home/u/.ssh/known_hosts:7 holds ssh-ed25519 key " +
                     std::string(kFingerprintA) + " for [10.0.0.5]:2222"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("(ssh-keygen -R '[10.0.0.5]:2222' -f /home/u/.ssh/known_hosts)"),
            std::string::npos)
      << msg;
}

TEST(ChangedHostKeyMessage, NamesEveryOldLineInEveryFileButNotALineWithTheNewKey) {
  std::vector<KnownHostsLine> old = {
      {"/u/known hosts", 2, "ssh-ed25519", kFingerprintA},
      {"/u/known hosts", 5, "ssh-ed25519", kFingerprintB},  // the presented key
      {"/etc/ssh/ssh_known_hosts", 9, "ssh-rsa", "SHA256:rsa"},
  };
  const std::string msg =
      ChangedHostKeyMessage("h1", "ssh-ed25519", kFingerprintB, old, "/u/known hosts");
  EXPECT_NE(msg.find("/u/known hosts:2 holds"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("/u/known hosts:5"), std::string::npos) << msg;
  EXPECT_NE(msg.find(", and /etc/ssh/ssh_known_hosts:9 holds ssh-rsa key SHA256:rsa for h1"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("(ssh-keygen -R h1 -f '/u/known hosts'; ssh-keygen -R h1 -f "
                     "/etc/ssh/ssh_known_hosts)"),
            std::string::npos)
      << msg;
}

TEST(ChangedHostKeyMessage, NamesTheKnownHostsFileWhenNoOldLineWasFound) {
  const std::string msg = ChangedHostKeyMessage("h1", "ssh-ed25519", kFingerprintB, {}, "/u/kh");
  EXPECT_NE(msg.find("but /u/kh holds another key for h1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("ssh-keygen -R h1 -f /u/kh"), std::string::npos) << msg;
}

// OpenSSH 9.2's stderr for a changed key under StrictHostKeyChecking=yes.
constexpr const char* kOpenSshChangedKey =
    "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\r\n"
    "@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\r\n"
    "@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\r\n"
    "IT IS POSSIBLE THAT SOMEONE IS DOING SOMETHING NASTY!\r\n"
    "Someone could be eavesdropping on you right now (man-in-the-middle attack)!\r\n"
    "It is also possible that a host key has just been changed.\r\n"
    "The fingerprint for the ED25519 key sent by the remote host is\n"
    "SHA256:e/WwT2lYEL9H3HOxtluzxRaOnOdmcYTaApgdHZb2qng.\r\n"
    "Please contact your system administrator.\r\n"
    "Add correct host key in /u/known hosts to get rid of this message.\r\n"
    "Offending ED25519 key in /u/known hosts:1\r\n"
    "Offending ED25519 key in /u/known hosts:4\r\n"
    "Offending RSA key in /etc/ssh/ssh_known_hosts:2\r\n"
    "  remove with:\r\n"
    "  ssh-keygen -f \"/u/known hosts\" -R \"[127.0.0.2]:2222\"\r\n"
    "Host key for [127.0.0.2]:2222 has changed and you have requested strict checking.\r\n"
    "Host key verification failed.\r\n";

TEST(ParseOpenSshChangedKey, ReadsTheHostTheNewKeyAndTheFilesOfTheOldOne) {
  auto changed = ParseOpenSshChangedKey(kOpenSshChangedKey);
  ASSERT_TRUE(changed.has_value());
  EXPECT_EQ(changed->name, "[127.0.0.2]:2222");
  EXPECT_EQ(changed->key_type, "ED25519");
  EXPECT_EQ(changed->fingerprint, "SHA256:e/WwT2lYEL9H3HOxtluzxRaOnOdmcYTaApgdHZb2qng");
  EXPECT_EQ(changed->files,
            (std::vector<std::string>{"/u/known hosts", "/etc/ssh/ssh_known_hosts"}));
}

TEST(ParseOpenSshChangedKey, FindsNothingInOtherErrors) {
  EXPECT_FALSE(ParseOpenSshChangedKey("").has_value());
  EXPECT_FALSE(ParseOpenSshChangedKey(
                   "No ED25519 host key is known for 10.77.0.3 and you have requested strict "
                   "checking.\r\nHost key verification failed.\r\n")
                   .has_value());
  EXPECT_FALSE(
      ParseOpenSshChangedKey("ssh: connect to host 10.77.0.9 port 22: Connection timed out\r\n")
          .has_value());
}

}  // namespace
}  // namespace barge::ssh
