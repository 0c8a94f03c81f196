#include "tests/support/bed_env.h"

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

namespace barge::testing {
namespace {

[[noreturn]] void Die(const std::string& why) {
  std::cerr << "test bed: " << why
            << " (bring it up with tests/bed/bed.sh up, or run ctest, "
               "whose 'bed' fixture does)\n";
  std::abort();
}

std::string Need(const std::map<std::string, std::string>& env, const std::string& key) {
  auto it = env.find(key);
  if (it == env.end() || it->second.empty()) Die("bed.env has no " + key);
  return it->second;
}

Bed Load() {
  const char* dir_env = std::getenv("BARGE_BED_DIR");
  std::string dir = dir_env && *dir_env ? dir_env : "/tmp/barge-bed";
  std::ifstream in(dir + "/bed.env");
  if (!in) Die("cannot read " + dir + "/bed.env");
  Bed bed;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string value = line.substr(eq + 1);
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"')
      value = value.substr(1, value.size() - 2);
    bed.raw[line.substr(0, eq)] = value;
  }
  bed.dir = dir;
  bed.user = Need(bed.raw, "BED_SSH_USER");
  bed.key = Need(bed.raw, "BED_SSH_KEY");
  bed.known_hosts = Need(bed.raw, "BED_KNOWN_HOSTS");
  bed.image = Need(bed.raw, "BED_IMAGE");
  bed.loopback.name = "lo";
  bed.loopback.address = Need(bed.raw, "BED_SSH_ADDR");
  bed.loopback.port = std::stoi(Need(bed.raw, "BED_SSH_PORT"));
  std::istringstream names(bed.raw["BED_HOSTS"]);
  std::string name;
  while (names >> name) {
    BedHost h;
    h.name = name;
    h.address = Need(bed.raw, "BED_HOST_" + name + "_ADDR");
    h.port = 22;
    if (bed.raw.count("BED_HOST_" + name + "_PORT")) h.port = std::stoi(bed.raw["BED_HOST_" + name + "_PORT"]);
    h.docker_host = Need(bed.raw, "BED_HOST_" + name + "_DOCKER_HOST");
    bed.hosts.push_back(h);
  }
  if (bed.raw.count("BED_JUMP_TARGET_ADDR")) {
    bed.jump_target.name = "jump";
    bed.jump_target.address = Need(bed.raw, "BED_JUMP_TARGET_ADDR");
    bed.jump_target.port = std::stoi(Need(bed.raw, "BED_JUMP_TARGET_PORT"));
    bed.jump_via = Need(bed.raw, "BED_JUMP_VIA");
    const std::string on = Need(bed.raw, "BED_JUMP_TARGET_HOST");
    bed.jump_target.docker_host = bed.raw["BED_HOST_" + on + "_DOCKER_HOST"];
  }
  return bed;
}

}  // namespace

const Bed& GetBed() {
  static const Bed bed = Load();
  return bed;
}

std::string RunShell(const std::string& command, int* exit_code) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  if (!p) {
    if (exit_code) *exit_code = -1;
    return out;
  }
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int st = pclose(p);
  if (exit_code) *exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return out;
}

}  // namespace barge::testing
