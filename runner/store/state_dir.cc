#include "runner/store/state_dir.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>

#include "base/user_home.h"

namespace barge::runner {

std::string StateDir() {
  if (const char* b = std::getenv("BARGE_HOME"); b && *b) return b;
  if (const std::string x = XdgDirFromEnv("XDG_STATE_HOME"); !x.empty()) return x + "/barge";
  return UserHome(HomeRule::kXdg) + "/.local/state/barge";
}

std::string RunsDir(const std::string& state_dir) { return state_dir + "/runs"; }

std::string RunDir(const std::string& state_dir, const std::string& id) { return RunsDir(state_dir) + "/" + id; }

Status MakeDirs(const std::string& path) {
  if (path.empty()) return Status::Error("empty directory path");
  for (size_t pos = 1; pos <= path.size(); ++pos) {
    if (pos != path.size() && path[pos] != '/') continue;
    std::string prefix = path.substr(0, pos);
    if (mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) {
      return Status::Error("cannot create " + prefix + ": " + std::strerror(errno));
    }
  }
  return Status::Ok();
}

std::string NewJobId() {
  unsigned char bytes[4] = {0, 0, 0, 0};
  std::ifstream urandom("/dev/urandom", std::ios::binary);
  if (!urandom.read(reinterpret_cast<char*>(bytes), sizeof bytes)) {
    std::random_device rd;
    for (auto& b : bytes) b = static_cast<unsigned char>(rd());
  }
  static const char* kHex = "0123456789abcdef";
  std::string id;
  for (unsigned char b : bytes) {
    id += kHex[b >> 4];
    id += kHex[b & 15];
  }
  return id;
}

}  // namespace barge::runner
