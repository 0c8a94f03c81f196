// Every bed test program's shared hygiene (bed_hygiene.h).
#include "tests/support/bed_hygiene.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "ssh/quote.h"
#include "tests/support/bed_env.h"

namespace barge::testing {

std::string SuiteConfigHome() { return std::string(BARGE_SOURCE_DIR) + "/tests/support/xdg"; }

std::string ClearFaultRecords() {
  // "" is this machine's own engine (the bed's loopback host uses it too).
  std::vector<std::string> engines = {""};
  const char* dir = std::getenv("BARGE_BED_DIR");
  if (std::filesystem::exists(std::string(dir && *dir ? dir : "/tmp/barge-bed") + "/bed.env")) {
    for (const BedHost& h : GetBed().hosts) engines.push_back(h.docker_host);
  }
  // One shell, every engine at once: a listing by the record's own rule
  // (its name and its label), and one rm where it found entries.
  std::string script;
  for (const std::string& e : engines) {
    const std::string env = e.empty() ? "env -u DOCKER_HOST" : "env DOCKER_HOST=" + ssh::ShellQuote(e);
    script += "( ids=$(" + env +
              " timeout 20 docker ps -aq --filter 'name=^/?barge-fault-' --filter label=barge.fault) || "
              "{ echo 'cannot list the failure record on " + (e.empty() ? std::string("this machine") : e) +
              "'; exit; }; [ -z \"$ids\" ] || " + env + " timeout 20 docker rm -f $ids >/dev/null || "
              "echo 'cannot remove the failure record on " + (e.empty() ? std::string("this machine") : e) +
              "' ) &\n";
  }
  return RunShell(script + "wait\n");
}

namespace {

class BedHygiene : public ::testing::EmptyTestEventListener {
  // At the program's start: entries an earlier program left (one killed
  // mid-test; bed programs run one at a time). After each test: its own.
  // Only said, never a failure of the test: a machine without an engine of
  // its own still runs the bed's tests.
  void OnTestProgramStart(const ::testing::UnitTest&) override {
    setenv("XDG_CONFIG_HOME", SuiteConfigHome().c_str(), 1);
    Say(ClearFaultRecords());
  }
  void OnTestEnd(const ::testing::TestInfo&) override { Say(ClearFaultRecords()); }
  static void Say(const std::string& problems) {
    if (!problems.empty()) std::fprintf(stderr, "bed hygiene: %s", problems.c_str());
  }
};

// Registered before main runs (gtest_main's InitGoogleTest keeps it).
const bool kRegistered = [] {
  ::testing::UnitTest::GetInstance()->listeners().Append(new BedHygiene);
  return true;
}();

}  // namespace

}  // namespace barge::testing
