// Uploads on its own (uploads.h): given the job's context, the plan, the
// transfers and the MPI part, on scripted fake hosts
// (tests/support/part_world.h).
#include "runner/controller/uploads.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "runner/controller/job_state.h"
#include "runner/controller/mpi.h"
#include "runner/controller/transfers.h"
#include "runner/remote/docker_commands.h"
#include "runner/remote/watchdog.h"
#include "tests/support/part_world.h"
#include "tests/support/scoped_env.h"

namespace barge::runner {
namespace uploads_test {

using std::chrono::milliseconds;
using std::chrono::seconds;

// A local directory for the job file's workdir: and files:, made before
// the job file is parsed (which checks they exist) and removed after.
struct LocalDir {
  LocalDir()
      : path(std::filesystem::temp_directory_path() /
             ("barge-uploads-test-" + std::to_string(getpid()) + "-" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path / "src");
    std::ofstream(path / "src" / "train.py") << "print('hi')\n";
    std::ofstream(path / "labels.csv") << "a,b\n";
    std::ofstream(path / "vocab.txt") << "the\n";
  }
  ~LocalDir() { std::filesystem::remove_all(path); }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
  std::filesystem::path path;
};

struct UploadsWorld {
  explicit UploadsWorld(const std::string& extra)
      : token("BARGE_PART_TEST_TOKEN", std::string("tok-secret-value")),
        key("BARGE_PART_TEST_KEY", std::string("key-secret-value")),
        world(PartWorld::Yaml(extra)),
        transfers(&world.ctx()),
        mpi(&world.ctx(), &world.hosts(), &world.planner(), &transfers),
        uploads(&world.ctx(), &world.plan(), &transfers, &mpi) {}
  barge::testing::ScopedEnv token, key;  // read when the job file is parsed
  PartWorld world;
  internal::Transfers transfers;
  internal::Mpi mpi;
  internal::Uploads uploads;

  Status Upload() { return uploads.Upload(world.hosts().All()); }
  internal::HostState& h(size_t index) { return world.host_state(index); }
};

int Count(const std::vector<std::string>& lines, const std::string& part) {
  return static_cast<int>(std::count_if(lines.begin(), lines.end(), [&](const std::string& l) {
    return l.find(part) != std::string::npos;
  }));
}

constexpr char kSecrets[] =
    "secrets:\n  TOKEN: {env: BARGE_PART_TEST_TOKEN}\n  KEY: {env: BARGE_PART_TEST_KEY, as_env: false}\n";

TEST(Uploads, EachSecretAndTheEnvFileAreWrittenIntoEveryHostsSecretsDirectoryNeverOnALine) {
  UploadsWorld w(kSecrets);
  ASSERT_TRUE(w.world.Connect());
  Status s = w.Upload();
  ASSERT_TRUE(s.ok()) << s.message();
  for (size_t i = 0; i < 2; ++i) {
    const std::string& dir = w.h(i).job_dir;
    EXPECT_EQ(w.world.host(w.h(i).name).lines(),
              (std::vector<std::string>{WriteSecretCommand(dir, SecretsDir(dir) + "/TOKEN"),
                                        WriteSecretCommand(dir, SecretsDir(dir) + "/KEY"),
                                        WriteSecretCommand(dir, SecretEnvFile(dir))}));
  }
  for (const std::string& l : w.world.fake().all_lines()) EXPECT_EQ(l.find("secret-value"), std::string::npos) << l;
  EXPECT_TRUE(w.world.recorder().Said("secrets TOKEN, KEY written to 2 host(s) (" +
                                      SecretsDir(HostJobDirShown("abcd1234")) + ", mode 0600)"))
      << w.world.recorder().AllMessages();
  EXPECT_EQ(w.world.recorder().steps, (std::vector<std::string>{"upload began writing secrets (2)", "upload ended"}));
}

TEST(Uploads, SecretsNoneOfWhichIsGivenAsEnvironmentWriteNoEnvFile) {
  UploadsWorld w("secrets:\n  KEY: {env: BARGE_PART_TEST_KEY, as_env: false}\n");
  ASSERT_TRUE(w.world.Connect());
  ASSERT_TRUE(w.Upload().ok());
  EXPECT_EQ(w.world.host("h1").lines(),
            std::vector<std::string>{WriteSecretCommand(w.h(0).job_dir, SecretsDir(w.h(0).job_dir) + "/KEY")});
  EXPECT_EQ(Count(w.world.fake().all_lines(), ".env"), 0);
}

TEST(Uploads, AFailedSecretWriteStopsTheUploadBeforeAnythingIsShipped) {
  LocalDir local;
  UploadsWorld w(std::string(kSecrets) + "workdir: " + (local / "src") + "\n");
  ASSERT_TRUE(w.world.Connect());
  w.world.host("h2").On("/secrets/KEY", FakeReply{1, "", "mkdir: cannot create directory: Permission denied\n"});
  Status s = w.Upload();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "writing secrets failed:\n  h2: mkdir: cannot create directory: Permission denied");
  EXPECT_TRUE(w.world.fake().local().lines().empty());  // no workdir packed
  EXPECT_EQ(Count(w.world.fake().all_lines(), "tar -x"), 0);
  EXPECT_FALSE(w.world.recorder().Said("secrets TOKEN, KEY written")) << w.world.recorder().AllMessages();
}

TEST(Uploads, TheWorkdirIsPackedLocallyOnceThenStreamedToEveryHostAndItsTarRemoved) {
  LocalDir local;
  UploadsWorld w("workdir: {path: " + (local / "src") + ", exclude: ['*.log', '.git']}\n");
  ASSERT_TRUE(w.world.Connect());
  const std::string tar = (w.world.state_dir() / "tmp" / "workdir-abcd1234.tar").string();
  // The local tar "makes" the file (the fake runs nothing).
  w.world.fake().local().When("tar -C", [&] { std::ofstream(tar) << "tar bytes"; });
  Status s = w.Upload();
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(w.world.fake().local().lines(),
            std::vector<std::string>{"tar -C " + (local / "src") + " '--exclude=*.log' --exclude=.git -cf " + tar +
                                     " ."});
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(w.world.host(w.h(i).name).lines(), std::vector<std::string>{ReceiveWorkdirCommand(w.h(i).job_dir)});
  }
  EXPECT_FALSE(std::filesystem::exists(tar));
  EXPECT_TRUE(w.world.recorder().Said("shipping workdir " + (local / "src") + " to 2 host(s)"))
      << w.world.recorder().AllMessages();
  EXPECT_EQ(w.world.recorder().steps,
            (std::vector<std::string>{"upload began shipping the workdir (2)", "upload ended"}));
}

