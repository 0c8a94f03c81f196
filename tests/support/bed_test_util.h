// Helpers for ssh/'s bed tests (they need tests/support/bed_env.h's real sshd).
#pragma once

#include <string>

#include "ssh/session_options.h"
#include "tests/support/ssh_test_util.h"
#include "tests/support/bed_env.h"

namespace barge::ssh::testing {

// Options that reach the bed's loopback sshd with its key and known_hosts,
// isolated from ~/.ssh/config by an empty config file in `dir`.
inline SessionOptions BedOptions(const TempDir& dir) {
  const barge::testing::Bed& bed = barge::testing::GetBed();
  SessionOptions o;
  o.host = bed.loopback.address;
  o.port = bed.loopback.port;
  o.user = bed.user;
  o.identity_file = bed.key;
  o.known_hosts_file = bed.known_hosts;
  o.config_file = dir.File("empty_ssh_config");
  if (!Exists(o.config_file)) WriteFile(o.config_file, "");
  o.connect_timeout = std::chrono::seconds(10);
  return o;
}

// "user@address:port" of the bed's loopback sshd, as Session labels it.
inline std::string BedLabel() {
  const barge::testing::Bed& bed = barge::testing::GetBed();
  return bed.user + "@" + bed.loopback.address + ":" + std::to_string(bed.loopback.port);
}

}  // namespace barge::ssh::testing
