// A main() for a fuzz target built without libFuzzer: runs the target's
// LLVMFuzzerTestOneInput once on every input named on the command line, in
// the order given. A directory stands for the regular files in it (not
// recursively), in name order.
//
// Usage: NAME_replay PATH...
// Exit status 0 when every input ran, 1 when a path cannot be read or names
// no input at all; a failing input aborts inside the target, after its
// path was printed. Each input sits in a buffer of exactly its size, so a
// sanitizer build catches reads past its end as libFuzzer would.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

namespace fs = std::filesystem;

// The inputs `path` names, or false when it cannot be listed.
bool Inputs(const fs::path& path, std::vector<fs::path>* out) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    out->push_back(path);
    return true;
  }
  std::vector<fs::path> files;
  for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file(ec)) files.push_back(it->path());
  }
  if (ec) {
    std::fprintf(stderr, "replay: cannot list %s: %s\n", path.c_str(), ec.message().c_str());
    return false;
  }
  std::sort(files.begin(), files.end());
  out->insert(out->end(), files.begin(), files.end());
  return true;
}

bool RunOne(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "replay: cannot read %s\n", path.c_str());
    return false;
  }
  const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (in.bad()) {
    std::fprintf(stderr, "replay: cannot read %s\n", path.c_str());
    return false;
  }
  std::fprintf(stderr, "replay: %s (%zu bytes)\n", path.c_str(), bytes.size());
  auto copy = std::make_unique<uint8_t[]>(bytes.size());
  std::copy(bytes.begin(), bytes.end(), copy.get());
  LLVMFuzzerTestOneInput(copy.get(), bytes.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE_OR_DIRECTORY...\n", argv[0]);
    return 1;
  }
  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    if (!Inputs(argv[i], &inputs)) return 1;
  }
  if (inputs.empty()) {
    std::fprintf(stderr, "replay: no inputs in the paths given\n");
    return 1;
  }
  for (const fs::path& path : inputs) {
    if (!RunOne(path)) return 1;
  }
  std::printf("replay: %zu inputs ran cleanly\n", inputs.size());
  return 0;
}
