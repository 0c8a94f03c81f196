// The diagnostics bundles under a run directory (diagnostics_bundles.h).
#include "runner/store/diagnostics_bundles.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <tuple>

namespace barge::runner {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kAttemptPrefix = "attempt-";

// Where a file goes in the listing: index first, then ranks by rank, then
// hosts (and anything else) by name.
std::tuple<int, long, std::string> SortKey(const std::string& name) {
  if (name == "index.txt") return {0, 0, name};
  if (name.rfind("rank-", 0) == 0) return {1, std::strtol(name.c_str() + 5, nullptr, 10), name};
  return {2, 0, name};
}

// The value of index.txt's line "KEY: VALUE" (its first 64 KiB).
void ReadIndex(const fs::path& index, DiagnosticsBundle* b) {
  std::ifstream in(index);
  std::string line;
  size_t read = 0;
  while (read < (64u << 10) && std::getline(in, line)) {
    read += line.size() + 1;
    if (b->why.empty() && line.rfind("why: ", 0) == 0) b->why = line.substr(5);
    if (b->at.empty() && line.rfind("at: ", 0) == 0) b->at = line.substr(4);
  }
}

}  // namespace

std::string DiagnosticsDir(const std::string& run_dir) { return run_dir + "/diagnostics"; }

std::string DiagnosticsBundleDir(const std::string& run_dir, int attempt) {
  return DiagnosticsDir(run_dir) + "/" + std::string(kAttemptPrefix) + std::to_string(attempt);
}

bool IsBundleName(std::string_view name) {
  if (name.rfind(kAttemptPrefix, 0) != 0) return false;
  const std::string_view n = name.substr(kAttemptPrefix.size());
  if (n.empty() || n.size() > 9 || (n.size() > 1 && n[0] == '0')) return false;
  return std::all_of(n.begin(), n.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool IsBundleFileName(std::string_view name) {
  if (name.size() < 5 || name.size() > 255 || name[0] == '.' || name.substr(name.size() - 4) != ".txt") return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-';
  });
}

std::vector<DiagnosticsBundle> ListDiagnostics(const std::string& run_dir) {
  std::vector<DiagnosticsBundle> out;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(DiagnosticsDir(run_dir), ec)) {
    const std::string name = e.path().filename().string();
    if (!IsBundleName(name) || !e.is_directory(ec) || e.is_symlink(ec)) continue;
    DiagnosticsBundle b;
    b.attempt = std::atoi(name.c_str() + kAttemptPrefix.size());
    b.dir = e.path().string();
    for (const fs::directory_entry& f : fs::directory_iterator(e.path(), ec)) {
      const std::string file = f.path().filename().string();
      if (!IsBundleFileName(file) || !f.is_regular_file(ec) || f.is_symlink(ec)) continue;
      b.files.push_back({file, static_cast<uint64_t>(f.file_size(ec))});
    }
    std::sort(b.files.begin(), b.files.end(),
              [](const DiagnosticsFile& x, const DiagnosticsFile& y) { return SortKey(x.name) < SortKey(y.name); });
    ReadIndex(e.path() / "index.txt", &b);
    out.push_back(std::move(b));
  }
  std::sort(out.begin(), out.end(),
            [](const DiagnosticsBundle& x, const DiagnosticsBundle& y) { return x.attempt < y.attempt; });
  return out;
}

}  // namespace barge::runner
