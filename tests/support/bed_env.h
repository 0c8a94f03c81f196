// Where the test bed is, for tests that need real sshd and dockerd.
//
// tests/bed/bed.sh up writes $BARGE_BED_DIR/bed.env (default
// /tmp/barge-bed/bed.env) as KEY=VALUE lines; GetBed() reads it. A test that
// needs the bed and cannot find it fails loudly: it never passes silently.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace barge::testing {

struct BedHost {
  std::string name;         // "lo" for the loopback host, "h1".. for namespace hosts
  std::string address;      // where its sshd listens
  int port = 22;
  std::string docker_host;  // DOCKER_HOST of that host's dockerd ("" = default socket)
};

struct Bed {
  std::string dir;
  std::string user;         // SSH user on every bed host
  std::string key;          // private key file, no passphrase
  std::string known_hosts;  // has every bed host's key
  std::string image;        // tiny busybox image present on every host's dockerd
  BedHost loopback;         // sshd on the machine itself, default dockerd
  std::vector<BedHost> hosts;  // namespace hosts, each with its own dockerd
  // An sshd that only the namespace host named `jump_via` can reach (a second
  // sshd in h3's namespaces on port 2022; every other source's TCP to it is
  // dropped), for ProxyJump tests. Its docker_host is h3's. Empty address and
  // jump_via on a bed with fewer than 3 namespace hosts.
  BedHost jump_target;
  std::string jump_via;
  std::map<std::string, std::string> raw;  // every key of bed.env
};

// The bed, loaded once. Aborts the test program with a clear message if
// bed.env is missing or incomplete (run tests/bed/bed.sh up, or ctest,
// whose "bed" fixture does it).
const Bed& GetBed();

// Runs `command` with /bin/sh, returns its stdout; sets *exit_code.
std::string RunShell(const std::string& command, int* exit_code = nullptr);

}  // namespace barge::testing