TEST(Uploads, AWorkdirThatCannotBePackedIsNamedAndNothingIsShipped) {
  LocalDir local;
  UploadsWorld w("workdir: " + (local / "src") + "\n");
  ASSERT_TRUE(w.world.Connect());
  w.world.fake().local().On("tar -C", FakeReply{2, "", "tar: ./big: Cannot open: Permission denied\n"});
  Status s = w.Upload();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "cannot pack workdir " + (local / "src") + ": tar: ./big: Cannot open: Permission denied");
  EXPECT_TRUE(w.world.host("h1").lines().empty());
  EXPECT_TRUE(w.world.host("h2").lines().empty());
}

TEST(Uploads, EachFileIsStreamedToItsIndexOnEveryHostAndAHostThatFailsItIsNamed) {
  LocalDir local;
  UploadsWorld w("files: [{from: " + (local / "labels.csv") + ", to: /data/labels.csv}, {from: " +
                 (local / "vocab.txt") + ", to: /data/vocab.txt}]\n");
  ASSERT_TRUE(w.world.Connect());
  ASSERT_TRUE(w.Upload().ok());
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(w.world.host(w.h(i).name).lines(),
              (std::vector<std::string>{ReceiveFileCommand(w.h(i).job_dir, 0),
                                        ReceiveFileCommand(w.h(i).job_dir, 1)}));
  }
  EXPECT_EQ(w.world.recorder().steps,
            (std::vector<std::string>{"upload began shipping " + (local / "labels.csv") + " (2)", "upload ended",
                                      "upload began shipping " + (local / "vocab.txt") + " (2)", "upload ended"}));

  UploadsWorld failing("files: [{from: " + (local / "labels.csv") + ", to: /data/labels.csv}, {from: " +
                       (local / "vocab.txt") + ", to: /data/vocab.txt}]\n");
  ASSERT_TRUE(failing.world.Connect());
  failing.world.host("h2").On("/files/0", FakeReply{1, "", "cat: write error: No space left on device\n"});
  Status s = failing.Upload();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "h2: shipping " + (local / "labels.csv") +
                             " failed: cat: write error: No space left on device");
  EXPECT_EQ(Count(failing.world.fake().all_lines(), "/files/1"), 0);  // the next file is not sent
}

TEST(Uploads, AJobWithNothingToUploadSendsNothing) {
  UploadsWorld w("");
  ASSERT_TRUE(w.world.Connect());
  ASSERT_TRUE(w.Upload().ok());
  EXPECT_TRUE(w.world.fake().all_lines().empty());
  EXPECT_TRUE(w.world.recorder().steps.empty());
}

}  // namespace uploads_test
}  // namespace barge::runner
