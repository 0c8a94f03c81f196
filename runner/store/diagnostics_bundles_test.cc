#include "runner/store/diagnostics_bundles.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

namespace barge::runner {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  TempDir() {
    char tmpl[] = "/tmp/barge-bundles-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string path;
};

void Write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

TEST(DiagnosticsBundles, BundlesAreListedInAttemptOrderWithTheirWhyAndTheirFilesIndexRanksHosts) {
  TempDir run;
  EXPECT_EQ(DiagnosticsBundleDir(run.path, 3), run.path + "/diagnostics/attempt-3");
  EXPECT_TRUE(ListDiagnostics(run.path).empty());
  const fs::path a10 = DiagnosticsBundleDir(run.path, 10);
  const fs::path a2 = DiagnosticsBundleDir(run.path, 2);
  Write(a10 / "index.txt", "diagnostics of job x\nwhy: hang: no progress\nat: 2026-12-07T02:00:00.000Z\n");
  Write(a10 / "rank-10-h2.txt", "0123456789");
  Write(a10 / "rank-2-h1.txt", "ab");
  Write(a10 / "host-h1.txt", "abc");
  Write(a10 / ".hidden.txt", "x");
  Write(a10 / "notes.log", "x");
  fs::create_symlink("/etc/passwd", a10 / "link.txt");
  Write(a2 / "index.txt", "why: node_failed: rank 1\n");
  Write(run.path + "/diagnostics/attempt-02/index.txt", "not a bundle's name");
  Write(run.path + "/diagnostics/other/index.txt", "not a bundle's name");
  fs::create_directory_symlink(a2, run.path + "/diagnostics/attempt-7");

  const std::vector<DiagnosticsBundle> b = ListDiagnostics(run.path);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].attempt, 2);
  EXPECT_EQ(b[0].why, "node_failed: rank 1");
  EXPECT_EQ(b[1].attempt, 10);
  EXPECT_EQ(b[1].dir, a10.string());
  EXPECT_EQ(b[1].why, "hang: no progress");
  EXPECT_EQ(b[1].at, "2026-12-07T02:00:00.000Z");
  std::vector<std::string> names;
  for (const DiagnosticsFile& f : b[1].files) names.push_back(f.name + " " + std::to_string(f.bytes));
  EXPECT_EQ(names, (std::vector<std::string>{"index.txt 73", "rank-2-h1.txt 2", "rank-10-h2.txt 10", "host-h1.txt 3"}));
}

TEST(DiagnosticsBundles, OnlyPlainNamesAreBundlesAndBundleFiles) {
  EXPECT_TRUE(IsBundleName("attempt-0"));
  EXPECT_TRUE(IsBundleName("attempt-12"));
  for (const char* bad : {"attempt-", "attempt-01", "attempt-1a", "attempt-../x", "x-1", "attempt-1234567890"}) {
    EXPECT_FALSE(IsBundleName(bad)) << bad;
  }
  EXPECT_TRUE(IsBundleFileName("rank-0-gpu-01.example.com.txt"));
  for (const char* bad : {"../index.txt", ".txt", ".x.txt", "a/b.txt", "index.log", "a b.txt", "%2e%2e.txt", ""}) {
    EXPECT_FALSE(IsBundleFileName(bad)) << bad;
  }
}

}  // namespace
}  // namespace barge::runner
