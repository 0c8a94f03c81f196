// ShellJoinSharingLists: the line a real shell runs gives the command exactly
// the argv of the plain ShellJoin line, with each long list spelled once.
#include "runner/remote/shared_lists.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "ssh/quote.h"

namespace barge::runner {
namespace {

// The bytes `shell` prints when it runs `line` (a script file, so the line
// is not quoted again), or "<failed>".
std::string RunShell(const std::string& shell, const std::string& line) {
  char path[] = "/tmp/barge-shared-lists-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) return "<failed>";
  close(fd);
  std::ofstream(path) << line << "\n";
  std::string out;
  if (FILE* p = popen((shell + " " + path).c_str(), "r")) {
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    if (pclose(p) != 0) out = "<failed>";
  }
  unlink(path);
  return out;
}

// printf prints every argument in <>: the argv as the command sees it.
std::vector<std::string> Printing(std::vector<std::string> args) {
  std::vector<std::string> argv = {"printf", "<%s>"};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

// The env of a job of n nodes as cluster/rendezvous.cc writes it.
std::vector<std::string> RendezvousArgs(const std::vector<std::string>& nodes) {
  std::string comma, lines, json = "[";
  for (size_t i = 0; i < nodes.size(); ++i) {
    comma += (i ? "," : "") + nodes[i];
    lines += (i ? "\n" : "") + nodes[i];
    json += (i ? ",\"" : "\"") + nodes[i] + "\"";
  }
  json += "]";
  return {"run", "-d", "-e", "BARGE_NODE_IPS=" + comma, "-e", "NODES=" + comma,
          "-e", "SKYPILOT_NODE_IPS=" + lines, "-e", "DSTACK_NODES_IPS=" + lines,
          "-e", "SM_HOSTS=" + json, "-e", "BARGE_NODE_RANK=3", "img", "sh", "-c", "echo $NODES"};
}

std::vector<std::string> Addresses(int n) {
  std::vector<std::string> out;
  for (int i = 1; i <= n; ++i) out.push_back("127.1." + std::to_string((i - 1) / 200) + "." + std::to_string((i - 1) % 200 + 1));
  return out;
}

TEST(ShellJoinSharingLists, AThousandNodeListsReachTheCommandByteExactInDashAndBash) {
  const std::vector<std::string> argv = Printing(RendezvousArgs(Addresses(1000)));
  const std::string plain = ssh::ShellJoin(argv);
  const std::string shared = ShellJoinSharingLists(argv);
  const std::string expected = RunShell("sh", plain);
  ASSERT_NE(expected, "<failed>");
  EXPECT_EQ(RunShell("sh", shared), expected);
  if (access("/bin/bash", X_OK) == 0) {
    EXPECT_EQ(RunShell("/bin/bash", shared), expected);
  }
}

TEST(ShellJoinSharingLists, AThousandNodesLineIsUnderAQuarterOfThePlainOneAndUnder16KiB) {
  const std::vector<std::string> argv = Printing(RendezvousArgs(Addresses(1000)));
  const std::string plain = ssh::ShellJoin(argv);
  const std::string shared = ShellJoinSharingLists(argv);
  EXPECT_LT(shared.size() * 4, plain.size()) << shared.size() << " vs " << plain.size();
  EXPECT_LT(shared.size(), 16u * 1024) << shared.size();
}

TEST(ShellJoinSharingLists, ShortValuesStayInlineAsShellJoinWritesThem) {
  const std::vector<std::string> argv = Printing(RendezvousArgs(Addresses(3)));
  EXPECT_EQ(ShellJoinSharingLists(argv), ssh::ShellJoin(argv));
}

TEST(ShellJoinSharingLists, AListSpelledOnceStaysInline) {
  std::string list;
  for (const auto& a : Addresses(200)) list += (list.empty() ? "" : ",") + a;
  const std::vector<std::string> argv = Printing({"run", "-e", "A=" + list, "img"});
  EXPECT_EQ(ShellJoinSharingLists(argv), ssh::ShellJoin(argv));
}

TEST(ShellJoinSharingLists, ElementsWithGlobsSpacesAndDollarsAndRepeatedNonListsStayExact) {
  std::vector<std::string> nodes;
  for (int i = 0; i < 300; ++i) nodes.push_back(i % 3 == 0 ? "h*" + std::to_string(i) : i % 3 == 1 ? "a b $HOME " + std::to_string(i) : "'q'" + std::to_string(i));
  std::vector<std::string> args = RendezvousArgs(nodes);
  // Not a list (a quote inside), twice: shared as a plain variable.
  const std::string odd(1500, '"');
  args.insert(args.begin() + 2, {"-e", "X=" + odd, "-e", "Y=" + odd});
  const std::vector<std::string> argv = Printing(args);
  const std::string shared = ShellJoinSharingLists(argv);
  EXPECT_NE(shared.find("barge_v1="), std::string::npos);
  EXPECT_NE(shared.find("barge_j1"), std::string::npos);
  const std::string expected = RunShell("sh", ssh::ShellJoin(argv));
  ASSERT_NE(expected, "<failed>");
  EXPECT_EQ(RunShell("sh", shared), expected);
}

}  // namespace
}  // namespace barge::runner
