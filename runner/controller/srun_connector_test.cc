// slurm.transport: srun, its steps started on this machine (a job with no
// slurm.login) through a stand-in `srun` first on PATH: it writes its
// arguments to a file, one a line, as another user of the submit host
// could read them in /proc, and then runs the step's program here, with its
// stdin, as srun's one task would on the node.
#include "runner/controller/srun_connector.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "runner/remote/slurm.h"
#include "ssh/event_loop.h"
#include "ssh/quote.h"
#include "tests/support/ssh_test_util.h"

namespace barge::runner {
namespace {

using ssh::testing::Collected;
using ssh::testing::ReadFile;
using ssh::testing::RunToEnd;
using ssh::testing::TempDir;
using ssh::testing::WriteFile;

class SrunConnectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* path = std::getenv("PATH");
    path_ = path ? path : "/usr/bin:/bin";
    WriteFile(bin_.File("srun"), "#!/bin/sh\nprintf '%s\\n' \"$@\" >>" + ssh::ShellQuote(bin_.File("argv")) +
                                     "\nwhile [ $# -gt 0 ]; do case $1 in --*) shift ;; *) break ;; esac; done\n"
                                     "exec \"$@\"\n");
    ASSERT_EQ(chmod(bin_.File("srun").c_str(), 0755), 0);
    setenv("PATH", (bin_.path() + ":" + path_).c_str(), 1);
  }
  void TearDown() override { setenv("PATH", path_.c_str(), 1); }

  // The executor of node h2 of Slurm job 12.
  std::unique_ptr<ssh::Executor> NodeH2() {
    JobSpec spec;
    spec.slurm.emplace();
    spec.slurm->transport = SlurmSpec::Transport::kSrun;
    connector_ = std::make_unique<SrunHostConnector>(&loop_, spec, "12");
    HostTarget target;
    target.host.address = "10.0.0.2";
    target.host.vars["SLURM_NODE"] = "h2";
    auto connected = connector_->Connect({target}, 1);
    if (!connected[0].ok()) {
      ADD_FAILURE() << connected[0].status().message();
      return nullptr;
    }
    return std::move(connected[0]).value();
  }

  ssh::EventLoop loop_;
  TempDir bin_;
  std::string path_;
  std::unique_ptr<SrunHostConnector> connector_;
};

TEST_F(SrunConnectorTest, AStepsArgumentsHoldNoPartOfItsLineWhichComesFirstOnStdinAheadOfTheCallers) {
  std::unique_ptr<ssh::Executor> node = NodeH2();
  ASSERT_NE(node, nullptr);
  const std::string dir = "/tmp/barge-1a2b3c4d.abcdefghijkl";
  const std::string line = "printf '%s|' " + ssh::ShellQuote(dir) + " && cat && exit 7";
  Collected r = RunToEnd(loop_, *node, line, "the caller's stdin\nits second line\n");
  EXPECT_EQ(r.out, dir + "|the caller's stdin\nits second line\n");
  EXPECT_EQ(r.err, "");
  EXPECT_EQ(r.exit.code, 7);
  const std::string argv = ReadFile(bin_.File("argv"));
  EXPECT_EQ(argv, "--jobid=12\n--overlap\n--nodes=1\n--ntasks=1\n--nodelist=h2\n--chdir=/\n--unbuffered\n--quiet\n"
                  "/bin/sh\n-c\n" +
                      std::string(slurm::kSrunStepProgram) + "\n");
  EXPECT_EQ(argv.find("barge-1a2b3c4d"), std::string::npos);
}

TEST_F(SrunConnectorTest, ALineWithANulByteStartsNoStep) {
  std::unique_ptr<ssh::Executor> node = NodeH2();
  ASSERT_NE(node, nullptr);
  auto started = node->Start(std::string("echo a\0b", 8), {});
  ASSERT_FALSE(started.ok());
  EXPECT_NE(started.status().message().find("NUL byte"), std::string::npos) << started.status().message();
  EXPECT_FALSE(ssh::testing::Exists(bin_.File("argv")));
}

}  // namespace
}  // namespace barge::runner
