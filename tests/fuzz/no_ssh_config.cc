// A stand-in for ssh::LookUpConfigHost in the libFuzzer build of the host
// parsers (tests/fuzz/CMakeLists.txt, barge_host_parsers_fuzzcopy):
// runner/remote/host_address.cc calls it from AddressesFromSshConfig (for
// `barge plan`), which no fuzz target calls, and the real one would bring
// the whole of ssh/ (sessions, libssh's config reader) into a build that
// needs none of it. Weak, so that where ssh/config_host.cc is linked too,
// the real one is used. Aborts if it is ever called.
#include <cstdio>
#include <cstdlib>

#include "ssh/config_host.h"

namespace barge::ssh {

__attribute__((weak)) Result<ConfigHost> LookUpConfigHost(const SessionOptions&) {
  std::fprintf(stderr, "no_ssh_config: LookUpConfigHost called in a fuzz target\n");
  std::abort();
}

}  // namespace barge::ssh
