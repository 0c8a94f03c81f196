// Which words of a command a shell runs as code, and the job file refusing
// {array.COLUMN} there (issue #29: a row's value is data, never code).
#include "runner/jobfile/shell_text.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runner/jobfile/job_file.h"
#include "tests/support/job_errors.h"

namespace barge::runner {
namespace {

using Argv = std::vector<std::string>;

TEST(ShellScriptArgument, FindsTheScriptOfEveryShellAfterEveryPrefix) {
  EXPECT_EQ(ShellScriptArgument(Argv{"sh", "-c", "x"}), 2u);
  EXPECT_EQ(ShellScriptArgument(Argv{"/bin/bash", "-lc", "x"}), 2u);
  EXPECT_EQ(ShellScriptArgument(Argv{"sh", "-e", "-c", "x", "sh", "y"}), 3u);
  EXPECT_EQ(ShellScriptArgument(Argv{"dash", "-ec", "x"}), 2u);
  EXPECT_EQ(ShellScriptArgument(Argv{"zsh", "-c", "x"}), 2u);
  EXPECT_EQ(ShellScriptArgument(Argv{"ksh", "-c", "x"}), 2u);
  EXPECT_EQ(ShellScriptArgument(Argv{"ash", "-c", "x"}), 2u);
  EXPECT_EQ(ShellScriptArgument(Argv{"busybox", "sh", "-c", "x"}), 3u);
  EXPECT_EQ(ShellScriptArgument(Argv{"env", "-i", "A=1", "B=2", "bash", "-c", "x"}), 6u);
  EXPECT_EQ(ShellScriptArgument(Argv{"/usr/bin/env", "bash", "-c", "x"}), 3u);
  EXPECT_EQ(ShellScriptArgument(Argv{"exec", "sh", "-c", "x"}), 3u);
  EXPECT_EQ(ShellScriptArgument(Argv{"nice", "-n", "5", "sh", "-c", "x"}), 5u);
  EXPECT_EQ(ShellScriptArgument(Argv{"timeout", "5", "sh", "-c", "x"}), 4u);
  EXPECT_EQ(ShellScriptArgument(Argv{"timeout", "-s", "KILL", "5m", "env", "A=1", "sh", "-c", "x"}), 8u);
  EXPECT_EQ(ShellScriptArgument(Argv{"bash", "-o", "pipefail", "-c", "x"}), 4u);
  EXPECT_EQ(ShellScriptArgument(Argv{"bash", "+e", "-c", "x"}), 3u);
}

TEST(ShellScriptArgument, ProgramsThatAreNotShellsAndScriptFilesHaveNone) {
  EXPECT_EQ(ShellScriptArgument(Argv{"python3", "train.py", "--lr", "x"}), std::nullopt);
  EXPECT_EQ(ShellScriptArgument(Argv{"sh", "run.sh", "-c", "x"}), std::nullopt);  // a script file's arguments
  EXPECT_EQ(ShellScriptArgument(Argv{"sh", "-c"}), std::nullopt);
  EXPECT_EQ(ShellScriptArgument(Argv{"bash", "--norc", "run.sh"}), std::nullopt);
  EXPECT_EQ(ShellScriptArgument(Argv{"shell", "-c", "x"}), std::nullopt);
}

std::vector<std::string> Errors(const std::string& yaml) {
  return barge::testing::ErrorLines(ParseJobText(yaml, "job.yaml", "/tmp"));
}

TEST(ArrayPlaceholders, AStringCommandWithARowValueIsRefusedAtItsLineWithTheSafeForms) {
  std::vector<std::string> errors = Errors("name: x\nimage: img\ncommand: 'echo \"{array.note}\"'\n");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].rfind("job.yaml:3:", 0), 0u) << errors[0];
  EXPECT_NE(errors[0].find("command: {array.note} is inside text a shell runs as code"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("\"$note\""), std::string::npos) << errors[0];
}

TEST(ArrayPlaceholders, EveryShellFormIsRefusedAndEveryDataFormAccepted) {
  // Refused at the command's own line and key, saying why and naming the
  // safe forms.
  const std::string why = "{array.x} is inside text a shell runs as code";
  for (const char* bad : {"[bash, -lc, 'echo {array.x}']", "[sh, -e, -c, 'echo {array.x}']",
                          "[env, A=1, bash, -c, 'echo {array.x}']", "[timeout, '5', sh, -c, '{array.x}']",
                          "[busybox, sh, -c, 'echo {array.x}']", "[nice, -n, '5', dash, -ec, 'echo {array.x}']"}) {
    const std::vector<std::string> top = Errors(std::string("name: x\nimage: img\ncommand: ") + bad + "\n");
    ASSERT_EQ(top.size(), 1u) << bad;
    EXPECT_EQ(top[0].rfind("job.yaml:3:10: command: " + why, 0), 0u) << bad << "\n" << top[0];
    EXPECT_NE(top[0].find("\"$x\""), std::string::npos) << top[0];
    const std::vector<std::string> role =
        Errors(std::string("name: x\nimage: img\nroles:\n  worker: {command: ") + bad + "}\n");
    ASSERT_EQ(role.size(), 1u) << bad;
    EXPECT_EQ(role[0].rfind("job.yaml:4:21: roles.worker.command: " + why, 0), 0u) << bad << "\n" << role[0];
    EXPECT_NE(role[0].find("\"$x\""), std::string::npos) << role[0];
  }
  for (const char* good : {"[python3, train.py, '--note={array.x}']", "[sh, -c, 'echo \"$1\"', sh, '{array.x}']",
                           "[sh, run.sh, '{array.x}']", "'echo \"$x\"'"}) {
    EXPECT_EQ(Errors(std::string("name: x\nimage: img\ncommand: ") + good + "\n"), std::vector<std::string>{}) << good;
  }
}

// Issue #40: forms that bash and dash run as code, and wrappers the check
// need not know. Each row: the exec-form command (YAML) and the start of
// the refusal after "command: ".
TEST(ArrayPlaceholders, EveryFormThatRunsTheValueAsCodeIsRefusedWhateverTheWrapper) {
  const std::pair<const char*, const char*> kRefused[] = {
      {"[bash, -c, -e, 'echo {array.x}']", "{array.x} is an argument that the option -e before it reads as code"},
      {"[sh, -c, --, 'echo {array.x}']", "{array.x} is an argument that the option -c before it reads as code"},
      {"[bash, --rcfile, /dev/null, -c, 'echo {array.x}']",
       "{array.x} is an argument that the option -c before it reads as code"},
      {"[env, -u, FOO, sh, -c, 'echo {array.x}']", "{array.x} is an argument that the option -c before it reads as code"},
      {"[env, -S, \"sh -c 'echo {array.x}'\"]", "{array.x} is an argument that the option -S before it reads as code"},
      {"[nohup, sh, -c, 'echo {array.x}']", "{array.x} is an argument that the option -c before it reads as code"},
      {"[stdbuf, -oL, bash, -c, 'echo {array.x}']",
       "{array.x} is an argument that the option -c before it reads as code"},
      {"[tini, --, sh, -c, 'echo {array.x}']", "{array.x} is an argument that the option -c before it reads as code"},
      {"[sudo, -u, nobody, bash, -c, '{array.x}']",
       "{array.x} is an argument that the option -c before it reads as code"},
      {"[mpirun, -np, '4', bash, -c, 'run {array.x}']",
       "{array.x} is an argument that the option -c before it reads as code"},
      {"[python3, -c, 'print({array.x})']", "{array.x} is an argument that the option -c before it reads as code"},
      {"[python3, -c, '{array.x}']", "{array.x} is an argument that the option -c before it reads as code"},
      {"[perl, -e, '{array.x}']", "{array.x} is an argument that the option -e before it reads as code"},
      {"[node, --eval, '{array.x}']", "{array.x} is an argument that the option --eval before it reads as code"},
      {"[node, '--eval={array.x}']", "{array.x} is inside an argument"},
      {"['{array.x}', --help]", "{array.x} is the program itself"},
      {"[sh, '{array.x}']", "{array.x} is the script file sh runs"},
      {"[python3, -u, '{array.x}', --lr, '1']", "{array.x} is the script file python3 runs"},
      {"[python3, train.py, 'x{array.x}']", "{array.x} is inside an argument"},
      {"[python3, train.py, '-lr={array.x}']", "{array.x} is inside an argument"},
  };
  for (const auto& [bad, why] : kRefused) {
    std::vector<std::string> errors = Errors(std::string("name: x\nimage: img\ncommand: ") + bad + "\n");
    ASSERT_EQ(errors.size(), 1u) << bad;
    EXPECT_EQ(errors[0].find(std::string("command: ") + why), errors[0].find("command: ")) << bad << "\n"
                                                                                           << errors[0];
    EXPECT_NE(errors[0].find("\"$x\""), std::string::npos) << errors[0];
  }
  for (const char* good : {"[python3, train.py, '{array.x}']", "[python3, train.py, --lr, '{array.x}']",
                           "[python3, train.py, '--lr={array.x}', '--seed={array.x}']",
                           "[bash, -c, 'echo \"$1\"', bash, '{array.x}']", "[sh, -c, 'echo \"$0\"', '{array.x}']",
                           "[sudo, -u, nobody, python3, train.py, '{array.x}']",
                           "[mpirun, -np, '4', python3, train.py, '--lr={array.x}']", "[sleep, '{array.x}']"}) {
    EXPECT_EQ(Errors(std::string("name: x\nimage: img\ncommand: ") + good + "\n"), std::vector<std::string>{}) << good;
  }
}

TEST(ArrayPlaceholders, ATeardownHookWithARowValueIsRefused) {
  std::vector<std::string> errors =
      Errors("name: x\nimage: img\nhosts: [10.0.0.1]\nteardown: {host_command: 'rm -rf /data/{array.run}'}\n");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("teardown.host_command: {array.run} is inside text a shell runs as code"),
            std::string::npos)
      << errors[0];
}

}  // namespace
}  // namespace barge::runner
