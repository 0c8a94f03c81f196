// The diagnostics bundles a job's failed attempts left under its run
// directory (runner/controller/diagnostics.h writes them): where they are,
// and what each holds, for `barge show JOB --diagnostics` and the
// dashboard. Reads files only.
//   RUN_DIR/diagnostics/attempt-N/   N: the restarts before the attempt
//     index.txt                      "why: ..." and "at: ..." lines, the listing
//     rank-R-HOST.txt, host-HOST.txt
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace barge::runner {

// RUN_DIR/diagnostics, and the bundle of attempt `attempt` in it: the one
// place these paths are built.
std::string DiagnosticsDir(const std::string& run_dir);
std::string DiagnosticsBundleDir(const std::string& run_dir, int attempt);

struct DiagnosticsFile {
  std::string name;
  uint64_t bytes = 0;
};

struct DiagnosticsBundle {
  int attempt = 0;
  std::string dir;
  std::string why;  // index.txt's "why:" line ("" when it has none)
  std::string at;   // its "at:" line (UTC)
  // index.txt first, then the nodes' by rank, then the hosts'.
  std::vector<DiagnosticsFile> files;
};

// The bundles under `run_dir`, in attempt order; none where there is no
// diagnostics directory. What is not a bundle there (another name, a
// symlink) is skipped, as is what is not a bundle's file in one.
std::vector<DiagnosticsBundle> ListDiagnostics(const std::string& run_dir);

// "attempt-N" (N a number without leading zeros); and a bundle file's
// name: [A-Za-z0-9._-]+ ending in ".txt", not starting with '.'.
bool IsBundleName(std::string_view name);
bool IsBundleFileName(std::string_view name);

}  // namespace barge::runner
