#include "ssh/keygen.h"

#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace barge::ssh {
namespace {

TEST(Keygen, MakesAnOpenSshEd25519KeyWhosePublicHalfSshKeygenDerivesAlike) {
  Result<KeyPair> pair = GenerateEd25519();
  ASSERT_TRUE(pair.ok()) << pair.status().message();
  EXPECT_EQ(pair->private_key.rfind("-----BEGIN OPENSSH PRIVATE KEY-----\n", 0), 0u);
  EXPECT_EQ(pair->private_key.back(), '\n');
  EXPECT_EQ(pair->public_key.rfind("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5", 0), 0u) << pair->public_key;
  // OpenSSH itself reads the private key and derives the same public key.
  char dir[] = "/tmp/barge-keygen-test.XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string file = std::string(dir) + "/key";
  {
    std::ofstream out(file);
    out << pair->private_key;
  }
  ASSERT_EQ(chmod(file.c_str(), 0600), 0);
  FILE* p = popen(("ssh-keygen -y -f " + file).c_str(), "r");
  ASSERT_NE(p, nullptr);
  char buf[512] = {};
  std::string derived;
  while (fgets(buf, sizeof buf, p)) derived += buf;
  const int rc = pclose(p);
  std::remove(file.c_str());
  rmdir(dir);
  ASSERT_EQ(rc, 0) << "ssh-keygen -y failed (is openssh-client installed?)";
  EXPECT_EQ(derived.substr(0, derived.find_last_not_of(" \n") + 1).substr(0, pair->public_key.size()),
            pair->public_key);
}

TEST(Keygen, TwoKeysDiffer) {
  Result<KeyPair> a = GenerateEd25519();
  Result<KeyPair> b = GenerateEd25519();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->public_key, b->public_key);
  EXPECT_NE(a->private_key, b->private_key);
}

}  // namespace
}  // namespace barge::ssh
