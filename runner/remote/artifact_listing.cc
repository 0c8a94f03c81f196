#include "runner/remote/artifact_listing.h"

#include <sstream>

#include "ssh/quote.h"

namespace barge::runner {

namespace {

// Run by tar once per regular file: the file's bytes on stdin, its name and
// size in TAR_FILENAME and TAR_SIZE.
std::string PerFileScript(uint64_t part_size) {
  return "printf '%s %s' \"$TAR_SIZE\" \"$(printf %s \"$TAR_FILENAME\" | od -An -v -tx1 | tr -d ' \\n')\"; "
         "split -b " + std::to_string(part_size) + " --filter=md5sum - | while read -r sum rest; do "
         "printf ' %s' \"$sum\"; done; echo";
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

bool Unhex(std::string_view hex, std::string* out) {
  if (hex.size() % 2 != 0) return false;
  out->clear();
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = HexValue(hex[i]), lo = HexValue(hex[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>(hi * 16 + lo));
  }
  return true;
}

bool IsMd5(std::string_view s) {
  if (s.size() != 32) return false;
  for (char c : s) {
    if (HexValue(c) < 0) return false;
  }
  return true;
}

}  // namespace

std::string ArtifactListingCommand(const DockerCommands& docker, const std::string& name, const std::string& path,
                                   uint64_t part_size) {
  return docker.CopyOut(name, path) + " | tar -x -f - --to-command=" + ssh::ShellQuote(PerFileScript(part_size));
}

std::string ArtifactFileCommand(const DockerCommands& docker, const std::string& name, const std::string& path) {
  return docker.CopyOut(name, path) + " | tar -x -O -f -";
}

Result<std::vector<ListedFile>> ParseArtifactListing(std::string_view text) {
  std::vector<ListedFile> files;
  std::istringstream lines{std::string(text)};
  std::string line;
  int number = 0;
  while (std::getline(lines, line)) {
    ++number;
    if (line.empty()) continue;
    std::istringstream words(line);
    std::string size, hex, md5;
    ListedFile f;
    bool ok = static_cast<bool>(words >> size >> hex) && !size.empty() &&
              size.find_first_not_of("0123456789") == std::string::npos && Unhex(hex, &f.name) && !f.name.empty();
    while (ok && words >> md5) {
      ok = IsMd5(md5);
      f.part_md5s.push_back(md5);
    }
    if (!ok) {
      return Status::Error("the host's list of the artifact's files has a line " + std::to_string(number) +
                           " that is not 'SIZE NAME MD5...': " + line.substr(0, 200));
    }
    f.size = std::stoull(size);
    files.push_back(std::move(f));
  }
  return files;
}

}  // namespace barge::runner
