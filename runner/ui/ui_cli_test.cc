#include "runner/ui/ui_cli.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

namespace barge::runner::ui {
namespace {

TEST(UiCli, ListenTakesHostColonPortAndBracketedIpv6) {
  UiOptions o;
  ASSERT_TRUE(ParseListen("127.0.0.1:8765", &o).ok());
  EXPECT_EQ(o.listen_host, "127.0.0.1");
  EXPECT_EQ(o.port, 8765);
  ASSERT_TRUE(ParseListen("[::1]:0", &o).ok());
  EXPECT_EQ(o.listen_host, "::1");
  EXPECT_EQ(o.port, 0);
  ASSERT_TRUE(ParseListen("localhost:80", &o).ok());
  EXPECT_EQ(o.listen_host, "localhost");
  for (const char* bad : {"8765", "127.0.0.1", ":8765", "127.0.0.1:", "127.0.0.1:x",
                          "127.0.0.1:65536", "::1:8765", "[::1]8765", "h:123456"}) {
    Status s = ParseListen(bad, &o);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.message(), std::string("--listen: '") + bad +
                               "' is not HOST:PORT (e.g. 127.0.0.1:8765 or [::1]:8765)");
  }
}

TEST(UiCli, AnAddressInUseIsAClearError) {
  UiOptions o;
  o.listen_host = "127.0.0.1";
  o.port = 0;
  o.state_dir = "/nonexistent";
  auto first = UiServer::Start(o);
  ASSERT_TRUE(first.ok()) << first.status().message();
  o.port = (*first)->port();
  auto second = UiServer::Start(o);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().message(), "cannot listen on 127.0.0.1:" + std::to_string(o.port) +
                                           " (in use, or not an address of this machine)");
}

// The token never on the command line (issue #29): every user of the
// machine reads /proc/PID/cmdline.
TEST(UiToken, ATokenOnTheCommandLineIsRefusedNamingTheSafeWays) {
  Result<std::string> t = ResolveToken("0123456789abcdef0123456789abcdef", "");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("--token-file"), std::string::npos) << t.status().message();
  EXPECT_NE(t.status().message().find("BARGE_UI_TOKEN"), std::string::npos) << t.status().message();
}

TEST(UiToken, ATokenFileMustBeOursUnreadableByOthersAndLongEnough) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("barge-ui-token-test-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string file = (dir / "token").string();
  const std::string good(40, 'k');
  std::ofstream(file) << good << "\n";
  chmod(file.c_str(), 0600);
  Result<std::string> t = ResolveToken("", file);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(*t, good);

  chmod(file.c_str(), 0644);
  t = ResolveToken("", file);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("mode 644 lets other users read or change it"), std::string::npos)
      << t.status().message();

  std::ofstream(file) << "short\n";
  chmod(file.c_str(), 0600);
  t = ResolveToken("", file);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("at least 32 are needed"), std::string::npos) << t.status().message();

  // A link to a token file that passes every check is still refused, for
  // being a link (open's O_NOFOLLOW: ELOOP), and the refusal names it.
  std::ofstream(file) << good << "\n";
  chmod(file.c_str(), 0600);
  ASSERT_TRUE(ResolveToken("", file).ok());
  const std::string link = (dir / "link").string();
  std::filesystem::create_symlink(file, link);
  t = ResolveToken("", link);
  ASSERT_FALSE(t.ok()) << "a symlink is not followed";
  EXPECT_EQ(t.status().message(), "--token-file " + link + ": " + std::strerror(ELOOP));

  // A full-length 0600 token of another user (uid 65534, "nobody").
  if (geteuid() == 0) {
    ASSERT_EQ(chown(file.c_str(), 65534, 65534), 0) << std::strerror(errno);
    t = ResolveToken("", file);
    ASSERT_FALSE(t.ok()) << "a token file of another user is refused";
    EXPECT_EQ(t.status().message(), "--token-file " + file + ": owned by another user");
  } else {
    std::printf("not root: the owner refusal is not tried (it needs a file of another user)\n");
  }

  t = ResolveToken("", (dir / "missing").string());
  EXPECT_FALSE(t.ok());
  std::filesystem::remove_all(dir);
}

TEST(UiToken, TheEnvironmentGivesTheTokenWhenNoFileDoesAndNothingMeansARandomOne) {
  unsetenv("BARGE_UI_TOKEN");
  Result<std::string> t = ResolveToken("", "");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, "");
  setenv("BARGE_UI_TOKEN", std::string(33, 'e').c_str(), 1);
  t = ResolveToken("", "");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, std::string(33, 'e'));
  setenv("BARGE_UI_TOKEN", "tooshort", 1);
  EXPECT_FALSE(ResolveToken("", "").ok());
  unsetenv("BARGE_UI_TOKEN");
}


TEST(UiCli, TheHostsPageAsksTheHostsOfAJobFileOrOfHostsButNotBoth) {
  UiOptions o;
  ASSERT_TRUE(SetLiveHosts("", "", &o).ok());
  EXPECT_EQ(o.hosts_job_file, "");
  EXPECT_EQ(o.hosts_list, "");
  ASSERT_TRUE(SetLiveHosts("", "h1,h2", &o).ok());
  EXPECT_EQ(o.hosts_list, "h1,h2");
  Status both = SetLiveHosts("job.yaml", "h1", &o);
  ASSERT_FALSE(both.ok());
  EXPECT_EQ(both.message(), "--job-file and --hosts: the hosts page asks the hosts of one of them, not both");
  Status missing = SetLiveHosts("/nonexistent/job.yaml", "", &o);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.message(), "--job-file /nonexistent/job.yaml: not a readable file");
  const std::string dir = std::filesystem::temp_directory_path() / ("barge-ui-cli-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/job.yaml") << "name: x\n";
  const std::string cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir);
  UiOptions rel;
  Status ok = SetLiveHosts("job.yaml", "", &rel);
  std::filesystem::current_path(cwd);
  ASSERT_TRUE(ok.ok()) << ok.message();
  EXPECT_EQ(rel.hosts_job_file, dir + "/job.yaml");  // absolute: the child runs anywhere
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace barge::runner::ui
