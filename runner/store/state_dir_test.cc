// What barge keeps locally is for its user alone: directories 0700, files
// 0600, whatever the umask (the job store's own modes are tested in
// job_store_test.cc).
#include "runner/store/state_dir.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>

#include "base/user_home.h"
#include "runner/logs/log_sink.h"
#include "tests/support/scoped_env.h"

namespace barge::runner {
namespace {

namespace fs = std::filesystem;

int ModeOf(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return -1;
  return st.st_mode & 0777;
}

// A scratch directory and a permissive umask (0), both undone at the end.
class PermissiveUmask : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/barge-statedir-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    old_umask_ = umask(0);
  }
  void TearDown() override {
    umask(old_umask_);
    fs::remove_all(dir_);
  }
  std::string dir_;
  mode_t old_umask_ = 022;
};

TEST_F(PermissiveUmask, MakeDirsCreatesEveryNewDirectoryMode0700) {
  ASSERT_TRUE(MakeDirs(dir_ + "/state/runs/a1b2c3d4/artifacts/0").ok());
  for (const char* d : {"/state", "/state/runs", "/state/runs/a1b2c3d4",
                        "/state/runs/a1b2c3d4/artifacts", "/state/runs/a1b2c3d4/artifacts/0"}) {
    EXPECT_EQ(ModeOf(dir_ + d), 0700) << d;
  }
}

TEST_F(PermissiveUmask, LogFilesAreMode0600) {
  ASSERT_TRUE(MakeDirs(dir_ + "/runs/x").ok());
  Result<std::unique_ptr<LogSink>> sink =
      LogSink::Open(dir_ + "/runs/x", {{0, "head", "h1"}, {1, "worker", "h2"}}, false);
  ASSERT_TRUE(sink.ok()) << sink.status().message();
  (*sink)->Line(0, Stream::kStdout, "2026-01-01T00:00:00.000000000Z", "hello");
  EXPECT_EQ(ModeOf(dir_ + "/runs/x/0-h1.log"), 0600);
  EXPECT_EQ(ModeOf(dir_ + "/runs/x/1-h2.log"), 0600);
}

// The state directory's rules, each with the others' variables unset.
class StateDirTest : public ::testing::Test {
 protected:
  void SetUp() override { UserHomeForTesting() = "/passwd-home"; }
  void TearDown() override { UserHomeForTesting().clear(); }
  testing::ScopedEnv barge_home_{"BARGE_HOME", std::nullopt};
  testing::ScopedEnv xdg_state_home_{"XDG_STATE_HOME", std::nullopt};
  testing::ScopedEnv home_{"HOME", "/home/u"};
};

TEST_F(StateDirTest, BargeHomeWinsOverEverything) {
  testing::ScopedEnv barge_home("BARGE_HOME", "/b");
  testing::ScopedEnv xdg("XDG_STATE_HOME", "/x");
  EXPECT_EQ(StateDir(), "/b");
}

TEST_F(StateDirTest, AnAbsoluteXdgStateHomeHoldsBargeDirectory) {
  testing::ScopedEnv xdg("XDG_STATE_HOME", "/x/state");
  EXPECT_EQ(StateDir(), "/x/state/barge");
}

TEST_F(StateDirTest, ARelativeXdgStateHomeIsIgnoredAsTheXdgSpecSays) {
  testing::ScopedEnv xdg("XDG_STATE_HOME", "relative/state");
  EXPECT_EQ(StateDir(), "/home/u/.local/state/barge");
}

TEST_F(StateDirTest, TheDefaultIsUnderHomeNotThePasswdEntrysHome) {
  EXPECT_EQ(StateDir(), "/home/u/.local/state/barge");
}

TEST_F(StateDirTest, WithHomeUnsetTheDefaultIsUnderThePasswdEntrysHome) {
  testing::ScopedEnv home("HOME", std::nullopt);
  EXPECT_EQ(StateDir(), "/passwd-home/.local/state/barge");
}

TEST(RunDir, IsTheJobsIdUnderRunsInTheStateDirectory) {
  EXPECT_EQ(RunsDir("/state"), "/state/runs");
  EXPECT_EQ(RunDir("/state", "a1b2c3d4"), "/state/runs/a1b2c3d4");
}

}  // namespace
}  // namespace barge::runner
