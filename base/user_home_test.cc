// The home directory under its two rules, and the XDG variables taken only
// when absolute.
#include "base/user_home.h"

#include <gtest/gtest.h>
#include <pwd.h>
#include <unistd.h>

#include "tests/support/scoped_env.h"

namespace barge {
namespace {

using testing::ScopedEnv;

// The passwd entry's home of the user running the test, as getpwuid says.
std::optional<std::string> PasswdEntryHome() {
  const struct passwd* pw = getpwuid(getuid());
  if (pw == nullptr || pw->pw_dir == nullptr || pw->pw_dir[0] == '\0') return std::nullopt;
  return pw->pw_dir;
}

class UserHomeTest : public ::testing::Test {
 protected:
  void SetUp() override { UserHomeForTesting().clear(); }
  void TearDown() override { UserHomeForTesting().clear(); }
};

TEST_F(UserHomeTest, UnderTheOpenSshRuleThePasswdEntryWinsOverHome) {
  ScopedEnv home("HOME", "/elsewhere");
  UserHomeForTesting() = "/passwd-home";
  EXPECT_EQ(UserHome(), "/passwd-home");
  EXPECT_EQ(UserHome(HomeRule::kOpenSsh), "/passwd-home");
}

TEST_F(UserHomeTest, UnderTheXdgRuleHomeWinsOverThePasswdEntry) {
  ScopedEnv home("HOME", "/elsewhere");
  UserHomeForTesting() = "/passwd-home";
  EXPECT_EQ(UserHome(HomeRule::kXdg), "/elsewhere");
}

TEST_F(UserHomeTest, UnderTheXdgRuleAnUnsetOrEmptyHomeIsThePasswdEntrysHome) {
  const std::optional<std::string> passwd_home = PasswdEntryHome();
  if (!passwd_home) GTEST_SKIP() << "the user running the test has no passwd entry";
  {
    ScopedEnv home("HOME", std::nullopt);
    EXPECT_EQ(UserHome(HomeRule::kXdg), *passwd_home);
  }
  ScopedEnv home("HOME", "");
  EXPECT_EQ(UserHome(HomeRule::kXdg), *passwd_home);
}

TEST(XdgDirFromEnv, IsTheValueOnlyWhenItIsAnAbsolutePath) {
  {
    ScopedEnv xdg("XDG_STATE_HOME", "/x/state");
    EXPECT_EQ(XdgDirFromEnv("XDG_STATE_HOME"), "/x/state");
  }
  for (const char* ignored : {"relative/state", "./state", "~/state", ""}) {
    ScopedEnv xdg("XDG_STATE_HOME", ignored);
    EXPECT_EQ(XdgDirFromEnv("XDG_STATE_HOME"), "") << ignored;
  }
  ScopedEnv xdg("XDG_STATE_HOME", std::nullopt);
  EXPECT_EQ(XdgDirFromEnv("XDG_STATE_HOME"), "");
}

}  // namespace
}  // namespace barge
